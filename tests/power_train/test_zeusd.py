"""The zeusd client over real HTTP against a small stand-in daemon on 127.0.0.1 (zeusd itself is absent here)."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from json_http import JsonHandler

from zeus_kfp.power import GPUError, open_gpu
from zeus_kfp.power.gpu import measure_only_note
from zeus_kfp.power.zeusd import ZeusdClient, ZeusdGPU

# The node the stand-in daemon runs on: GPUs as `lspci -D` spells their addresses, in zeusd's numbering.
# Its GPUs 0 and 1 are the two the suite's fake pynvml shows (tests/power_train/conftest.py), in NVML's spelling.
TWO_GPU_NODE = ["0000:18:00.0", "0000:3b:00.0"]
EIGHT_GPU_NODE = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                  "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]  # fmt: skip


class Daemon:
    """Answers /discover and set_power_limit in zeusd's current or legacy shape, or refuses (403). `node`: the
    node's GPUs' PCI addresses, numbered as zeusd numbers them; `limits`: what each node GPU was set to (mW)."""

    def __init__(self, mode: str = "current", node: list[str] | None = None) -> None:
        self.mode = mode
        self.node = list(node or TWO_GPU_NODE)
        self.discover_shape = "current"  # "old": zeusd <= v0.5.0's gpu_ids, without PCI addresses
        self.requests: list[tuple[str, str, dict]] = []
        self.limits: dict[int, int] = {}
        daemon = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if urlparse(self.path).path != "/discover":
                    return self.reply(404)
                groups = ["gpu-control", "gpu-read"]
                if daemon.discover_shape == "old":
                    return self.reply(200, {"gpu_ids": list(range(len(daemon.node))), "enabled_api_groups": groups})
                gpus = [
                    {"id": i, "name": "NVIDIA H100", "pci_address": a, "cumulative_energy_available": True}
                    for i, a in enumerate(daemon.node)
                ]
                self.reply(200, {"gpus": gpus, "cpus": [], "enabled_api_groups": groups, "auth_required": True})

            def do_POST(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                daemon.requests.append((url.path, self.headers.get("Authorization", ""), parse_qs(url.query) | body))
                current = url.path == "/gpu/set_power_limit"
                legacy = url.path.startswith("/gpu/") and url.path.endswith("/set_power_limit") and not current
                if daemon.mode == "refuse":
                    return self.reply(403, {"error": "missing scope gpu-control"})
                served = (current and daemon.mode == "current") or (legacy and daemon.mode == "legacy")
                if not served:
                    return self.reply(404)
                params = parse_qs(url.query) | body
                ids = params["gpu_ids"][0].split(",") if current else [url.path.split("/")[2]]
                if any(int(i) >= len(daemon.node) for i in ids):  # zeusd's own check: an index of the node's
                    return self.reply(400, {"error": "GPU index out of range"})
                watts = params["power_limit_mw"]
                for i in ids:
                    daemon.limits[int(i)] = int(watts[0] if isinstance(watts, list) else watts)
                self.reply(200)

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
    daemon.node = EIGHT_GPU_NODE
    monkeypatch.setenv("ZEUSD_GPU_IDS", "2,3")  # stated by hand: trusted as given
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


# "unreachable" listens on a socket that never answers: a server tests/tiers.py cannot see (a local's method)
@pytest.mark.parametrize("how", ["missing", pytest.param("unreachable", marks=pytest.mark.server)])
def test_a_missing_or_unreachable_zeusd_means_measure_only_with_one_warning(fake_nvml, monkeypatch, caplog, how):
    """What the train step meets on a node without the deploy/zeusd DaemonSet (nobody listens on
    the port) or behind a firewall (nothing answers): measure-only, said once, no crash."""
    import socket

    import zeus_kfp.power.zeusd as zeusd_module

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


def test_on_an_8_gpu_node_the_pods_gpus_are_found_by_pci_address(monkeypatch):
    """The pod was given node GPUs 5 and 2 (NVML shows them as its GPUs 0 and 1). Its limits reach node GPUs 5 and
    2, never the node's GPUs 0 and 1, another tenant's (what sending the pod's own indices did)."""
    import sys

    from .fake_pynvml import FakeDevice, make_module

    pod = [
        FakeDevice(name="H100 a", pci_bus_id="00000000:AB:00.0"),
        FakeDevice(name="H100 b", pci_bus_id="00000000:3A:00.0"),
    ]
    monkeypatch.setitem(sys.modules, "pynvml", make_module(pod))
    d = Daemon(node=EIGHT_GPU_NODE)
    monkeypatch.setenv("ZEUSD_HOST", "127.0.0.1")
    monkeypatch.setenv("ZEUSD_PORT", str(d.port))
    monkeypatch.delenv("ZEUSD_GPU_IDS", raising=False)
    try:
        gpu = open_gpu("zeusd")
        assert gpu.can_set_limits and gpu.gpu_ids == [5, 2]
        gpu.set_power_limit(0, 175)
        gpu.set_power_limit(1, 200)
        assert d.limits == {5: 175_000, 2: 200_000}  # nothing reached node GPUs 0 and 1
        gpu.close()
    finally:
        d.close()


@pytest.mark.parametrize("case", ["a GPU zeusd does not list", "a daemon without PCI addresses"])
def test_a_gpu_that_cannot_be_matched_means_no_limit_is_set_anywhere(monkeypatch, caplog, case):
    import sys

    from .fake_pynvml import FakeDevice, make_module

    bus = "00000000:C1:00.0" if case.startswith("a GPU") else "00000000:AB:00.0"
    monkeypatch.setitem(sys.modules, "pynvml", make_module([FakeDevice(pci_bus_id=bus)]))
    d = Daemon(node=EIGHT_GPU_NODE)
    d.discover_shape = "current" if case.startswith("a GPU") else "old"
    monkeypatch.setenv("ZEUSD_HOST", "127.0.0.1")
    monkeypatch.setenv("ZEUSD_PORT", str(d.port))
    monkeypatch.delenv("ZEUSD_GPU_IDS", raising=False)
    try:
        gpu = open_gpu("zeusd")
        gpu.set_power_limit(0, 150)
        assert not gpu.can_set_limits and "none is touched" in gpu.measure_only_reason
        assert ("00000000:C1:00.0" if case.startswith("a GPU") else "pci_address") in gpu.measure_only_reason
        assert d.limits == {} and not [r for r in d.requests if "set_power_limit" in r[0]]
        assert sum("MEASURE-ONLY" in r.getMessage() for r in caplog.records) == 1
        assert "none is touched" in measure_only_note(gpu)  # what the trial's recorded reason says
        gpu.close()
    finally:
        d.close()
