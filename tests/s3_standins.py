"""Stand-ins for the object stores Kubeflow ships, as reverse proxies in front of the tests' S3 server.

The store must be right on the servers users actually have, not only on one that behaves like AWS:
Kubeflow 1.11 ships SeaweedFS 4.00, whose `If-None-Match: *` is a lookup then a write with no lock
(`racy`); its per-namespace key may do object-level Put/Get/List under a few prefixes and nothing
else (`least-privilege`); Kubeflow 1.10 ships a MinIO from 2019 that ignores conditional headers
(`ignored`). No such server can be installed here, so each is modelled as a small threaded HTTP proxy
on 127.0.0.1 (port 0) that forwards requests verbatim to moto (or to the server in
ZEUS_TEST_S3_ENDPOINT) and changes only what the real server does differently. The client signs for
the proxy's host:port and the Host header is forwarded as sent, so the upstream sees a valid request.
`atomic` is the upstream itself: conditional PUTs decided one at a time, as AWS S3 and MinIO do.

Imported as `s3_standins` (tests/ is on sys.path under pytest); fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, Protocol
from xml.sax.saxutils import escape

from minio import Minio
from minio.error import S3Error

FLAVOURS = ("atomic", "racy", "ignored", "least-privilege")
KUBEFLOW_BUCKET = "mlpipeline"
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_ABSENT_CODES = frozenset({"NoSuchKey", "NoSuchObject", "ResourceNotFound", "NotFound"})


@dataclass(frozen=True)
class Upstream:
    """The real S3 server behind the proxies, and a key for the proxies' own requests to it."""

    endpoint: str  # host:port
    access_key: str
    secret_key: str
    secure: bool = False
    region: str = "us-east-1"

    def client(self) -> Minio:
        """A minio client for the upstream itself (probes and bucket creation, never through a proxy)."""
        return Minio(self.endpoint, self.access_key, self.secret_key, secure=self.secure, region=self.region)

    def ensure_bucket(self, bucket: str) -> None:
        """Create `bucket` on the upstream if it is not there (moto answers 200 for a bucket you own)."""
        try:
            self.client().make_bucket(bucket)
        except S3Error as error:
            if error.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def exists(self, bucket: str, key: str) -> bool:
        """HEAD `bucket/key` on the upstream: True if the object is there."""
        try:
            self.client().stat_object(bucket, key)
        except S3Error as error:
            if error.code in _ABSENT_CODES:
                return False
            raise
        return True

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The ZEUS_S3_* variables that point the store at `endpoint` (default: the upstream) with this key."""
        return {
            "ZEUS_S3_ENDPOINT": endpoint or self.endpoint,
            "ZEUS_S3_ACCESS_KEY": self.access_key,
            "ZEUS_S3_SECRET_KEY": self.secret_key,
            "ZEUS_S3_SECURE": "true" if self.secure and endpoint is None else "false",
            "ZEUS_S3_REGION": self.region,
        }


@dataclass(frozen=True)
class Request:
    """One client request as received: forwarded as is unless a flavour returns a changed copy."""

    method: str
    target: str  # path and query, still percent-encoded, as on the request line
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)

    def without(self, *names: str) -> Request:
        """A copy without the headers `names` (case-insensitive)."""
        drop = {name.lower() for name in names}
        return replace(self, headers=tuple((key, value) for key, value in self.headers if key.lower() not in drop))

    @property
    def path(self) -> str:
        """The percent-encoded path, without the query."""
        return urllib.parse.urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """The decoded query parameters (a sub-resource such as `?delete` maps to "")."""
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.target).query, keep_blank_values=True))

    def bucket_and_key(self) -> tuple[str, str]:
        """Path-style `/bucket/key` decoded; ("", "") for `/`, (bucket, "") for `/bucket`."""
        bucket, _, key = self.path.lstrip("/").partition("/")
        return urllib.parse.unquote(bucket), urllib.parse.unquote(key)


@dataclass(frozen=True)
class Reply:
    """An answer the proxy gives itself, in place of forwarding."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def s3_error(status: int, code: str, message: str, resource: str, **extra: str) -> Reply:
    """A reply with S3's XML error body, as AWS S3 / MinIO / SeaweedFS send it."""
    request_id = uuid.uuid4().hex[:16].upper()
    fields = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in extra.items())
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{escape(message)}</Message>{fields}"
        f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode()
    return Reply(status, body, (("Content-Type", "application/xml"), ("x-amz-request-id", request_id)))


