"""The S3 backend on its own: round trips against the tests' S3 server (moto, tests/conftest.py), the
Kubeflow 1.11 namespace key (tests/s3_standins.py), and small servers of this module that misbehave on
purpose: one that drips its answers, one that holds PUTs, one that refuses. Outcomes are asserted on
exception types and on the requests a server saw, never on the wall clock (TESTING.md: CI runs at a
load of 10-25)."""

from __future__ import annotations

import dataclasses
import http.client
import logging
import socket
import threading
import traceback
import urllib.parse
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from minio import Minio
from s3_standins import KUBEFLOW_BUCKET, StartStandIn

from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store import StoreInputError
from zeus_kfp.store.backend import ObjectNotFound, get_many
from zeus_kfp.store.errors import (
    DeleteRefusedError,
    StoreAccessError,
    StoreAnswerError,
    StoreError,
    StoreUnavailableError,
)
from zeus_kfp.store.s3 import S3Backend, S3Settings

ACCESS, SECRET = "AKIAZEUSVISIBLE7", "zeus-s3-secret-4f1c9a"  # what the misbehaving servers are sent
FORWARD, HOLD, DRIP = "forward", "hold", "drip"
DRIP_INTERVAL_S = 3.0  # one byte this often: each socket read succeeds within any read timeout above it
Answer = str | tuple[int, str, bytes]  # FORWARD, HOLD, DRIP, or (status, content type, body)


