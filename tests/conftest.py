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
