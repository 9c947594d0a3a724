"""What only the S3 backend has: conditional creates sent for real, env settings, an unreachable
server, and a server that ignores If-None-Match (where nothing may be lost either)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
from minio import Minio
from store_keys import hints

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import StoreInputError, StoreUnavailableError, keys, open_store
from zeus.store.backend import LocalBackend
from zeus.store.s3 import S3Backend, S3Settings
from zeus.store.store import Store

DECISION = Decision(batch_size=64, cost_threshold=None, stage="exploration", reason="test")


def test_conditional_create_reaches_the_server_and_refuses_a_second_writer(s3_store_uri):
    backend = open_store(s3_store_uri).backend
    assert backend.put_new("probe/x", b"first") is True
    assert backend.put_new("probe/x", b"second") is False  # 412 from the server
    assert backend.get("probe/x") == b"first"
    assert backend.conditional_writes_honoured() is True
    # The control: minio's public put_object with the header as "metadata" silently overwrites,
    # which is why the store does not use it.
    client: Minio = backend.client
    client.put_object(backend.bucket, backend.prefix + "probe/x", _stream(b"third"), 5, metadata={"If-None-Match": "*"})
    assert backend.get("probe/x") == b"third"


def _stream(data: bytes):
    import io

    return io.BytesIO(data)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_store_fails_after_bounded_retries_naming_endpoint_and_bucket(monkeypatch):
    endpoint = f"127.0.0.1:{_free_port()}"  # nothing listens here
    monkeypatch.setenv("ZEUS_S3_ENDPOINT", endpoint)
    monkeypatch.setenv("ZEUS_S3_SECURE", "false")
    monkeypatch.setenv("ZEUS_S3_ACCESS_KEY", "AKIA-visible-id")
    monkeypatch.setenv("ZEUS_S3_SECRET_KEY", "super-secret-value")
    monkeypatch.setenv("ZEUS_S3_MAX_ATTEMPTS", "3")
    store = open_store("s3://zeus-unreachable/p")
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        store.trials("some-job")
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert endpoint in message and "zeus-unreachable" in message and "3 attempts" in message
    assert "super-secret-value" not in message and "super-secret-value" not in repr(store.backend.settings)
    assert 0.7 < elapsed < 30  # backoff 0.25 s + 0.5 s between three attempts, then gives up (loose: CI load)


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
def test_settings_from_env(monkeypatch, env, endpoint, secure):
    for key in ("ZEUS_S3_ENDPOINT", "ZEUS_S3_SECURE", "ZEUS_S3_ACCESS_KEY", "ZEUS_S3_SECRET_KEY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-aws-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    settings = S3Settings.from_env()
    assert (settings.endpoint, settings.secure, settings.access_key) == (endpoint, secure, "from-aws-env")
    assert "aws-secret" not in repr(settings)


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
    ],
)
def test_bad_settings_name_the_variable(monkeypatch, env, field):
    monkeypatch.delenv("ZEUS_S3_ENDPOINT", raising=False)
    monkeypatch.delenv("ZEUS_S3_SECURE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(StoreInputError) as info:
        open_store("s3://bucket-ok/x")
    assert info.value.field == field


@pytest.mark.parametrize("uri", ["gs://bucket/x", "s3://Bad_Bucket/x", "s3://ok-bucket/../x", "file://host/x", "  "])
def test_bad_store_uris_name_the_allowed_forms(uri):
    with pytest.raises(StoreInputError) as info:
        open_store(uri)
    assert info.value.field == "store" and "s3://bucket" in info.value.allowed


def test_default_and_env_store_uris(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZEUS_KFP_STORE", raising=False)
    assert open_store().uri == (tmp_path / ".zeus-kfp" / "store").resolve().as_uri()
    monkeypatch.setenv("ZEUS_KFP_STORE", str(tmp_path / "elsewhere"))
    assert open_store().uri == (tmp_path / "elsewhere").resolve().as_uri()
    assert open_store((tmp_path / "x").as_uri()).uri == (tmp_path / "x").resolve().as_uri()
    assert open_store("relative/dir").uri == (tmp_path / "relative" / "dir").resolve().as_uri()


def test_bucket_is_created_only_when_allowed(s3_store_uri, monkeypatch):
    monkeypatch.setenv("ZEUS_S3_CREATE_BUCKET", "false")
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        open_store(s3_store_uri).list_jobs()
    monkeypatch.setenv("ZEUS_S3_CREATE_BUCKET", "true")
    assert open_store(s3_store_uri).list_jobs().empty


class IgnoresConditions(LocalBackend):
    """A server that ignores If-None-Match: every create overwrites (a stand-in for such servers)."""

    def put_new(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return True


def test_without_conditional_writes_compaction_deletes_nothing_and_reads_stay_exact(tmp_path, spec):
    store = Store(IgnoresConditions(tmp_path))
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    for attempt in (1, 2, 3):
        store.dispatch_trial(spec.job_id, "run-a", attempt, DECISION)
        done = TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0, energy_j=1.0, num_epochs=1)
        store.finish_trial(spec.job_id, "run-a", attempt, done)
    before = store.trials(spec.job_id)
    store.compact(spec.job_id)
    assert len(hints(store, spec.job_id)) == 6  # kept: a second compactor could "win"
    assert store.backend.list(keys.snapshots_dir(spec.job_id, "dispatched"))  # but the snapshot exists
    after = store.trials(spec.job_id)
    assert after["trial"].tolist() == [1, 2, 3]
    assert after.equals(before)


def test_s3_backend_keys_live_under_the_prefix(s3_store_uri, spec):
    store = open_store(s3_store_uri)
    assert isinstance(store.backend, S3Backend)
    store.ensure_job(spec)
    names = [o.object_name for o in store.backend.client.list_objects(store.backend.bucket, recursive=True)]
    assert names and all(name.startswith("store/" + keys.SPECS_DIR) for name in names)


def test_a_server_that_comes_back_within_the_retries_is_used(monkeypatch, spec):
    """The backoff is real: the store waits out a short outage instead of failing the step."""
    import threading

    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    starter = threading.Timer(0.4, server.start)  # down for the first attempt, up by the third
    monkeypatch.setenv("ZEUS_S3_ENDPOINT", f"127.0.0.1:{port}")
    monkeypatch.setenv("ZEUS_S3_SECURE", "false")
    monkeypatch.setenv("ZEUS_S3_MAX_ATTEMPTS", "6")
    monkeypatch.setenv("ZEUS_S3_ACCESS_KEY", "outage-access")
    monkeypatch.setenv("ZEUS_S3_SECRET_KEY", "outage-secret")
    store = open_store("s3://zeus-outage/p")
    starter.start()
    try:
        assert store.ensure_job(spec) == spec
        assert store.get_job(spec.job_id) == spec
    finally:
        starter.join()
        server.stop()


@contextlib.contextmanager
def _answering(status: int, content_type: str, body: bytes) -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 that gives every request the same answer. Yields (host:port, methods seen)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    requests: list[str] = []

    class Answer(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            requests.append(self.command)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


def test_refused_credentials_are_named_as_such_without_the_secret(monkeypatch):
    """moto accepts any key, so a minimal server that answers every request like MinIO does for a
    wrong secret (403, S3 XML error) stands in for it."""
    from zeus.store import StoreAccessError

    refusal = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code>'
        b"<Message>The request signature we calculated does not match</Message></Error>"
    )
    with _answering(403, "application/xml", refusal) as (endpoint, _):
        monkeypatch.setenv("ZEUS_S3_ENDPOINT", endpoint)
        monkeypatch.setenv("ZEUS_S3_SECURE", "false")
        monkeypatch.setenv("ZEUS_S3_ACCESS_KEY", "wrong-access")
        monkeypatch.setenv("ZEUS_S3_SECRET_KEY", "wrong-secret-value")
        with pytest.raises(StoreAccessError) as info:
            open_store("s3://zeus-refused/p").list_jobs()
    message = str(info.value)
    assert "refused access" in message and "s3://zeus-refused/p" in message and "ZEUS_S3_SECRET_KEY" in message
    # the prefix rule of Kubeflow's multi-user mode, the usual cause there
    assert "private-artifacts/<namespace>" in message and "mlpipeline/{artifacts" in message
    assert "wrong-secret-value" not in message


def test_racing_conditional_creates_have_exactly_one_winner(s3_store_uri):
    """What the store's numbering rests on: of N writers creating one key at once, one wins."""
    import threading

    store = open_store(s3_store_uri)
    store.backend.put_new("warm-up", b"")  # create the bucket before the race
    wins: list[tuple[int, int]] = []
    barrier = threading.Barrier(8)

    def race(writer: int) -> None:
        backend = open_store(s3_store_uri).backend
        barrier.wait()
        for key in range(40):
            if backend.put_new(f"race/{key:03d}", str(writer).encode()):
                wins.append((key, writer))

    threads = [threading.Thread(target=race, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(key for key, _ in wins) == list(range(40))
    for key, writer in wins:
        assert store.backend.get(f"race/{key:03d}") == str(writer).encode()


def _s3_env(monkeypatch, endpoint: str, **extra: str) -> None:
    settings = {"ZEUS_S3_ENDPOINT": endpoint, "ZEUS_S3_SECURE": "false", "ZEUS_S3_ACCESS_KEY": "k"}
    for key, value in (settings | extra).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ZEUS_S3_SECRET_KEY", "hung-secret")


def test_a_hung_server_fails_the_step_within_the_retry_budget(monkeypatch):
    """A server that accepts connections and never answers: the store gives up with its one-line
    error once no retry fits in the budget (small here), instead of waiting minutes."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_ignore() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accepted, then never read from or answered
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept_and_ignore, daemon=True)
    thread.start()
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
    _s3_env(monkeypatch, endpoint, ZEUS_S3_READ_TIMEOUT_S="0.3", ZEUS_S3_RETRY_BUDGET_S="1", ZEUS_S3_MAX_ATTEMPTS="5")
    try:
        with pytest.raises(StoreUnavailableError) as info:
            open_store("s3://zeus-hung/p").trials("some-job")
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
    message = str(info.value)
    assert endpoint in message and "Timeout" in message and "1 s retry budget" in message
    assert 1 <= info.value.attempts < 5  # the budget, not the attempt count, ended it
    assert "hung-secret" not in message


@pytest.mark.parametrize("name", ["ZEUS_S3_READ_TIMEOUT_S", "ZEUS_S3_CONNECT_TIMEOUT_S", "ZEUS_S3_RETRY_BUDGET_S"])
@pytest.mark.parametrize("raw", ["0", "-1", "soon"])
def test_bad_timeouts_name_the_variable(monkeypatch, name, raw):
    _s3_env(monkeypatch, "minio:9000", **{name: raw})
    with pytest.raises(StoreInputError) as info:
        open_store("s3://bucket-ok/x")
    assert info.value.field == name


def test_a_non_s3_4xx_answer_is_not_retried_nor_called_unreachable(monkeypatch):
    """A proxy or web UI at the endpoint answers 400 with HTML: reported as what it is, once."""
    from zeus.store import StoreAnswerError

    with _answering(400, "text/html", b"<html><body>400 Bad Request: this is not S3</body></html>") as answered:
        endpoint, requests = answered
        _s3_env(monkeypatch, endpoint, ZEUS_S3_MAX_ATTEMPTS="5")
        with pytest.raises(StoreAnswerError) as info:
            open_store("s3://zeus-html/p").backend.get("some/key")
    message = str(info.value)
    assert "HTTP 400" in message and "unreachable" not in message and "zeus-html" in message
    assert len(requests) == 1