def s3_xml_error(code: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>m</Message></Error>'.encode()


class Scripted:
    """A threaded HTTP server on 127.0.0.1 (port 0) whose `answer(method, target, n)` decides the n-th
    request: FORWARD it to the upstream S3 server, HOLD it (read it, never answer), DRIP (200 and a
    long Content-Length, then one byte every DRIP_INTERVAL_S), or answer (status, type, body) itself.
    It records every request as (method, target) in `seen`; leaving the `with` block ends them all."""

    def __init__(self, answer: Callable[[str, str, int], Answer], upstream: str = "") -> None:
        self.answer, self.upstream = answer, upstream
        self.seen: list[tuple[str, str]] = []
        self.conditions: list[str] = []  # every If-None-Match / If-Match header a request carried
        self.stop = threading.Event()
        self._lock = threading.Lock()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client's pool expects

            def do_GET(self) -> None:
                scripted._handle(self)

            do_PUT = do_HEAD = do_POST = do_DELETE = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Scripted:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # held and dripping answers end, and close their connections
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def methods(self, method: str) -> list[str]:
        return [target for seen, target in self.seen if seen == method]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        with self._lock:
            self.seen.append((handler.command, handler.path))
            self.conditions += [
                f"{k}: {v}" for k, v in handler.headers.items() if k.lower() in ("if-none-match", "if-match")
            ]
            answer = self.answer(handler.command, handler.path, len(self.seen))
        if answer in (HOLD, DRIP):
            handler.close_connection = True
            if answer == DRIP:
                handler.send_response(200)
                handler.send_header("Content-Type", "application/xml")
                handler.send_header("Content-Length", str(1 << 20))
                handler.end_headers()
            while not self.stop.is_set():
                if answer == DRIP:
                    try:
                        handler.wfile.write(b" ")
                        handler.wfile.flush()
                    except OSError:
                        return
                self.stop.wait(DRIP_INTERVAL_S)
            return
        if answer == FORWARD:
            status, headers, data = self._forward(handler, body)
        else:
            status, content_type, data = answer  # type: ignore[misc]
            headers = [("Content-Type", content_type)]
        handler.send_response(status)
        for key, value in headers:
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        host, _, port = self.upstream.rpartition(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.putrequest(handler.command, handler.path, skip_host=True, skip_accept_encoding=True)
            for key, value in handler.headers.items():
                if key.lower() not in ("connection", "keep-alive", "transfer-encoding"):
                    connection.putheader(key, value)
            connection.endheaders(body or None)
            response = connection.getresponse()
            data = response.read()
            skip = ("content-length", "transfer-encoding", "connection", "date", "server")
            return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in skip], data
        finally:
            connection.close()


def forward(method: str, target: str, n: int) -> Answer:
    return FORWARD


def is_bucket_level(target: str, bucket: str) -> bool:
    return urllib.parse.urlsplit(target).path.rstrip("/") == f"/{bucket}"


# -- fixtures and helpers ----------------------------------------------------------------------------


def server_settings(s3_server, **overrides: object) -> S3Settings:
    """Settings for the tests' S3 server with its key; `endpoint=` a proxy of this module in front of it."""
    env = s3_server.env
    settings = S3Settings(
        endpoint=s3_server.endpoint,
        secure=env["ZEUS_S3_SECURE"] == "true",
        access_key=env["ZEUS_S3_ACCESS_KEY"],
        secret_key=env["ZEUS_S3_SECRET_KEY"],
        region=env["ZEUS_S3_REGION"],
    )
    if "endpoint" in overrides:
        overrides.setdefault("secure", False)  # the proxies speak plain http
    return dataclasses.replace(settings, **overrides)  # type: ignore[arg-type]


def fake_settings(endpoint: str, **overrides: object) -> S3Settings:
    """Settings for a server of this module (plain http, the module's own key)."""
    return S3Settings(endpoint=endpoint, secure=False, access_key=ACCESS, secret_key=SECRET, **overrides)  # type: ignore[arg-type]


def raw_client(s3_server) -> Minio:
    """The test's own client for the server itself (it may HEAD and list buckets; the backend may not)."""
    env = s3_server.env
    secure = env["ZEUS_S3_SECURE"] == "true"
    return Minio(s3_server.endpoint, env["ZEUS_S3_ACCESS_KEY"], env["ZEUS_S3_SECRET_KEY"], secure=secure)


def new_bucket(s3_server, create: bool = True) -> str:
    name = f"zeus-test-{uuid.uuid4().hex[:16]}"
    if create:
        raw_client(s3_server).make_bucket(name)
    return name


@pytest.fixture
def plain_upstream(s3_server) -> str:
    if s3_server.env["ZEUS_S3_SECURE"] == "true":
        pytest.skip("the module's proxy forwards plain http only")
    return s3_server.endpoint


@pytest.fixture
def backend(s3_server) -> S3Backend:
    return S3Backend(new_bucket(s3_server), "store/root", server_settings(s3_server))


@pytest.fixture(scope="module")
def paged(s3_server) -> S3Backend:
    """1,100 keys, one per folder: more than one ListObjectsV2 page (1,000) either way of listing."""
    backend = S3Backend(new_bucket(s3_server), "paged", server_settings(s3_server))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: backend.put(f"many/{i:04d}/x", b""), range(1100)))
    return backend


# -- round trips -------------------------------------------------------------------------------------


def test_put_get_list_list_dirs_delete_round_trip(backend: S3Backend, s3_server):
    assert backend.parallel == 16 and backend.uri == f"s3://{backend.bucket}/store/root"
    backend.put("jobs/a/spec.json", b"{}")
    backend.put("jobs/a/log/0001", b"\x00\xff binary")
    backend.put("jobs/a/log/0002", b"")
    backend.put("jobs/b/spec.json", b"first")
    backend.put("jobs/b/spec.json", b"second")  # put overwrites
    assert backend.get("jobs/a/log/0001") == b"\x00\xff binary"
    assert backend.get("jobs/a/log/0002") == b""
    assert backend.get("jobs/b/spec.json") == b"second"
    assert backend.list("jobs/") == ["jobs/a/log/0001", "jobs/a/log/0002", "jobs/a/spec.json", "jobs/b/spec.json"]
    assert backend.list("jobs/a/log/", start_after="jobs/a/log/0001") == ["jobs/a/log/0002"]
    assert backend.list("jobs/a/", start_after="jobs/a/log/") == [
        "jobs/a/log/0001",
        "jobs/a/log/0002",
        "jobs/a/spec.json",
    ]
    assert backend.list("nothing/") == [] and backend.list_dirs("nothing/") == []
    assert backend.list_dirs("jobs/") == ["jobs/a/", "jobs/b/"]
    assert backend.list_dirs("jobs/a/") == ["jobs/a/log/"]
    assert backend.list_dirs("") == ["jobs/"]
    assert get_many(backend, ["jobs/a/spec.json", "jobs/none"]) == {"jobs/a/spec.json": b"{}", "jobs/none": None}
    backend.delete("jobs/b/spec.json")
    backend.delete("jobs/b/spec.json")  # gone already is fine
    with pytest.raises(ObjectNotFound):
        backend.get("jobs/b/spec.json")
    assert backend.list_dirs("jobs/") == ["jobs/a/"]
    raw = raw_client(s3_server).list_objects(backend.bucket, recursive=True)
    assert all(obj.object_name.startswith("store/root/jobs/a/") for obj in raw)  # keys live under the prefix


