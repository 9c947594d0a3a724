"""The zeusd client over real HTTP against a small stand-in daemon on 127.0.0.1 (zeusd itself is absent here)."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from json_http import JsonHandler

from zeus.power import GPUError, open_gpu
from zeus.power.zeusd import ZeusdClient, ZeusdGPU


class Daemon:
    """Answers /discover and set_power_limit in zeusd's current or legacy shape, or refuses (403)."""

    def __init__(self, mode: str = "current") -> None:
        self.mode = mode
        self.requests: list[tuple[str, str, dict]] = []
        daemon = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if urlparse(self.path).path == "/discover":
                    self.reply(200, {"gpu_ids": [0, 1, 2, 3], "enabled_api_groups": ["gpu-control", "gpu-read"]})
                else:
                    self.reply(404)

            def do_POST(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                daemon.requests.append((url.path, self.headers.get("Authorization", ""), parse_qs(url.query) | body))
                current = url.path == "/gpu/set_power_limit"
                legacy = url.path.startswith("/gpu/") and url.path.endswith("/set_power_limit") and not current
                if daemon.mode == "refuse":
                    self.reply(403, {"error": "missing scope gpu-control"})
                else:
                    served = (current and daemon.mode == "current") or (legacy and daemon.mode == "legacy")
                    self.reply(200 if served else 404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def daemon(monkeypatch):
    d = Daemon()
    monkeypatch.setenv("ZEUSD_HOST", "127.0.0.1")
    monkeypatch.setenv("ZEUSD_PORT", str(d.port))
    monkeypatch.setenv("ZEUSD_TOKEN", "t0ken")
    yield d
    d.close()


def test_limits_go_through_zeusd_with_node_gpu_ids_and_token(fake_nvml, daemon, monkeypatch):
    monkeypatch.setenv("ZEUSD_GPU_IDS", "2,3")
    gpu = open_gpu("zeusd")
    assert isinstance(gpu, ZeusdGPU) and gpu.can_set_limits and not gpu.simulated
    gpu.set_power_limit(1, 175)
    path, auth, params = daemon.requests[-1]
    assert path == "/gpu/set_power_limit" and auth == "Bearer t0ken"
    assert params == {"gpu_ids": ["3"], "power_limit_mw": ["175000"], "block": ["true"]}
    assert gpu.energy_j(0) >= 0 and gpu.names()[0] == "Fake V100"  # reads stay on local NVML
    assert fake_nvml.devices[1].set_calls == []  # nothing was set through NVML
    gpu.close()


def test_auto_prefers_zeusd_when_configured(fake_nvml, daemon):
    assert open_gpu("auto").kind == "zeusd"


def test_legacy_daemon_route_is_found_and_remembered(fake_nvml, daemon):
    daemon.mode = "legacy"
    gpu = open_gpu("zeusd")
    gpu.set_power_limit(0, 200)
    gpu.set_power_limit(0, 150)
    paths = [p for p, _, _ in daemon.requests]
    assert paths == ["/gpu/set_power_limit", "/gpu/0/set_power_limit", "/gpu/0/set_power_limit"]
    assert daemon.requests[-1][2] == {"power_limit_mw": 150000, "block": True}


def test_refusal_or_absence_means_measure_only(fake_nvml, daemon, monkeypatch, caplog):
    daemon.mode = "refuse"
    gpu = open_gpu("zeusd")
    gpu.set_power_limit(0, 200)
    gpu.set_power_limit(0, 150)
    assert not gpu.can_set_limits and "403" in gpu.measure_only_reason
    assert len(daemon.requests) == 1
    assert sum("MEASURE-ONLY" in r.getMessage() for r in caplog.records) == 1
    daemon.close()
    assert not open_gpu("zeusd").can_set_limits  # nobody listening: measure-only, not a crash


def test_configuration_errors_name_the_variable(fake_nvml, monkeypatch):
    for name in ("ZEUSD_HOST", "ZEUSD_PORT", "ZEUSD_HOST_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(GPUError, match="ZEUSD_HOST"):
        open_gpu("zeusd")
    monkeypatch.setenv("ZEUSD_HOST_PORT", "10.0.0.7:5000")
    assert ZeusdClient.from_env().base_url == "http://10.0.0.7:5000"
    monkeypatch.setenv("ZEUSD_HOST", "10.0.0.8")
    monkeypatch.setenv("ZEUSD_PORT", "http")
    with pytest.raises(GPUError, match="ZEUSD_PORT"):
        ZeusdClient.from_env()


@pytest.mark.parametrize("how", ["missing", "unreachable"])
def test_a_missing_or_unreachable_zeusd_means_measure_only_with_one_warning(fake_nvml, monkeypatch, caplog, how):
    """What the train step meets on a node without the deploy/zeusd DaemonSet (nobody listens on
    the port) or behind a firewall (nothing answers): measure-only, said once, no crash."""
    import socket

    import zeus.power.zeusd as zeusd_module

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if how == "missing":
        sock.close()
    else:
        sock.listen(1)  # the kernel accepts the connection; nobody ever reads or answers
        monkeypatch.setattr(zeusd_module, "TIMEOUT_S", 0.2)
    monkeypatch.setenv("ZEUSD_HOST", "127.0.0.1")
    monkeypatch.setenv("ZEUSD_PORT", str(port))
    try:
        gpu = open_gpu("auto")
        assert gpu.kind == "zeusd" and not gpu.can_set_limits
        for watts in (250, 225, 200):
            gpu.set_power_limit(0, watts)
        assert f"127.0.0.1:{port} unreachable" in gpu.measure_only_reason
        assert sum("MEASURE-ONLY" in r.getMessage() for r in caplog.records) == 1
        assert fake_nvml.devices[0].set_calls == []
        gpu.close()
    finally:
        sock.close()
