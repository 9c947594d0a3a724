"""Shared fixtures: a real S3-protocol server on 127.0.0.1 for every test that needs a bucket.

By default the tests start moto's S3 server in-process (one per pytest-xdist worker) on a
port the OS picks. moto checks If-None-Match / If-Match and then writes, without a lock, so
two racing conditional PUTs can both succeed (the store's 8-process test caught two trials
sharing a number that way); MinIO and S3 decide them atomically. The fixture's server
therefore runs conditional PUTs one at a time, which is what those servers guarantee.

To run the same tests against a real MinIO instead, set
ZEUS_TEST_S3_ENDPOINT (host:port or http(s)://host:port) and ZEUS_TEST_S3_ACCESS_KEY /
ZEUS_TEST_S3_SECRET_KEY; each test still gets its own fresh bucket.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from s3_standins import KUBEFLOW_BUCKET, StandIn, StartStandIn, Upstream, start_standin

# The cost markers and the tiers they make (make check: `pytest -m fast`), the tripwire that keeps them honest,
# how the tests spread over pytest-xdist's workers, and pytester (tests/test_tiers.py runs small suites of its own).
pytest_plugins = ("tiers", "scheduling", "pytester")

# The registry the tests' compiled pipelines name, as a user who pushed the images there exports it
# (components/image.py: compile refuses to guess one). Tests of that refusal unset it; CLI subprocesses
# (ux/cli_process.py) start without it, as a fresh shell does.
TEST_IMAGE_REPO = "registry.test/ml/zeus-kfp"
os.environ.setdefault("ZEUS_KFP_IMAGE_REPO", TEST_IMAGE_REPO)

S3_ENV_KEYS = ("ZEUS_S3_ENDPOINT", "ZEUS_S3_ACCESS_KEY", "ZEUS_S3_SECRET_KEY", "ZEUS_S3_SECURE", "ZEUS_S3_REGION")


@dataclass
class S3Server:
    """Where the test S3 server is, and the ZEUS_S3_* variables that point the store at it."""

    endpoint: str  # host:port
    env: dict[str, str] = field(repr=False)
    is_moto: bool = True
    url: str = ""

    def reset(self) -> None:
        """Wipe every bucket (moto only): POST /moto-api/reset."""
        if self.is_moto:
            request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
            urllib.request.urlopen(request, timeout=10).close()


def _atomic_conditional_server():
    """moto's ThreadedMotoServer with conditional PUTs serialized (see the module doc)."""
    import threading

    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class AtomicConditionalMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)
            lock = threading.Lock()

            def serialized(environ, start_response):
                conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
                if environ.get("REQUEST_METHOD") == "PUT" and conditional:
                    with lock:
                        return list(app(environ, start_response))
                return app(environ, start_response)

            self._server = make_server(
                self._ip_address, self._port, serialized, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return AtomicConditionalMotoServer(ip_address="127.0.0.1", port=0, verbose=False)


def _wait_ready(url: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.02)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    external = os.environ.get("ZEUS_TEST_S3_ENDPOINT", "").strip()
    if external:
        secure = external.startswith("https://") or os.environ.get("ZEUS_TEST_S3_SECURE", "false").lower() == "true"
        endpoint = external.split("://", 1)[-1].rstrip("/")
        env = {
            "ZEUS_S3_ENDPOINT": endpoint,
            "ZEUS_S3_ACCESS_KEY": os.environ.get("ZEUS_TEST_S3_ACCESS_KEY", ""),
            "ZEUS_S3_SECRET_KEY": os.environ.get("ZEUS_TEST_S3_SECRET_KEY", ""),
            "ZEUS_S3_SECURE": "true" if secure else "false",
            "ZEUS_S3_REGION": os.environ.get("ZEUS_TEST_S3_REGION", "us-east-1"),
        }
        yield S3Server(endpoint=endpoint, env=env, is_moto=False, url=("https://" if secure else "http://") + endpoint)
        return

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = _atomic_conditional_server()
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"{host}:{port}"
        url = f"http://{endpoint}"
        _wait_ready(url)
        env = {
            "ZEUS_S3_ENDPOINT": endpoint,
            "ZEUS_S3_ACCESS_KEY": "zeus-test-access",  # moto accepts any key
            "ZEUS_S3_SECRET_KEY": "zeus-test-secret",
            "ZEUS_S3_SECURE": "false",
            "ZEUS_S3_REGION": "us-east-1",
        }
        yield S3Server(endpoint=endpoint, env=env, url=url)
    finally:
        server.stop()


@pytest.fixture
def s3_store_uri(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh `s3://<unique bucket>/<prefix>` with ZEUS_S3_* set for this test (the store creates the bucket)."""
    for key in S3_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ZEUS_S3_CREATE_BUCKET", "true")
    return f"s3://zeus-test-{uuid.uuid4().hex[:16]}/store"


# --- Stand-ins for the object stores Kubeflow ships (tests/s3_standins.py) -----------------------

S3_FLAVOURS = ("atomic", "racy", "ignored", "least-privilege")  # the params of s3_flavour_uri


def _upstream(server: S3Server) -> Upstream:
    """The S3 server of `s3_server` as the stand-ins' upstream (their own probes use this key)."""
    env = server.env
    return Upstream(
        endpoint=server.endpoint,
        access_key=env["ZEUS_S3_ACCESS_KEY"],
        secret_key=env["ZEUS_S3_SECRET_KEY"],
        secure=env["ZEUS_S3_SECURE"] == "true",
        region=env["ZEUS_S3_REGION"],
    )


@pytest.fixture(scope="session")
def s3_standin(s3_server: S3Server) -> Iterator[StartStandIn]:
    """`start(flavour, **options) -> StandIn`: a stand-in in front of `s3_server`, one per (flavour, options)
    for the session, all stopped at its end. Flavours: "atomic" (the server itself), "racy" (SeaweedFS
    4.00; options delay_s, barrier), "ignored" (MinIO 2019), "least-privilege" (the Kubeflow 1.11
    per-namespace key; options namespace="ns1", allow_delete=False). The same call returns the same
    StandIn, so a test reads `start("least-privilege").refused` of the proxy its store used."""
    upstream = _upstream(s3_server)
    started: dict[tuple[str, tuple[tuple[str, object], ...]], StandIn] = {}

    def start(flavour: str, **options: object) -> StandIn:
        key = (flavour, tuple(sorted(options.items())))
        if key not in started:
            started[key] = start_standin(flavour, upstream, **options)
        return started[key]

    try:
        yield start
    finally:
        for standin in started.values():
            standin.stop()


def _set_s3_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Every ZEUS_S3_* variable removed, then `env` set: no ZEUS_S3_CREATE_BUCKET, the store must not create."""
    for key in [name for name in os.environ if name.startswith("ZEUS_S3_")]:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def _flavour_uri(flavour: str, server: S3Server, start: StartStandIn, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh store URI on one stand-in, with ZEUS_S3_* pointing at it (ZEUS_S3_CREATE_BUCKET unset).

    least-privilege: `s3://mlpipeline/private/ns1/<random>` (its key may not create buckets; the
    bucket is made on the server behind it, and its `refused` list is cleared for this test); the
    others: `s3://zeus-test-<random>/store`, the bucket created on the server itself, not via a proxy.
    """
    standin = start(flavour)
    _set_s3_env(monkeypatch, standin.env)
    upstream = _upstream(server)
    if flavour == "least-privilege":
        upstream.ensure_bucket(KUBEFLOW_BUCKET)  # again: a moto reset would have dropped it
        standin.refused.clear()
        return f"s3://{KUBEFLOW_BUCKET}/private/ns1/{uuid.uuid4().hex[:16]}"
    bucket = f"zeus-test-{uuid.uuid4().hex[:16]}"
    upstream.ensure_bucket(bucket)
    return f"s3://{bucket}/store"


@pytest.fixture(params=S3_FLAVOURS)
def s3_flavour_uri(
    request: pytest.FixtureRequest, s3_server: S3Server, s3_standin: StartStandIn, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A fresh store URI on each stand-in (`_flavour_uri`)."""
    return _flavour_uri(request.param, s3_server, s3_standin, monkeypatch)


@pytest.fixture(params=("local", *S3_FLAVOURS))
def any_store_uri(request: pytest.FixtureRequest, tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh store on every kind of server the store may meet: a local directory, then each stand-in."""
    if request.param == "local":
        return str(tmp_path / "store")
    return _flavour_uri(request.param, request.getfixturevalue("s3_server"), request.getfixturevalue("s3_standin"),
                        monkeypatch)  # fmt: skip


@pytest.fixture
def s3_flavour_standin(s3_flavour_uri: str, s3_standin: StartStandIn, request: pytest.FixtureRequest) -> StandIn:
    """The StandIn behind this test's `s3_flavour_uri` (its `.flavour`, `.env`, `.refused`)."""
    return s3_standin(request.node.callspec.params["s3_flavour_uri"])