def test_get_of_a_missing_key_is_object_not_found(backend: S3Backend):
    with pytest.raises(ObjectNotFound) as info:
        backend.get("jobs/x/missing")
    assert isinstance(info.value, KeyError) and info.value.args == ("jobs/x/missing",)


def test_listings_page_past_1000_keys(paged: S3Backend):
    keys = [f"many/{i:04d}/x" for i in range(1100)]
    assert paged.list("many/") == keys
    assert paged.list("many/", start_after="many/0049/x") == keys[50:]
    assert paged.list("many/", start_after="many/1099/x") == []
    assert paged.list_dirs("many/") == [f"many/{i:04d}/" for i in range(1100)]


@pytest.mark.parametrize("dirs", [False, True], ids=["list", "list_dirs"])
def test_a_listing_that_fails_on_its_second_page_resumes_after_the_last_key(
    paged: S3Backend, s3_server, plain_upstream, dirs: bool
):
    def second_list_page_fails_once(method: str, target: str, n: int) -> Answer:
        return (503, "application/xml", s3_xml_error("SlowDown")) if n == 2 else FORWARD

    with Scripted(second_list_page_fails_once, plain_upstream) as proxy:
        backend = S3Backend(paged.bucket, "paged", server_settings(s3_server, endpoint=proxy.endpoint))
        listed = backend.list_dirs("many/") if dirs else backend.list("many/")
    assert listed == [f"many/{i:04d}/" if dirs else f"many/{i:04d}/x" for i in range(1100)]
    assert len(proxy.seen) == 3  # page 1, page 2 refused, page 2 again from the last key received
    resumed = urllib.parse.parse_qs(urllib.parse.urlsplit(proxy.seen[2][1]).query)
    last = "paged/many/0999/" if dirs else "paged/many/0999/x"
    assert resumed["start-after"] == [last] and "continuation-token" not in resumed


# -- the bucket --------------------------------------------------------------------------------------


def test_a_missing_bucket_is_an_error_saying_so_unless_creation_is_allowed(s3_server):
    backend = S3Backend(new_bucket(s3_server, create=False), "p", server_settings(s3_server))
    assert backend.settings.create_bucket is False  # the default now
    for call in (
        lambda: backend.get("k"),
        lambda: backend.put("k", b"x"),
        lambda: backend.list(""),
        lambda: backend.delete("k"),
    ):
        with pytest.raises(StoreError) as info:
            call()
        assert type(info.value) is StoreError
        assert "does not exist" in str(info.value) and "ZEUS_S3_CREATE_BUCKET=true" in str(info.value)


def test_a_missing_bucket_is_created_once_when_allowed_and_the_request_retried(s3_server, plain_upstream):
    bucket = new_bucket(s3_server, create=False)
    with Scripted(forward, plain_upstream) as proxy:
        settings = server_settings(s3_server, endpoint=proxy.endpoint, create_bucket=True)
        backend = S3Backend(bucket, "p", settings)
        with ThreadPoolExecutor(8) as pool:  # eight writers all see NoSuchBucket first
            list(pool.map(lambda i: backend.put(f"k{i}", b"v"), range(8)))
        assert backend.list("") == [f"k{i}" for i in range(8)]
    creates = [target for target in proxy.methods("PUT") if is_bucket_level(target, bucket)]
    assert len(creates) == 1


