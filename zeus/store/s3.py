"""The MinIO / S3 backend, through the `minio` client.

Settings come from environment variables, which a Kubernetes Secret fills
(`kubernetes.use_secret_as_env`); they never travel as pipeline parameters and are never
logged or put in messages.

Conditional create: minio-py 7.2.20 has no public way to send `If-None-Match` (`put_object`
turns extra headers into `X-Amz-Meta-*`, silently dropping the condition), so `put_new` uses
the client's own signed request path (`Minio._put_object`, which sends headers verbatim and
signs them). MinIO (since 2024) and AWS S3 refuse a second create with 412.

Bounded waits: every request has a connect and a read timeout, and a request is retried (on
network errors, timeouts and 5xx answers, with exponential backoff) only while another try
could still finish within the retry budget. A hung server (it accepts the connection, then
never answers) therefore fails a step within ZEUS_S3_RETRY_BUDGET_S (30 s by default), with
the same one-line StoreUnavailableError as a refused connection. An answer that is not S3 (a
proxy's HTML page, say) with a 4xx status is not retried: StoreAnswerError says what came back.

On a server that ignores the header, a second `put_new` would overwrite. The store is built
so that this cannot lose rows: event keys are unique per trial and content-derived, number
claims that collide are settled by deterministic ordering on read, and compaction probes the
server (`conditional_writes_honoured`) and deletes nothing where the condition is ignored.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import InvalidResponseError, MinioException, S3Error, ServerError

from zeus.store.backend import ObjectNotFound, probe_exclusive_create
from zeus.store.errors import StoreAccessError, StoreAnswerError, StoreInputError, StoreUnavailableError

T = TypeVar("T")
ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "ExpiredToken"}
RETRYABLE_CODES = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "ConditionalRequestConflict"}
RETRYABLE_STATUS = {408, 429}  # besides 5xx: the server asks to be tried again
CALLER_CODES = {"NoSuchKey", "PreconditionFailed", "BucketAlreadyOwnedByYou", "BucketAlreadyExists"}  # handled above


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
    """Where the bucket is and how to reach it. `secret_key` is kept out of repr on purpose."""

    endpoint: str  # host:port
    secure: bool
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    region: str = "us-east-1"
    create_bucket: bool = True
    max_attempts: int = 5
    backoff_s: float = 0.25
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0  # a request whose answer stalls this long is abandoned (and retried)
    retry_budget_s: float = 30.0  # no retry starts that could not finish within this

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
            create_bucket=_flag("ZEUS_S3_CREATE_BUCKET", True),
            max_attempts=int(attempts),
            connect_timeout_s=_seconds("ZEUS_S3_CONNECT_TIMEOUT_S", cls.connect_timeout_s),
            read_timeout_s=_seconds("ZEUS_S3_READ_TIMEOUT_S", cls.read_timeout_s),
            retry_budget_s=_seconds("ZEUS_S3_RETRY_BUDGET_S", cls.retry_budget_s),
        )


class S3Backend:
    """Objects under `s3://bucket/prefix` on a MinIO or S3 server."""

    def __init__(self, bucket: str, prefix: str, settings: S3Settings) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.settings = settings
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.location = f"endpoint {settings.endpoint}, bucket {bucket}"
        self.endpoint_url = endpoint_url(settings.endpoint, settings.secure)
        # Our own pool: no urllib3 retries (we retry with backoff and then name the endpoint),
        # short connect timeout, enough connections for parallel gets.
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=settings.connect_timeout_s, read=settings.read_timeout_s),
            maxsize=16,
            retries=urllib3.Retry(total=0, connect=0, read=0, redirect=0, status=0),
        )
        self.client = Minio(
            settings.endpoint,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            secure=settings.secure,
            region=settings.region,
            http_client=http,
        )
        self._ready = False
        self._lock = threading.Lock()
        self._honoured: bool | None = None

    # -- plumbing -----------------------------------------------------------------------------

    def _call(self, what: Callable[[], T]) -> T:
        """Run one request with bounded exponential backoff on network errors, timeouts and 5xx
        answers, starting no retry that could not finish within the retry budget."""
        started, last, attempt = time.monotonic(), "", 0
        settings = self.settings
        while attempt < settings.max_attempts:
            attempt += 1
            try:
                return what()
            except S3Error as exc:
                if exc.code in ACCESS_CODES:
                    raise StoreAccessError(self.endpoint_url, self.bucket, exc.code, self.prefix) from None
                status = exc.response.status if exc.response is not None else 0
                if exc.code not in RETRYABLE_CODES and status < 500 and status not in RETRYABLE_STATUS:
                    if exc.code in CALLER_CODES or status == 412:
                        raise
                    raise StoreAnswerError(self.endpoint_url, self.bucket, status, f"S3 {exc.code}") from None
                last = f"S3 {exc.code}"
            except (ServerError, InvalidResponseError) as exc:
                status = exc.status_code if isinstance(exc, ServerError) else int(getattr(exc, "_code", 0) or 0)
                if status < 500 and status not in RETRYABLE_STATUS:
                    raise StoreAnswerError(self.endpoint_url, self.bucket, status, str(exc)) from None
                last = f"HTTP {status}"
            except (urllib3.exceptions.HTTPError, OSError, MinioException) as exc:
                reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps what happened
                last = type(reason if isinstance(reason, Exception) else exc).__name__
            pause = min(settings.backoff_s * 2 ** (attempt - 1), 5.0)
            if time.monotonic() - started + pause + settings.read_timeout_s > settings.retry_budget_s:
                last += f"; gave up within the {settings.retry_budget_s:g} s retry budget"
                break
            if attempt < settings.max_attempts:
                time.sleep(pause)
        raise StoreUnavailableError(self.endpoint_url, self.bucket, attempt, last)

    def _ensure_bucket(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if not self._call(lambda: self.client.bucket_exists(self.bucket)):
                if not self.settings.create_bucket:
                    raise StoreUnavailableError(
                        self.endpoint_url, self.bucket, 1, "bucket does not exist and ZEUS_S3_CREATE_BUCKET is false"
                    )
                try:
                    self._call(lambda: self.client.make_bucket(self.bucket, location=self.settings.region))
                except S3Error as exc:
                    if exc.code not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                        raise
            self._ready = True

    def _key(self, key: str) -> str:
        return self.prefix + key

    # -- Backend ------------------------------------------------------------------------------

    def put_new(self, key: str, data: bytes) -> bool:
        self._ensure_bucket()
        headers = {"If-None-Match": "*", "Content-Type": "application/octet-stream"}
        try:
            self._call(lambda: self.client._put_object(self.bucket, self._key(key), data, headers=headers))
        except S3Error as exc:
            if exc.code == "PreconditionFailed" or (exc.response is not None and exc.response.status == 412):
                return False
            raise
        return True

    def put_cache(self, key: str, data: bytes) -> bool:
        return self.put_new(key, data)  # an acknowledged PUT is durable already

    def get(self, key: str) -> bytes:
        self._ensure_bucket()

        def fetch() -> bytes:
            response = self.client.get_object(self.bucket, self._key(key))
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

        try:
            return self._call(fetch)
        except S3Error as exc:
            if exc.code == "NoSuchKey":
                raise ObjectNotFound(key) from None
            raise

    def get_many(self, keys: list[str]) -> dict[str, bytes | None]:
        def one(key: str) -> bytes | None:
            try:
                return self.get(key)
            except ObjectNotFound:
                return None

        if len(keys) <= 1:
            return {key: one(key) for key in keys}
        with ThreadPoolExecutor(max_workers=min(16, len(keys))) as pool:
            return dict(zip(keys, pool.map(one, keys), strict=True))

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        self._ensure_bucket()
        full = self._key(prefix)
        after = self._key(start_after) if start_after else None

        def listing() -> list[str]:
            objects = self.client.list_objects(self.bucket, prefix=full, recursive=True, start_after=after)
            return [obj.object_name[len(self.prefix) :] for obj in objects]

        return sorted(self._call(listing))

    def list_times(self, prefix: str) -> dict[str, float]:
        self._ensure_bucket()

        def listing() -> dict[str, float]:
            objects = self.client.list_objects(self.bucket, prefix=self._key(prefix), recursive=True)
            return {obj.object_name[len(self.prefix) :]: obj.last_modified.timestamp() for obj in objects}

        return self._call(listing)

    def list_dirs(self, prefix: str) -> list[str]:
        self._ensure_bucket()

        def listing() -> list[str]:
            objects = self.client.list_objects(self.bucket, prefix=self._key(prefix), recursive=False)
            return [obj.object_name[len(self.prefix) :] for obj in objects if obj.is_dir]

        return sorted(self._call(listing))

    def delete(self, keys: list[str]) -> None:
        if not keys:
            return
        self._ensure_bucket()
        for start in range(0, len(keys), 1000):
            batch = [DeleteObject(self._key(k)) for k in keys[start : start + 1000]]

            def remove(batch: list[DeleteObject] = batch) -> list[str]:
                return [f"{err.name}: {err.code}" for err in self.client.remove_objects(self.bucket, batch)]

            errors = self._call(remove)
            if errors:
                raise RuntimeError(f"could not delete {len(errors)} objects in {self.location}: {errors[:3]}")

    def conditional_writes_honoured(self) -> bool:
        """Probe once: create a scratch key twice; a server that honours If-None-Match refuses the second."""
        if self._honoured is None:
            self._honoured = probe_exclusive_create(self)
        return self._honoured
