"""A fake `pynvml` for tests only: the GPUs are physically absent here, nothing else is faked.

It mimics the parts of nvidia-ml-py the NVML backend uses, with NVML's units (mW, mJ) and
error classes: an energy counter that integrates the device's power draw over real time
(or NOT_SUPPORTED, like pre-Volta GPUs), instantaneous power, limit constraints, and a set
call that can refuse with NO_PERMISSION the way it does without root/SYS_ADMIN.

Like a real H200 (driver 580) the counter can be made coarse: with `counter_period_s` it only
publishes its value at multiples of that period (0.1 s there), so a window shorter than the
period may read zero energy. `power_at_limit_w` makes the draw follow the power limit (a power
model), and `clock` replaces real time with a fake clock shared with the test.
"""

from __future__ import annotations

import math
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

# NVML's error codes and error class, as nvidia-ml-py has them: the stand-in NVML's, one definition of both fakes
from zeus_kfp.simulate.nvml_standin import (
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    NVMLError,
)


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
    clock: Callable[[], float] = time.monotonic
    counter_period_s: float = 0.0  # > 0: the counter publishes only at multiples of this period
    power_at_limit_w: Callable[[float], float] | None = None  # draw (W) as a function of the limit (W)
    pci_bus_id: str = "00000000:18:00.0"  # as nvmlDeviceGetPciInfo's busId spells it (8-digit domain, upper case)
    _energy_mj: float = 0.0  # the true integral up to _t
    _published_mj: float = 0.0  # what a coarse counter shows: the integral at its last update
    _t: float | None = None

    def __post_init__(self) -> None:
        self._t = self.clock()
        if self.power_at_limit_w is not None:
            self.power_mw = 1000.0 * self.power_at_limit_w(self.limit_mw / 1000.0)

    def _advance(self) -> None:
        now = self.clock()
        if self.counter_period_s > 0:
            tick = math.floor(now / self.counter_period_s) * self.counter_period_s
            if tick > self._t:  # the counter updated inside (t, now]: publish the integral at that instant
                self._published_mj = self._energy_mj + self.power_mw * (tick - self._t)
        self._energy_mj += self.power_mw * (now - self._t)
        self._t = now

    def energy_mj(self) -> float:
        self._advance()
        return self._published_mj if self.counter_period_s > 0 else self._energy_mj

    def set_power(self, power_mw: float) -> None:
        self._advance()  # account the past at the old power
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
        if h.power_at_limit_w is not None:
            h.set_power(1000.0 * h.power_at_limit_w(mw / 1000.0))

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
    # Real nvidia-ml-py returns a ctypes struct whose char fields read as bytes.
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=h.pci_bus_id.encode())
    return m