def test_no_head_bucket_location_list_buckets_or_multi_delete_is_ever_sent(s3_server, plain_upstream):
    bucket = new_bucket(s3_server, create=False)
    with Scripted(forward, plain_upstream) as proxy:
        backend = S3Backend(bucket, "p", server_settings(s3_server, endpoint=proxy.endpoint, create_bucket=True))
        backend.put("a/b", b"1")  # NoSuchBucket, CreateBucket, PutObject
        backend.get("a/b")
        with pytest.raises(ObjectNotFound):
            backend.get("a/none")
        backend.list("a/")
        backend.list_dirs("")
        backend.delete("a/b")
        get_many(backend, ["a/b", "a/c"])
    assert {method for method, _ in proxy.seen} <= {"GET", "PUT", "DELETE"}  # no HEAD, no POST ?delete
    for method, target in proxy.seen:
        path, query = urllib.parse.urlsplit(target)[2:4]
        assert path.rstrip("/") != "" and "location" not in urllib.parse.parse_qs(query, keep_blank_values=True)
        if is_bucket_level(target, bucket):
            assert method == "PUT" or "list-type=2" in query  # CreateBucket once, or ListObjectsV2


def test_a_whole_store_workload_sends_no_conditional_and_no_bucket_level_request(s3_server, plain_upstream):
    """Why the racy (SeaweedFS) and ignoring (MinIO 2019) servers cannot mislead the store: it never
    asks them for a conditional write, so what they do with one never matters."""
    import pandas as pd

    from zeus_kfp.job import Decision, JobSpec, TrialResult
    from zeus_kfp.store.store import Store

    bucket = new_bucket(s3_server)
    spec = JobSpec(job_id="j", batch_sizes=(32, 64), default_batch_size=64, target_metric=0.9, max_epochs=5)
    profile = pd.DataFrame({"phase": ["train"], "power_limit_w": [300.0], "average_power_w": [200.0],
                            "throughput": [10.0], "simulated": [True]})  # fmt: skip
    with Scripted(forward, plain_upstream) as proxy:
        store = Store(S3Backend(bucket, "zk", server_settings(s3_server, endpoint=proxy.endpoint)))
        store.ensure_job(spec)
        for rid in ("r1", "r2"):
            store.begin_recurrence("j", rid)
            store.dispatch_trial("j", rid, 1, Decision(64, None, "exploration", "x"))
            result = TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0, energy_j=2.0, num_epochs=1)
            store.finish_trial("j", rid, 1, result)
            store.write_profile("j", rid, 1, PowerProfile(profile))
            store.compact("j")
        assert len(Store(store.backend).trials("j")) == 2 and not store.list_jobs().empty
    assert proxy.conditions == []
    assert {method for method, _ in proxy.seen} <= {"GET", "PUT", "DELETE"}
    for method, target in proxy.seen:
        if is_bucket_level(target, bucket):
            assert method == "GET" and "list-type=2" in target and "prefix=zk%2F" in target  # a listing under zk/


# -- refusals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "request_name"),
    [
        (lambda b: b.get("jobs/x/spec.json"), "GetObject of jobs/x/spec.json"),
        (lambda b: b.put("jobs/x/spec.json", b"{}"), "PutObject of jobs/x/spec.json"),
        (lambda b: b.list("jobs/x/"), "ListObjectsV2 of prefix jobs/x/"),
        (lambda b: b.list_dirs("jobs/"), "ListObjectsV2 of prefix jobs/ with delimiter /"),
    ],
    ids=["get", "put", "list", "list_dirs"],
)
def test_a_refusal_names_the_request_and_its_prefix_and_is_not_retried(call, request_name):
    with Scripted(lambda method, target, n: (403, "application/xml", s3_xml_error("AccessDenied"))) as server:
        backend = S3Backend("mlpipeline", "private-artifacts/ns1/zeus", fake_settings(server.endpoint))
        with pytest.raises(StoreAccessError) as info:
            call(backend)
    refusal = info.value
    assert (refusal.request, refusal.prefix, refusal.code) == (
        request_name,
        "private-artifacts/ns1/zeus/",
        "AccessDenied",
    )
    assert f"store refused {request_name} under s3://mlpipeline/private-artifacts/ns1/zeus" in str(refusal)
    assert len(server.seen) == 1


