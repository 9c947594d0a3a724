"""A fake `pynvml` for tests only: the GPUs are physically absent here, nothing else is faked.

It mimics the parts of nvidia-ml-py the NVML backend uses, with NVML's units (mW, mJ) and
error classes: an energy counter that integrates the device's power draw over real time
(or NOT_SUPPORTED, like pre-Volta GPUs), instantaneous power, limit constraints, and a set
call that can refuse with NO_PERMISSION the way it does without root/SYS_ADMIN.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, field

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(f"NVML error {value}")


class NVMLError_NoPermission(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NO_PERMISSION)


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


@dataclass
class FakeDevice:
    name: str = "Fake GPU"
    min_mw: int = 100_000
    max_mw: int = 300_000
    limit_mw: int = 300_000
    power_mw: float = 150_000.0
    has_counter: bool = True
    may_set: bool = True
    set_calls: list[int] = field(default_factory=list)
    _energy_mj: float = 0.0
    _t: float = field(default_factory=time.monotonic)

    def energy_mj(self) -> float:
        now = time.monotonic()
        self._energy_mj += self.power_mw * (now - self._t)
        self._t = now
        return self._energy_mj

    def set_power(self, power_mw: float) -> None:
        self.energy_mj()  # account the past at the old power
        self.power_mw = power_mw


def make_module(devices: list[FakeDevice]) -> types.ModuleType:
    """A module object standing in for pynvml, over `devices`."""
    m = types.ModuleType("pynvml")
    m.NVMLError, m.NVMLError_NoPermission, m.NVMLError_NotSupported = (
        NVMLError,
        NVMLError_NoPermission,
        NVMLError_NotSupported,
    )
    m.NVML_ERROR_NOT_SUPPORTED, m.NVML_ERROR_NO_PERMISSION = NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION
    m.devices = devices
    m.init_count = 0

    def init() -> None:
        m.init_count += 1

    def shutdown() -> None:
        m.init_count -= 1

    def handle(i: int) -> FakeDevice:
        if not 0 <= i < len(devices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return devices[i]

    def set_limit(h: FakeDevice, mw: int) -> None:
        if not h.may_set:
            raise NVMLError_NoPermission()
        if not h.min_mw <= mw <= h.max_mw:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        h.set_calls.append(mw)
        h.limit_mw = mw

    def energy(h: FakeDevice) -> int:
        if not h.has_counter:
            raise NVMLError_NotSupported()
        return int(h.energy_mj())

    m.nvmlInit, m.nvmlShutdown = init, shutdown
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = handle
    m.nvmlDeviceGetName = lambda h: h.name
    m.nvmlDeviceGetPowerManagementLimitConstraints = lambda h: (h.min_mw, h.max_mw)
    m.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: h.max_mw
    m.nvmlDeviceGetPowerManagementLimit = lambda h: h.limit_mw
    m.nvmlDeviceSetPowerManagementLimit = set_limit
    m.nvmlDeviceGetTotalEnergyConsumption = energy
    m.nvmlDeviceGetPowerUsage = lambda h: int(h.power_mw)
    return m
