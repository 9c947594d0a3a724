"""zeusd backend: read the GPUs through NVML, set power limits through the node's zeusd daemon.

Why: setting a power limit needs SYS_ADMIN, which a Kubeflow pod cannot get. zeusd (from
ml-energy/zeus) runs privileged on the node and sets limits on request over HTTP; reading
power and energy needs no privilege, so reads stay local (NVML) and only writes travel.

Configuration (environment): ZEUSD_HOST (on Kubeflow the node IP, from status.hostIP) and
ZEUSD_PORT (default 4938), or ZEUSD_HOST_PORT="host:port" as Zeus itself reads it;
ZEUSD_TOKEN for a daemon with JWT auth. Only TCP mode is supported.

Which GPU is which: zeusd numbers the node's GPUs; a pod sees only the GPUs it was given, renumbered
from 0. On an 8-GPU node a trial on node GPU 5 is its own GPU 0, so sending "0" would cap another tenant's
GPU. So each visible GPU is matched to zeusd's by PCI address (NVML's busId against the `pci_address` that
`/discover` lists per GPU, ml-energy/zeus#252, after zeusd v0.5.0), and when one cannot be matched, or the
daemon lists no addresses, no limit is set at all: measure-only, said once. ZEUSD_GPU_IDS="5,2" states the
node indices by hand instead (for a daemon too old to list addresses).

API (zeusd's current routes): GET /discover; POST /gpu/set_power_limit?gpu_ids=..&power_limit_mw=..
&block=true. Older daemons expose POST /gpu/{id}/set_power_limit with a JSON body; on a 404
the client tries that once and remembers which one worked. A refused request (401/403) or an
unreachable daemon turns the backend measure-only, said once, instead of failing the trial.
"""

from __future__ import annotations

import logging
import os
import re

import requests

from zeus_kfp.power.gpu import GPUError
from zeus_kfp.power.nvml import NvmlGPU

log = logging.getLogger(__name__)

DEFAULT_PORT = 4938
TIMEOUT_S = 10.0


_PCI = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def pci_key(address: str) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI address in NVML's ("00000000:3B:00.0") or lspci -D's
    ("0000:3b:00.0") spelling; None when it is neither."""
    match = _PCI.match(str(address).strip())
    return tuple(int(part, 16) for part in match.groups()) if match else None  # type: ignore[return-value]


def node_gpu_ids(local_bus_ids: list[str], daemon_gpus: object) -> tuple[list[int] | None, str]:
    """zeusd's index of each of this pod's GPUs, matched by PCI address, or (None, why not)."""
    if not isinstance(daemon_gpus, list) or not daemon_gpus:
        return None, "zeusd's /discover lists no GPU with its pci_address (a zeusd newer than v0.5.0 does)"
    by_address: dict[tuple[int, int, int, int], list[int]] = {}
    for gpu in daemon_gpus:
        key = pci_key(gpu.get("pci_address", "")) if isinstance(gpu, dict) else None
        if key is None or not isinstance(gpu.get("id"), int):
            return None, f"zeusd's /discover lists a GPU without a usable id and pci_address: {gpu!r}"
        by_address.setdefault(key, []).append(gpu["id"])
    ids = []
    for index, bus_id in enumerate(local_bus_ids):
        found = by_address.get(pci_key(bus_id) or (-1, -1, -1, -1), [])
        if len(found) != 1:
            listed = ", ".join(str(g.get("pci_address")) for g in daemon_gpus if isinstance(g, dict))
            return (
                None,
                f"this pod's GPU {index} ({bus_id}) is {'ambiguous' if found else 'not'} among zeusd's ({listed})",
            )
        ids.append(found[0])
    return ids, ""


class ZeusdClient:
    """The few zeusd endpoints zeus-kfp needs."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self._legacy: bool | None = None

    @classmethod
    def from_env(cls) -> ZeusdClient:
        host, port = os.environ.get("ZEUSD_HOST"), os.environ.get("ZEUSD_PORT") or str(DEFAULT_PORT)
        host_port = os.environ.get("ZEUSD_HOST_PORT", "")
        if not host and host_port:
            host, sep, given = host_port.rpartition(":")
            if not sep:
                host, given = host_port, ""
            port = given or str(DEFAULT_PORT)
        if not host:
            raise GPUError("gpu=zeusd needs ZEUSD_HOST (the node's address; on Kubeflow from status.hostIP)")
        if not port.isdigit():
            raise GPUError(f"invalid ZEUSD_PORT={port!r}: allowed a TCP port number")
        return cls(f"http://{host}:{port}", os.environ.get("ZEUSD_TOKEN"))

    def discover(self) -> dict:
        resp = self.session.get(f"{self.base_url}/discover", timeout=TIMEOUT_S)
        resp.raise_for_status()
        return resp.json()

    def set_power_limit(self, gpu_id: int, watts: float) -> requests.Response:
        milliwatts = round(watts * 1000)
        if self._legacy is not True:
            resp = self.session.post(
                f"{self.base_url}/gpu/set_power_limit",
                params={"gpu_ids": str(gpu_id), "power_limit_mw": str(milliwatts), "block": "true"},
                timeout=TIMEOUT_S,
            )
            if resp.status_code != 404 or self._legacy is False:
                self._legacy = False
                return resp
        resp = self.session.post(
            f"{self.base_url}/gpu/{gpu_id}/set_power_limit",
            json={"power_limit_mw": milliwatts, "block": True},
            timeout=TIMEOUT_S,
        )
        if resp.status_code != 404:
            self._legacy = True
        return resp