def test_a_403_on_delete_is_delete_refused_and_the_object_stays(s3_server, plain_upstream):
    def refuse_delete(method: str, target: str, n: int) -> Answer:
        return (403, "application/xml", s3_xml_error("AccessDenied")) if method == "DELETE" else FORWARD

    bucket = new_bucket(s3_server)
    with Scripted(refuse_delete, plain_upstream) as proxy:
        backend = S3Backend(bucket, "p", server_settings(s3_server, endpoint=proxy.endpoint))
        backend.put("snap/1", b"old")
        with pytest.raises(DeleteRefusedError) as info:
            backend.delete("snap/1")
        assert backend.get("snap/1") == b"old"
    assert info.value.key == "snap/1" and "DeleteObject of snap/1" in str(info.value)
    assert len(proxy.methods("DELETE")) == 1


def test_a_bad_signature_on_delete_stays_an_access_error():
    bad_signature = (403, "application/xml", s3_xml_error("SignatureDoesNotMatch"))
    with Scripted(lambda method, target, n: bad_signature) as server, pytest.raises(StoreAccessError) as info:
        S3Backend("bucket-x", "p", fake_settings(server.endpoint)).delete("k")
    assert info.value.code == "SignatureDoesNotMatch" and info.value.request == "DeleteObject of k"


def test_the_kubeflow_1_11_namespace_key_can_use_the_backend(s3_standin: StartStandIn, s3_server):
    """Through the least-privilege stand-in: everything but DELETE works, and nothing else is refused."""
    for allow_delete in (False, True):
        standin = s3_standin("least-privilege", allow_delete=allow_delete)
        standin.refused.clear()
        env = standin.env
        settings = server_settings(s3_server, endpoint=env["ZEUS_S3_ENDPOINT"])
        backend = S3Backend(KUBEFLOW_BUCKET, f"private/ns1/{uuid.uuid4().hex[:12]}", settings)
        backend.put("jobs/j/spec.json", b"{}")
        assert backend.get("jobs/j/spec.json") == b"{}"
        assert backend.list("jobs/") == ["jobs/j/spec.json"] and backend.list_dirs("jobs/") == ["jobs/j/"]
        if allow_delete:  # KFP 2.17's key
            backend.delete("jobs/j/spec.json")
            assert backend.list("jobs/") == [] and standin.refused == []
        else:
            with pytest.raises(DeleteRefusedError):
                backend.delete("jobs/j/spec.json")
            assert [refusal.reason for refusal in standin.refused] == ["DeleteObject"]


# -- servers that do not answer in time --------------------------------------------------------------


@pytest.mark.parametrize(
    "call", [lambda b: b.get("k"), lambda b: b.put("k", b"data"), lambda b: b.list("")], ids=["get", "put", "list"]
)
def test_a_dripping_answer_fails_within_the_retry_budget(call):
    """200, then a byte every 3 s: no socket read ever times out (5 s), only the 4 s budget ends it."""
    with Scripted(lambda method, target, n: DRIP) as server:
        backend = S3Backend("bucket-drip", "p", fake_settings(server.endpoint, read_timeout_s=5.0, retry_budget_s=4.0))
        with pytest.raises(StoreUnavailableError) as info:
            call(backend)
    assert info.value.attempts == 1 and len(server.seen) == 1  # the deadline ended the one try, not a timeout
    assert "4 s retry budget" in str(info.value) and server.endpoint in str(info.value)
    for thread in threading.enumerate():  # the abandoned try ends once the server closes its connection
        if thread.name == "zeus-s3-request":
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_a_server_that_holds_puts_fails_the_put_and_still_serves_reads(s3_server, plain_upstream):
    bucket = new_bucket(s3_server)
    S3Backend(bucket, "p", server_settings(s3_server)).put("there", b"yes")

    def hold_puts(method: str, target: str, n: int) -> Answer:
        return HOLD if method == "PUT" else FORWARD

    with Scripted(hold_puts, plain_upstream) as proxy:
        settings = server_settings(s3_server, endpoint=proxy.endpoint, read_timeout_s=60.0, retry_budget_s=2.0)
        backend = S3Backend(bucket, "p", settings)
        assert backend.get("there") == b"yes" and backend.list("") == ["there"]
        with pytest.raises(StoreUnavailableError) as info:
            backend.put("new", b"data")
    assert info.value.attempts == 1 and len(proxy.methods("PUT")) == 1


