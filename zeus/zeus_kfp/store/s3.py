"""The MinIO / S3 backend, through the `minio` client: object-level GET, PUT, LIST and DELETE only.

GetObject, PutObject (plain, unconditional: backend.py says why), ListObjectsV2 under a prefix
(recursive, or one level with delimiter '/') and DeleteObject of one key. Never HeadBucket,
GetBucketLocation, ListBuckets or a multi-object delete: a Kubeflow 1.11 namespace key is refused all
four (TESTING.md). The client is given the region, so minio-py 7.2.20 never asks where the bucket is
(`Minio._get_region` returns it before any request); its HeadBucket is `bucket_exists`, never called.
The bucket is assumed to exist: a NoSuchBucket answer creates it once, only if ZEUS_S3_CREATE_BUCKET.
Settings come from environment variables (a Kubernetes Secret fills them); credentials are never
logged or put in messages.

Bounded waits: one request's tries all end within ZEUS_S3_RETRY_BUDGET_S (30 s). Network errors,
timeouts and 5xx are retried with exponential backoff; a 4xx that is not S3 (a proxy's HTML page) is
StoreAnswerError at once. urllib3's timeouts bound one socket operation, not a request: a server
that answers 200 and then drips a byte every few seconds, or takes a PUT and never answers, would
hold a step for ever. So each try runs in a thread of its own, waited on for what is left of the
budget, and abandoned when it runs out (StoreUnavailableError). A fresh daemon thread per try, not a
pool: concurrent.futures joins its workers at interpreter exit (one hung try would hang the step's
exit) and hung tries would fill a small pool and starve the requests after them; a thread start is
~0.1 ms beside a request's milliseconds. An abandoned try's thread ends with its socket (read
timeout, or the server closing); an abandoned PUT may still land later, like any PUT whose answer
was lost. A listing is one request per page of 1,000 keys: its budget starts again whenever a page
arrives, and a retry resumes after the last key received.
"""

from __future__ import annotations

import http.client
import io
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import urllib3
from minio import Minio
from minio.error import InvalidResponseError, S3Error, ServerError
from minio.helpers import MAX_PART_SIZE, MIN_PART_SIZE

from zeus_kfp.store.backend import ObjectNotFound
from zeus_kfp.store.errors import (
    DeleteRefusedError,
    StoreAccessError,
    StoreAnswerError,
    StoreError,
    StoreInputError,
    StoreUnavailableError,
)

T = TypeVar("T")
ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "ExpiredToken"}
RETRYABLE_CODES = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"}
RETRYABLE_STATUS = {408, 429}  # besides 5xx: the server asks to be tried again
NETWORK_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
BUCKET_MADE = frozenset({"BucketAlreadyOwnedByYou", "BucketAlreadyExists"})
NO_KEY = frozenset({"NoSuchKey"})


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 86_400:
        raise StoreInputError(name, raw, "a positive number of seconds")
    return value


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return _flag_value(name, raw)