class ZeusdGPU(NvmlGPU):
    """NVML for reads, zeusd for power-limit writes."""

    kind = "zeusd"

    def __init__(self, client: ZeusdClient, gpu_ids: list[int] | None = None) -> None:
        super().__init__()
        self.client = client
        if gpu_ids is not None and len(gpu_ids) < self.device_count():
            raise GPUError(f"invalid ZEUSD_GPU_IDS={gpu_ids!r}: allowed one node GPU index per visible GPU")
        self.gpu_ids: list[int] = list(gpu_ids or [])
        try:
            info = self.client.discover()
        except requests.RequestException as exc:
            self.disable_limits(f"zeusd at {client.base_url} unreachable: {exc}")
            return
        groups = info.get("enabled_api_groups")
        if groups is not None and "gpu-control" not in groups:
            self.disable_limits(f"zeusd at {client.base_url} has the gpu-control API disabled")
            return
        if gpu_ids is None:  # which of the node's GPUs are ours: by PCI address, or none at all
            mapped, why = node_gpu_ids(self.pci_bus_ids(), info.get("gpus"))
            if mapped is None:
                self.disable_limits(f"cannot tell which of zeusd's GPUs are this pod's, so none is touched: {why}")
                return
            self.gpu_ids = mapped

    @classmethod
    def from_env(cls) -> ZeusdGPU:
        raw = os.environ.get("ZEUSD_GPU_IDS", "").strip()
        try:
            ids = [int(x) for x in raw.split(",")] if raw else None
        except ValueError:
            raise GPUError(f"invalid ZEUSD_GPU_IDS={raw!r}: allowed comma-separated node GPU indices") from None
        return cls(ZeusdClient.from_env(), ids)

    def set_power_limit(self, index: int, watts: float) -> None:
        if not self.can_set_limits:
            return
        try:
            resp = self.client.set_power_limit(self.gpu_ids[index], watts)
        except requests.RequestException as exc:
            self.disable_limits(f"zeusd at {self.client.base_url} unreachable: {exc}")
            return
        if resp.status_code in (401, 403):
            self.disable_limits(f"zeusd refused (HTTP {resp.status_code}): {resp.text[:200]}; check ZEUSD_TOKEN")
        elif not resp.ok:
            raise GPUError(f"zeusd: setting GPU {index} to {watts:g} W failed (HTTP {resp.status_code}): {resp.text}")