def test_a_bandit_step_on_a_half_hung_server_fails_within_the_budget_naming_the_server(
    s3_server, plain_upstream, monkeypatch
):
    """Reads answered, PUTs held: the step's first write (its dispatch) fails after one try of the budget,
    and nothing in the step waits out another budget on top (no best-effort work follows a failure)."""
    from zeus_kfp.job import JobSpec
    from zeus_kfp.steps.bandit import bandit
    from zeus_kfp.store.store import _S3_BACKENDS, open_store

    bucket = new_bucket(s3_server)
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    uri = f"s3://{bucket}/zk"
    store = open_store(uri)
    store.ensure_job(JobSpec(job_id="j", batch_sizes=(32, 64), default_batch_size=64, target_metric=0.9, max_epochs=5))
    store.begin_recurrence("j", "run-a")
    with Scripted(lambda method, target, n: HOLD if method == "PUT" else FORWARD, plain_upstream) as proxy:
        monkeypatch.setenv("ZEUS_S3_ENDPOINT", proxy.endpoint)
        monkeypatch.setenv("ZEUS_S3_RETRY_BUDGET_S", "2")
        _S3_BACKENDS.clear()  # a step is a fresh process: a fresh backend with these settings
        with pytest.raises(StoreUnavailableError) as info:
            bandit(store_uri=uri, job_id="j", recurrence_id="run-a", attempt=1, policy="default")
    assert proxy.endpoint in str(info.value) and len(proxy.methods("PUT")) == 1
    _S3_BACKENDS.clear()