class Flavour(Protocol):
    """What a stand-in does differently: answer a request itself, or hand back the request to forward."""

    def decide(self, request: Request) -> Request | Reply: ...


class Refusal(NamedTuple):
    """A request the least-privilege key was refused: what a test asserts on (`path` without the query;
    `reason` names the S3 operation or the prefix that was outside, e.g. "HeadBucket")."""

    method: str
    path: str
    reason: str


class Racy:
    """SeaweedFS 4.00's create-if-absent: HEAD the key, answer 412 if it is there, else write unconditionally.

    Between the check and the write it waits `delay_s`, and first on `barrier` if one is given, so a
    test can make two creates both pass the check before either writes: a certain race, no timing.
    """

    def __init__(self, upstream: Upstream, delay_s: float = 0.02, barrier: threading.Barrier | None = None) -> None:
        self.upstream = upstream
        self.delay_s = delay_s
        self.barrier = barrier

    def decide(self, request: Request) -> Request | Reply:
        bucket, key = request.bucket_and_key()
        if request.method != "PUT" or request.header("If-None-Match") != "*" or not key:
            return request
        if self.upstream.exists(bucket, key):
            message = "At least one of the pre-conditions you specified did not hold"
            return s3_error(412, "PreconditionFailed", message, request.path, Condition="If-None-Match")
        if self.barrier is not None:
            self.barrier.wait()
        time.sleep(self.delay_s)
        return request.without("If-None-Match")


class Ignored:
    """MinIO RELEASE.2019-08, older than conditional PUTs: If-None-Match / If-Match never reach the server."""

    def decide(self, request: Request) -> Request | Reply:
        return request.without("If-None-Match", "If-Match")


_LIST_PARAMS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "marker",
        "max-keys",
        "continuation-token",
        "start-after",
        "fetch-owner",
        "encoding-type",
        "metadata",  # MinIO's extension for user metadata in listings
    }
)