def _flag_value(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise StoreInputError(name, raw, "true or false (1/0, yes/no, on/off)")


def resolve_endpoint(raw: str, secure: str | None = None) -> tuple[str, bool]:
    """The one rule for http or https to the store, used by the store, `zeus-kfp compile` and the CLI.

    A scheme in the endpoint decides (`http://host:port` or `https://host:port`). A bare `host:port`
    is plain http unless ZEUS_S3_SECURE (`secure`) says true: that is what a Kubeflow user's store
    is, KFP's own MinIO (`minio-service.kubeflow:9000`) and SeaweedFS (`seaweedfs.kubeflow:9000`)
    serve plain http inside the cluster, and KFP's own object-store config defaults to insecure.
    A scheme and a ZEUS_S3_SECURE that disagree are refused rather than one silently winning.
    Returns (host:port, secure).
    """
    endpoint = (raw or "").strip()
    if not endpoint:
        raise StoreInputError(
            "ZEUS_S3_ENDPOINT", raw, "host:port or http(s)://host:port of the MinIO/S3 server (env variable)"
        )
    flag = None if secure is None or secure.strip() == "" else _flag_value("ZEUS_S3_SECURE", secure)
    scheme_secure = None
    for scheme, is_secure in (("https://", True), ("http://", False)):
        if endpoint.lower().startswith(scheme):
            endpoint, scheme_secure = endpoint[len(scheme) :], is_secure
    endpoint = endpoint.rstrip("/")
    if not endpoint or "/" in endpoint:
        raise StoreInputError("ZEUS_S3_ENDPOINT", raw, "host:port or http(s)://host:port, no path")
    if scheme_secure is not None and flag is not None and flag != scheme_secure:
        raise StoreInputError(
            "ZEUS_S3_SECURE",
            secure,
            f"{str(scheme_secure).lower()} or unset: ZEUS_S3_ENDPOINT={raw!r} already says "
            f"{'https' if scheme_secure else 'http'} (the scheme decides; a bare host:port is http)",
        )
    if scheme_secure is not None:
        return endpoint, scheme_secure
    return endpoint, bool(flag)


def endpoint_url(endpoint: str, secure: bool) -> str:
    """`host:port` and the rule's outcome as the URL a pod or a person can read unambiguously."""
    return f"{'https' if secure else 'http'}://{endpoint}"


@dataclass(frozen=True)
class S3Settings:
    """Where the bucket is and how to reach it. The credentials are kept out of repr on purpose."""

    endpoint: str  # host:port
    secure: bool
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    region: str = "us-east-1"
    create_bucket: bool = False  # a namespace key may not create buckets; KFP's `mlpipeline` exists
    max_attempts: int = 5
    backoff_s: float = 0.25
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0  # one socket read that stalls this long fails the try (and is retried)
    retry_budget_s: float = 30.0  # all tries of one request end within this

    @classmethod
    def from_env(cls) -> S3Settings:
        endpoint, secure = resolve_endpoint(os.environ.get("ZEUS_S3_ENDPOINT", ""), os.environ.get("ZEUS_S3_SECURE"))
        attempts = os.environ.get("ZEUS_S3_MAX_ATTEMPTS", "5")
        if not attempts.isdigit() or int(attempts) < 1:
            raise StoreInputError("ZEUS_S3_MAX_ATTEMPTS", attempts, "a positive integer")
        return cls(
            endpoint=endpoint,
            secure=secure,
            access_key=os.environ.get("ZEUS_S3_ACCESS_KEY") or os.environ.get("AWS_ACCESS_KEY_ID"),
            secret_key=os.environ.get("ZEUS_S3_SECRET_KEY") or os.environ.get("AWS_SECRET_ACCESS_KEY"),
            region=os.environ.get("ZEUS_S3_REGION") or "us-east-1",
            create_bucket=_flag("ZEUS_S3_CREATE_BUCKET", False),
            max_attempts=int(attempts),
            connect_timeout_s=_seconds("ZEUS_S3_CONNECT_TIMEOUT_S", cls.connect_timeout_s),
            read_timeout_s=_seconds("ZEUS_S3_READ_TIMEOUT_S", cls.read_timeout_s),
            retry_budget_s=_seconds("ZEUS_S3_RETRY_BUDGET_S", cls.retry_budget_s),
        )


def _in_thread(attempt: Callable[[], T]) -> Future[T]:
    """Start one try in a daemon thread of its own (the module doc says why not a pool)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(attempt())
        except BaseException as exc:  # handed to the waiting caller, who decides
            future.set_exception(exc)

    threading.Thread(target=run, name="zeus-s3-request", daemon=True).start()
    return future


def _no_progress() -> int:
    return 0


class S3Backend:
    """Objects under `s3://bucket/prefix` on a MinIO, SeaweedFS or S3 server (the Backend protocol)."""

    parallel = 16  # GETs at once that pay off against a server; also the connection pool's size

    def __init__(self, bucket: str, prefix: str, settings: S3Settings) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.settings = settings
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.endpoint_url = endpoint_url(settings.endpoint, settings.secure)
        self.location = f"{self.uri} at {self.endpoint_url}"
        # Our own pool: no urllib3 retries (we retry with backoff and then name the endpoint).
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=settings.connect_timeout_s, read=settings.read_timeout_s),
            maxsize=self.parallel,
            retries=urllib3.Retry(total=0, connect=0, read=0, redirect=0, status=0),
        )
        self.client = Minio(
            settings.endpoint,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            secure=settings.secure,
            region=settings.region,  # never GetBucketLocation
            http_client=http,
        )
        self._lock = threading.Lock()
        self._made_bucket = False

    def __repr__(self) -> str:
        return f"S3Backend({self.location})"

    # -- plumbing -----------------------------------------------------------------------------

    def _call(
        self,
        request: str,
        attempt: Callable[[], T],
        passes: frozenset[str] = frozenset(),
        progress: Callable[[], int] = _no_progress,
    ) -> T:
        """Run `attempt` until it succeeds, fails in a way no retry changes, or the budget is spent.

        An S3 error whose code is in `passes` goes to the caller as is (NoSuchKey, NoSuchBucket). A
        `progress` that grows (keys listed) starts the budget and the count of tries again.
        """
        settings, operation = self.settings, request.split(" ", 1)[0]
        budget = settings.retry_budget_s
        deadline, seen, tries = time.monotonic() + budget, progress(), 0
        while True:
            tries += 1
            future = _in_thread(attempt)
            while not wait([future], timeout=max(0.0, deadline - time.monotonic())).done:
                if progress() == seen:  # abandoned: its thread ends with its socket
                    cause = f"{operation} not answered in full; gave up within the {budget:g} s retry budget"
                    raise StoreUnavailableError(self.endpoint_url, self.bucket, tries, cause)
                deadline, seen, tries = time.monotonic() + budget, progress(), 1
            try:
                return future.result()
            except S3Error as exc:
                if exc.code in passes:
                    raise
                last = f"{operation}: {self._retryable(request, exc)}"
            except Exception as exc:
                last = f"{operation}: {self._retryable(request, exc)}"
            if progress() != seen:  # this try got a page further before it failed: a new page's first
                deadline, seen, tries = time.monotonic() + budget, progress(), 1
            pause = min(settings.backoff_s * 2 ** (tries - 1), 5.0)
            if tries >= settings.max_attempts or time.monotonic() + pause >= deadline:
                if tries < settings.max_attempts:
                    last += f"; gave up within the {budget:g} s retry budget"
                raise StoreUnavailableError(self.endpoint_url, self.bucket, tries, last)
            time.sleep(pause)

    def _retryable(self, request: str, exc: Exception) -> str:
        """What went wrong, if another try may help ("S3 SlowDown", "HTTP 503", "ReadTimeoutError");
        otherwise the store's own error for it, raised."""
        if isinstance(exc, S3Error):
            status = exc.response.status if exc.response is not None else 0
            if exc.code in ACCESS_CODES:
                raise StoreAccessError(self.endpoint_url, self.bucket, exc.code, self.prefix, request) from None
            if exc.code in RETRYABLE_CODES or status >= 500 or status in RETRYABLE_STATUS:
                return f"S3 {exc.code}"
            raise StoreAnswerError(self.endpoint_url, self.bucket, status, f"S3 {exc.code} to {request}") from None
        if isinstance(exc, ServerError | InvalidResponseError):
            status = exc.status_code if isinstance(exc, ServerError) else int(getattr(exc, "_code", 0) or 0)
            if status < 500 and status not in RETRYABLE_STATUS:
                raise StoreAnswerError(self.endpoint_url, self.bucket, status, f"{request}: {exc}") from None
            return f"HTTP {status}"
        if isinstance(exc, NETWORK_ERRORS):
            reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps what happened
            return type(reason if isinstance(reason, Exception) else exc).__name__
        raise exc  # a bug, not the server: no retry

    def _request(
        self,
        request: str,
        attempt: Callable[[], T],
        passes: frozenset[str] = frozenset(),
        progress: Callable[[], int] = _no_progress,
    ) -> T:
        """`_call`, and what NoSuchBucket means: the bucket is made once where allowed, else an error."""
        passes = passes | {"NoSuchBucket"}
        try:
            return self._call(request, attempt, passes, progress)
        except S3Error as exc:
            if exc.code != "NoSuchBucket":
                raise
        if self.settings.create_bucket:
            self._make_bucket()
            try:
                return self._call(request, attempt, passes, progress)
            except S3Error as exc:
                if exc.code != "NoSuchBucket":
                    raise
        hint = "it was made and is gone again" if self._made_bucket else "or set ZEUS_S3_CREATE_BUCKET=true"
        raise StoreError(
            f"bucket {self.bucket!r} does not exist at endpoint {self.endpoint_url!r}: create it ({hint}; "
            "a Kubeflow namespace key may not create buckets, KFP's bucket is mlpipeline)"
        )

    def _make_bucket(self) -> None:
        """CreateBucket, once per backend (concurrent requests that all saw NoSuchBucket wait for it)."""
        with self._lock:
            if self._made_bucket:
                return
            try:
                make = partial(self.client.make_bucket, self.bucket, self.settings.region)
                self._call(f"CreateBucket of {self.bucket}", make, BUCKET_MADE)
            except S3Error as exc:
                if exc.code not in BUCKET_MADE:
                    raise
            self._made_bucket = True

    # -- Backend ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        name = self.prefix + key

        def attempt() -> bytes:
            response = self.client.get_object(self.bucket, name)
            try:
                return response.read()  # a body cut short fails (urllib3 checks Content-Length)
            finally:
                response.close()
                response.release_conn()

        try:
            return self._request(f"GetObject of {key}", attempt, NO_KEY)
        except S3Error as exc:
            if exc.code == "NoSuchKey":
                raise ObjectNotFound(key) from None
            raise

    def put(self, key: str, data: bytes) -> None:
        """One PutObject whatever the size up to 5 GiB (a part size of at least the object's), so a
        reader sees the old bytes or the new, and no multipart upload is left behind by a failure."""
        name, part_size = self.prefix + key, min(max(len(data), MIN_PART_SIZE), MAX_PART_SIZE)

        def attempt() -> None:
            self.client.put_object(self.bucket, name, io.BytesIO(data), len(data), part_size=part_size)

        self._request(f"PutObject of {key}", attempt)

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        names: list[str] = []
        first = self.prefix + start_after if start_after else None

        def attempt() -> None:  # a retry goes on after the last key received
            after = names[-1] if names else first
            objects = self.client.list_objects(self.bucket, self.prefix + prefix, recursive=True, start_after=after)
            names.extend(obj.object_name for obj in objects)

        self._request(f"ListObjectsV2 of prefix {prefix}", attempt, progress=names.__len__)
        return sorted(name[len(self.prefix) :] for name in names)

    def list_dirs(self, prefix: str) -> list[str]:
        names: list[str] = []  # keys and folders, as listed
        dirs: set[str] = set()

        def attempt() -> None:  # resuming after a folder lists it again: `dirs` is a set
            after = names[-1] if names else None
            for obj in self.client.list_objects(self.bucket, self.prefix + prefix, start_after=after):
                names.append(obj.object_name)
                if obj.is_dir:
                    dirs.add(obj.object_name[len(self.prefix) :])

        self._request(f"ListObjectsV2 of prefix {prefix} with delimiter /", attempt, progress=names.__len__)
        return sorted(dirs)

    def delete(self, key: str) -> None:
        """DeleteObject of one key; refused (AccessDenied, a Kubeflow 1.11 key) is DeleteRefusedError."""
        name = self.prefix + key
        try:
            self._request(f"DeleteObject of {key}", lambda: self.client.remove_object(self.bucket, name), NO_KEY)
        except StoreAccessError as exc:
            if exc.code != "AccessDenied":
                raise
            raise DeleteRefusedError(key, self.location, exc.code) from None
        except S3Error as exc:
            if exc.code != "NoSuchKey":  # gone already
                raise