def test_a_key_that_may_not_write_reads_up_to_an_entry_in_progress_and_says_so(s3_server, plain_upstream):
    """A hole (a proposer at work or dead) before decided slots needs a write to close. A reader whose PUTs
    are refused ends its read before the hole and names it, instead of guessing past it; its own writes
    fail naming the request."""
    from zeus_kfp.job import Decision, JobSpec
    from zeus_kfp.store import StoreAccessError as AccessError
    from zeus_kfp.store import consensus, entries, keys
    from zeus_kfp.store.store import Store

    bucket = new_bucket(s3_server)
    writer = Store(S3Backend(bucket, "zk", server_settings(s3_server)))
    writer.ensure_job(JobSpec(job_id="j", batch_sizes=(32, 64), default_batch_size=64, target_metric=0.9, max_epochs=5))
    writer.begin_recurrence("j", "run-a")
    writer.backend.put(keys.slot_dir("j", 2) + "b.000001.deadbeef00000000.1", b"")  # a proposer died here
    begin_b = entries.encode({"kind": "begin", "recurrence_id": "run-b", "at": 0})
    consensus.propose(writer.backend, keys.slot_dir("j", 3), begin_b)  # decided, by one that died before settling
    refused = (403, "application/xml", s3_xml_error("AccessDenied"))
    with Scripted(lambda method, target, n: refused if method == "PUT" else FORWARD, plain_upstream) as proxy:
        reader = Store(S3Backend(bucket, "zk", server_settings(s3_server, endpoint=proxy.endpoint)))
        with pytest.warns(UserWarning, match="may not close"):
            assert reader.recurrence_number("j", "run-a") == 1
        assert [p.key for p in reader.problems] == [keys.slot_dir("j", 2)]
        with pytest.raises(Exception, match="never begun"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader.recurrence_number("j", "run-b")  # beyond the hole: not guessed
        with pytest.raises(AccessError) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader.dispatch_trial("j", "run-a", 1, Decision(64, None, "exploration", "x"))
    assert info.value.request.startswith("PutObject of jobs/j/log/")
    assert writer.recurrence_number("j", "run-b") == 2  # a writer closes the hole as noop: dense numbers


def test_a_server_that_asks_to_be_retried_is_retried(s3_server, plain_upstream):
    bucket = new_bucket(s3_server)
    S3Backend(bucket, "p", server_settings(s3_server)).put("k", b"v")

    def busy_twice(method: str, target: str, n: int) -> Answer:
        return (503, "application/xml", s3_xml_error("SlowDown")) if n <= 2 else FORWARD

    with Scripted(busy_twice, plain_upstream) as proxy:
        assert S3Backend(bucket, "p", server_settings(s3_server, endpoint=proxy.endpoint)).get("k") == b"v"
    assert len(proxy.methods("GET")) == 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_fails_after_the_attempts_naming_endpoint_and_bucket():
    endpoint = f"127.0.0.1:{_free_port()}"  # nothing listens here
    with pytest.raises(StoreUnavailableError) as info:
        S3Backend("zeus-unreachable", "p", fake_settings(endpoint, max_attempts=3)).get("k")
    message = str(info.value)
    assert info.value.attempts == 3 and endpoint in message and "zeus-unreachable" in message


def test_a_non_s3_4xx_answer_is_not_retried_nor_called_unreachable():
    html = (400, "text/html", b"<html><body>400 Bad Request: this is not S3</body></html>")
    with Scripted(lambda method, target, n: html) as server, pytest.raises(StoreAnswerError) as info:
        S3Backend("zeus-html", "p", fake_settings(server.endpoint)).get("some/key")
    message = str(info.value)
    assert "HTTP 400" in message and "unreachable" not in message and "zeus-html" in message
    assert len(server.seen) == 1


# -- credentials -------------------------------------------------------------------------------------


def _failures(s3_server) -> Iterator[BaseException]:
    """One of each error the backend raises, from the real server and from this module's."""
    real = S3Backend(new_bucket(s3_server), "p", server_settings(s3_server))
    missing = S3Backend(new_bucket(s3_server, create=False), "p", server_settings(s3_server))
    for call in (lambda: real.get("absent"), lambda: missing.list("")):
        with pytest.raises((KeyError, StoreError)) as info:
            call()
        yield info.value
    cases: list[tuple[Answer, Callable[[S3Backend], object]]] = [
        ((403, "application/xml", s3_xml_error("SignatureDoesNotMatch")), lambda b: b.get("k")),
        ((403, "application/xml", s3_xml_error("AccessDenied")), lambda b: b.delete("k")),
        ((400, "text/html", b"<html>no</html>"), lambda b: b.put("k", b"")),
        (DRIP, lambda b: b.list("")),
    ]
    for answer, call in cases:
        with Scripted(lambda method, target, n, answer=answer: answer) as server:
            backend = S3Backend(
                "zeus-creds", "p", fake_settings(server.endpoint, read_timeout_s=5.0, retry_budget_s=1.0)
            )
            with pytest.raises(StoreError) as info:
                call(backend)
        yield info.value
    with pytest.raises(StoreError) as info:
        S3Backend("zeus-creds", "p", fake_settings(f"127.0.0.1:{_free_port()}", max_attempts=1)).put("k", b"")
    yield info.value


def test_credentials_never_appear_in_errors_reprs_or_logs(s3_server, caplog):
    caplog.set_level(logging.DEBUG)
    failures = list(_failures(s3_server))
    kinds = {type(exc) for exc in failures}
    assert {ObjectNotFound, StoreError, StoreAccessError, DeleteRefusedError, StoreAnswerError} <= kinds
    assert StoreUnavailableError in kinds
    secrets = {ACCESS, SECRET, s3_server.env["ZEUS_S3_ACCESS_KEY"], s3_server.env["ZEUS_S3_SECRET_KEY"]}
    backend = S3Backend("zeus-creds", "p", fake_settings("127.0.0.1:9"))
    texts = [repr(backend), str(backend.location), repr(backend.settings), caplog.text]
    texts += ["".join(traceback.format_exception(exc)) + repr(exc) for exc in failures]
    for text in texts:
        assert not any(secret in text for secret in secrets), text


# -- settings ----------------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in [name for name in os.environ if name.startswith(("ZEUS_S3_", "AWS_"))]:
        monkeypatch.delenv(key)
    return monkeypatch


@pytest.mark.parametrize(
    ("env", "endpoint", "secure"),
    [
        # the one rule: a scheme decides; a bare host:port is http unless ZEUS_S3_SECURE says true
        ({"ZEUS_S3_ENDPOINT": "minio-service.kubeflow:9000"}, "minio-service.kubeflow:9000", False),
        ({"ZEUS_S3_ENDPOINT": "http://minio:9000/"}, "minio:9000", False),
        ({"ZEUS_S3_ENDPOINT": "minio:9000", "ZEUS_S3_SECURE": "0"}, "minio:9000", False),
        ({"ZEUS_S3_ENDPOINT": "minio:9000", "ZEUS_S3_SECURE": "true"}, "minio:9000", True),
        ({"ZEUS_S3_ENDPOINT": "HTTPS://s3.example:443"}, "s3.example:443", True),
        ({"ZEUS_S3_ENDPOINT": "https://s3.example:443", "ZEUS_S3_SECURE": "true"}, "s3.example:443", True),
    ],
)
def test_settings_from_env(clean_env, env, endpoint, secure):
    for key, value in env.items():
        clean_env.setenv(key, value)
    clean_env.setenv("AWS_ACCESS_KEY_ID", "from-aws-env")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    settings = S3Settings.from_env()
    assert (settings.endpoint, settings.secure, settings.access_key) == (endpoint, secure, "from-aws-env")
    assert settings.create_bucket is False and "aws-secret" not in repr(settings) and "from-aws" not in repr(settings)
    clean_env.setenv("ZEUS_S3_CREATE_BUCKET", "yes")
    assert S3Settings.from_env().create_bucket is True


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({}, "ZEUS_S3_ENDPOINT"),
        ({"ZEUS_S3_ENDPOINT": "minio:9000", "ZEUS_S3_SECURE": "maybe"}, "ZEUS_S3_SECURE"),
        ({"ZEUS_S3_ENDPOINT": "minio:9000/path"}, "ZEUS_S3_ENDPOINT"),
        ({"ZEUS_S3_ENDPOINT": "ftp://minio:9000"}, "ZEUS_S3_ENDPOINT"),
        # a scheme and ZEUS_S3_SECURE that disagree: refused, not one of them silently winning
        ({"ZEUS_S3_ENDPOINT": "https://s3.example:443", "ZEUS_S3_SECURE": "false"}, "ZEUS_S3_SECURE"),
        ({"ZEUS_S3_ENDPOINT": "http://minio:9000", "ZEUS_S3_SECURE": "1"}, "ZEUS_S3_SECURE"),
        ({"ZEUS_S3_ENDPOINT": "minio:9000", "ZEUS_S3_CREATE_BUCKET": "sure"}, "ZEUS_S3_CREATE_BUCKET"),
        ({"ZEUS_S3_ENDPOINT": "minio:9000", "ZEUS_S3_MAX_ATTEMPTS": "0"}, "ZEUS_S3_MAX_ATTEMPTS"),
    ]
    + [
        ({"ZEUS_S3_ENDPOINT": "minio:9000", name: raw}, name)
        for name in ("ZEUS_S3_READ_TIMEOUT_S", "ZEUS_S3_CONNECT_TIMEOUT_S", "ZEUS_S3_RETRY_BUDGET_S")
        for raw in ("0", "-1", "soon")
    ],
)
def test_bad_settings_name_the_variable(clean_env, env, field):
    for key, value in env.items():
        clean_env.setenv(key, value)
    with pytest.raises(StoreInputError) as info:
        S3Settings.from_env()
    assert info.value.field == field