class LeastPrivilege:
    """The Kubeflow 1.11 per-namespace key: object-level Get/Put/List under a few prefixes of `mlpipeline`.

    Everything else (HeadBucket, GetBucketLocation, ListBuckets, CreateBucket, multi-object delete,
    DeleteObject, listing without a prefix or outside the allowed ones, any other bucket) is 403
    AccessDenied, recorded in `refused`. `allow_delete=True` is KFP 2.17's key: it adds DeleteObject
    and HeadBucket. PUT covers PutObject, CopyObject (source checked too) and the multipart calls
    (which IAM authorizes as s3:PutObject); other PUT sub-resources are refused.
    """

    def __init__(self, namespace: str = "ns1", allow_delete: bool = False) -> None:
        self.namespace = namespace
        self.allow_delete = allow_delete
        self.prefixes = ("artifacts/", f"private-artifacts/{namespace}/", f"private/{namespace}/", "shared/")
        self.refused: list[Refusal] = []

    def allowed(self, bucket: str, key: str) -> bool:
        """Whether `key` (or a listing prefix) lies under one of the allowed prefixes of `mlpipeline`."""
        return bucket == KUBEFLOW_BUCKET and key.startswith(self.prefixes)

    def decide(self, request: Request) -> Request | Reply:
        reason = self.refusal(request)
        if reason is None:
            return request
        self.refused.append(Refusal(request.method, request.path, reason))
        return s3_error(403, "AccessDenied", "Access Denied", request.path)

    def refusal(self, request: Request) -> str | None:
        """Why this key may not make `request`, or None when it may."""
        method, query = request.method, request.query
        bucket, key = request.bucket_and_key()
        if not bucket:
            return "ListBuckets" if method == "GET" else f"{method} on the service"
        if bucket != KUBEFLOW_BUCKET:
            return f"bucket {bucket} is not {KUBEFLOW_BUCKET}"
        if not key:
            return self._bucket_refusal(method, query)
        if not self.allowed(bucket, key):
            return f"key {key} is outside the allowed prefixes"
        return self._object_refusal(method, query, request.header("x-amz-copy-source"))

    def _bucket_refusal(self, method: str, query: dict[str, str]) -> str | None:
        if method == "HEAD":
            return None if self.allow_delete else "HeadBucket"
        if method == "PUT":
            return "CreateBucket" if not query else f"PutBucket {','.join(sorted(query))}"
        if method == "POST" and "delete" in query:
            return "multi-object delete"
        if method != "GET":
            return f"{method} on the bucket"
        if "location" in query:
            return "GetBucketLocation"
        other = sorted(set(query) - _LIST_PARAMS)
        if other:
            return f"bucket sub-resource {','.join(other)}"
        prefix = query.get("prefix", "")
        if not prefix:
            return "list without a prefix"
        if not self.allowed(KUBEFLOW_BUCKET, prefix):
            return f"list prefix {prefix} is outside the allowed prefixes"
        return None

    def _object_refusal(self, method: str, query: dict[str, str], copy_source: str | None) -> str | None:
        if method in ("GET", "HEAD"):
            return None  # s3:Get* covers every object-level read
        if method == "DELETE":
            if "uploadId" in query:
                return "AbortMultipartUpload"
            return None if self.allow_delete else "DeleteObject"
        if method == "POST":
            return None if set(query) in ({"uploads"}, {"uploadId"}) else f"POST {','.join(sorted(query))}"
        if method != "PUT":
            return f"{method} on an object"
        if query and set(query) != {"partNumber", "uploadId"}:
            return f"PUT sub-resource {','.join(sorted(query))}"
        if copy_source is not None:
            source_bucket, _, source_key = urllib.parse.unquote(copy_source).lstrip("/").partition("/")
            if not self.allowed(source_bucket, source_key.split("?", 1)[0]):
                return f"copy source {copy_source} is outside the allowed prefixes"
        return None


class _ProxyServer(ThreadingHTTPServer):
    """The proxy. It forwards the PUTs of one key one at a time: moto 5.2 is not safe for two PUTs of one
    key at once (the second closes the first's buffer while moto still computes the first's ETag, so the
    first is answered 500, the client retries, and a create the flavour let through comes back 412).
    SeaweedFS and MinIO answer both; serialising them here keeps what the flavour decided, since both
    requests have already passed its check."""

    daemon_threads = True

    def __init__(self, upstream: Upstream, flavour: Flavour) -> None:
        self.upstream = upstream
        self.flavour = flavour
        self._put_locks: dict[tuple[str, str], threading.Lock] = {}
        self._put_locks_guard = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    def put_lock(self, request: Request) -> threading.Lock | None:
        """The lock one key's PUTs are forwarded under; None for every other request."""
        bucket, key = request.bucket_and_key()
        if request.method != "PUT" or not key:
            return None
        with self._put_locks_guard:
            return self._put_locks.setdefault((bucket, key), threading.Lock())


class _ProxyHandler(BaseHTTPRequestHandler):
    """Reads a request, lets the flavour decide, then answers itself or forwards and streams the reply back."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the minio client's connection pool expects
    timeout = 60  # an idle keep-alive connection is closed after this
    server: _ProxyServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        return

    def do_GET(self) -> None:
        request = self._read_request()
        try:
            decided = self.server.flavour.decide(request)
        except (OSError, S3Error, threading.BrokenBarrierError) as error:
            decided = s3_error(502, "BadGateway", f"stand-in proxy: {error!r}", request.path)
        if isinstance(decided, Reply):
            self._send(decided.status, decided.headers, decided.body)
        else:
            self._forward(decided)

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def _read_request(self) -> Request:
        headers = tuple(self.headers.items())
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            body = self._read_chunked()
            headers = (*headers, ("Content-Length", str(len(body))))
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        kept = tuple((key, value) for key, value in headers if key.lower() not in _HOP_BY_HOP)
        return Request(self.command, self.path, kept, body)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while size := int(self.rfile.readline().split(b";", 1)[0].strip(), 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b"".join(parts)

    def _forward(self, request: Request) -> None:
        upstream = self.server.upstream
        host, _, port = upstream.endpoint.rpartition(":")
        connection_class = http.client.HTTPSConnection if upstream.secure else http.client.HTTPConnection
        connection = connection_class(host, int(port), timeout=60)
        lock = self.server.put_lock(request)
        if lock is not None:
            lock.acquire()
        try:
            try:
                connection.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
                for key, value in request.headers:
                    connection.putheader(key, value)
                connection.endheaders(request.body or None)
                response = connection.getresponse()
            except OSError as error:
                reply = s3_error(502, "BadGateway", f"stand-in proxy: upstream {error!r}", request.path)
                self._send(reply.status, reply.headers, reply.body)
                return
            headers = [(key, value) for key, value in response.getheaders() if key.lower() not in _HOP_BY_HOP]
            if request.method == "HEAD" or response.status in (204, 304):
                self._send(response.status, headers, b"", reason=response.reason, with_length=False)
            elif response.getheader("Content-Length") is not None:
                self._send(response.status, headers, b"", reason=response.reason, with_length=False)
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    self.wfile.write(chunk)
            else:  # chunked or close-delimited upstream: buffer it, send with a length
                self._send(response.status, headers, response.read(), reason=response.reason)
        finally:
            connection.close()
            if lock is not None:
                lock.release()

    def _send(
        self,
        status: int,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        reason: str | None = None,
        with_length: bool = True,
    ) -> None:
        self.send_response_only(status, reason)
        for key, value in headers:
            if not (with_length and key.lower() == "content-length"):
                self.send_header(key, value)
        if with_length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)


@dataclass
class StandIn:
    """One running stand-in: where it listens, the ZEUS_S3_* variables for it, what it refused."""

    flavour: str
    endpoint: str  # host:port
    env: dict[str, str] = field(repr=False)
    refused: list[Refusal] = field(default_factory=list, repr=False)
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)

    def stop(self) -> None:
        """Stop the proxy (nothing for `atomic`, which is the upstream itself)."""
        self._stop()


StartStandIn = Callable[..., StandIn]  # the `s3_standin` fixture: start(flavour, **options) -> StandIn


def start_standin(flavour: str, upstream: Upstream, **options: object) -> StandIn:
    """Start `flavour` in front of `upstream`. Options go to its class (racy: `delay_s`, `barrier`;
    least-privilege: `namespace`, `allow_delete`; an option a flavour lacks is a TypeError).
    least-privilege creates `mlpipeline` on the upstream first, since its key may not create buckets."""
    behaviour: Flavour
    if flavour == "atomic":
        if options:
            raise TypeError(f"the atomic stand-in takes no options, got {sorted(options)}")
        return StandIn(flavour, upstream.endpoint, upstream.env())
    if flavour == "racy":
        behaviour = Racy(upstream, **options)  # type: ignore[arg-type]
    elif flavour == "ignored":
        behaviour = Ignored(**options)
    elif flavour == "least-privilege":
        behaviour = LeastPrivilege(**options)  # type: ignore[arg-type]
        upstream.ensure_bucket(KUBEFLOW_BUCKET)
    else:
        raise ValueError(f"unknown S3 stand-in flavour {flavour!r}; expected one of {FLAVOURS}")
    server = _ProxyServer(upstream, behaviour)
    # A short poll interval: stop() waits for it, once per proxy, at the end of the session.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name=f"s3-standin-{flavour}", daemon=True)
    thread.start()
    endpoint = f"127.0.0.1:{server.server_address[1]}"

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    refused = behaviour.refused if isinstance(behaviour, LeastPrivilege) else []
    return StandIn(flavour, endpoint, upstream.env(endpoint), refused, stop)
