"""The one small GPU interface every backend (NVML, zeusd, simulated) implements.

Why a protocol: the profiler, the energy monitor and the trial runner must run unchanged on a
GPU node with root, on a Kubeflow pod that may only ask the node daemon (zeusd) to set limits,
and on a CPU-only laptop or CI machine where a simulated GPU stands in. They only ever talk
to this interface, so the hardware question is answered once, in `open_gpu` (zeus_kfp.power.devices).

Units are watts, joules and seconds everywhere above this layer; backends convert from NVML's
milliwatts and millijoules.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from zeus_kfp.errors import FieldError

log = logging.getLogger(__name__)

GPU_KINDS = ("auto", "nvml", "zeusd", "simulated")
MEASURE_ONLY_NOTE = "measure-only: power limits could not be set"  # in a trial's reason
# What a backend's energy readings are (GPU.meter), which decides how the JIT profiler searches the limits:
REAL_METER = "real"  # a hardware counter (or a model of one) read in coarse steps: windows are noisy
EXACT_METER = "exact"  # a model's exact integral: any window is exact (the simulated V100)
POWER_CAP_ENV = "ZEUS_POWER_LIMIT_CAP_W"  # an administrator's cap: limits above it are never set
POWER_CAP_ALLOWED = "a number of watts > 0 (the highest limit zeus-kfp may set, and the one it leaves), or unset"


class GPUError(RuntimeError):
    """A GPU backend could not be opened or queried."""


class GPUKindError(FieldError):
    """Unknown backend kind; names the `gpu` setting and what is allowed."""

    def __init__(self, value: object) -> None:
        super().__init__("gpu", value, ", ".join(GPU_KINDS))


@dataclass(frozen=True)
class PowerConstraints:
    """What power limits a device accepts, in watts."""

    min_w: float
    max_w: float
    default_w: float


@runtime_checkable
class GPU(Protocol):
    """A set of GPUs behind one backend.

    `simulated` is True when figures come from a model rather than a meter; every table and
    result built from this backend must carry that flag. `can_set_limits` turns False when the
    process may not change power limits (no SYS_ADMIN, no zeusd): the backend then measures
    only, and `set_power_limit` does nothing.

    `meter` says what the energy readings are (REAL_METER or EXACT_METER), and so which search the JIT profiler
    runs (zeus_kfp.power.search): on a real meter windows are noisy and short ones read nothing, so it searches
    where the answer is and confirms its pick; on an exact one it keeps Zeus's sweep. `simulated` is apart from
    it: the fitted H200 model is simulated, yet its meter behaves as a real one.

    `min_window_s` is how long a measurement window must last for its energy to mean something.
    Real meters are coarse: an H200's energy counter advances in steps of about 100 ms, and sampled
    power is a ~1 s moving average, so a 50 ms window reads zero or one step of energy. The
    profiler keeps each window open at least this long (ZEUS_MIN_WINDOW_S overrides it). A model
    whose energy is exact (the simulated GPU) says 0.
    """

    kind: str
    simulated: bool
    meter: str
    can_set_limits: bool

    @property
    def min_window_s(self) -> float: ...

    def device_count(self) -> int: ...

    def names(self) -> list[str]: ...

    def constraints(self, index: int) -> PowerConstraints: ...

    def get_power_limit(self, index: int) -> float: ...

    def set_power_limit(self, index: int, watts: float) -> None: ...

    def energy_j(self, index: int) -> float:
        """Cumulative energy in joules since an arbitrary mark; callers take differences."""
        ...

    def clock(self) -> float:
        """Seconds on this backend's clock (a simulated GPU runs a simulated clock)."""
        ...

    def account_work(self, samples: int) -> None:
        """One training or eval step over `samples` samples has run. Real meters ignore it; the simulated
        GPU's model clock advances by it (so simulated figures never depend on the machine's load)."""
        ...

    def close(self) -> None: ...


class PowerCapError(FieldError):
    """ZEUS_POWER_LIMIT_CAP_W is not a positive number of watts."""

    def __init__(self, value: object) -> None:
        super().__init__(POWER_CAP_ENV, value, POWER_CAP_ALLOWED)


def power_cap_w() -> float | None:
    """The administrator's cap from ZEUS_POWER_LIMIT_CAP_W (None: unset); PowerCapError naming it otherwise."""
    text = os.environ.get(POWER_CAP_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise PowerCapError(text) from None
    if not (math.isfinite(value) and value > 0):
        raise PowerCapError(text)
    return value


def resting_limits(gpu: GPU) -> list[float]:
    """The limit each GPU is left at outside a trial's profiling: the device's default limit (NVML's default,
    the maximum on a datacenter GPU), or the administrator's cap where ZEUS_POWER_LIMIT_CAP_W states one (kept
    within the device's range).

    Why not the limit found when a trial starts: a trial killed mid-profile (SIGKILL, the OOM killer, an
    eviction) cannot restore anything, so the limit found by the next one may be a profiling rung; taken as
    "the limit before", it would be put back after every trial, throttling the GPU for every job after it.
    Zeus restores the maximum; a lower cap is kept only where it is stated."""
    cap = power_cap_w()
    out = []
    for i in range(gpu.device_count()):
        c = gpu.constraints(i)
        out.append(c.default_w if cap is None else min(max(cap, c.min_w), c.max_w))
    return out


def rest_limits(gpu: GPU) -> bool:
    """Put every GPU at its resting limit (`resting_limits`) where it is not; whether any was changed. Called
    when a trial starts (after a killed trial the GPU may still be throttled) and when it ends, whatever ended it.
    A backend that may not set limits is left as it is."""
    if not gpu.can_set_limits:
        return False
    changed = False
    for i, watts in enumerate(resting_limits(gpu)):
        if gpu.get_power_limit(i) != watts:
            gpu.set_power_limit(i, watts)
            changed = True
    return changed


def gpu_model(gpu: GPU) -> str:
    """The GPU model a profile is measured on (NVML's device name; several models joined by " + "): a stored
    profile is reused only on the model that measured it."""
    return " + ".join(dict.fromkeys(gpu.names()))


def measure_only_note(gpu: GPU) -> str:
    """What a trial's reason says when limits could not be set, with why (no zeusd, a GPU zeusd could not
    match, a refused token, ...): a trial that only measured must say so where its result is shown."""
    why = getattr(gpu, "measure_only_reason", "")
    return f"{MEASURE_ONLY_NOTE} ({why})" if why else MEASURE_ONLY_NOTE


def gpu_source(gpu: GPU) -> str:
    """Where a trial's figures come from, as TrialResult.source says it: "measured (nvml)",
    "simulated (GPU model)", or "simulated (GPU model, wall clock)" when the model ran on real time."""
    if not gpu.simulated:
        return f"measured ({gpu.kind})"
    if getattr(gpu, "source", ""):
        return gpu.source  # type: ignore[attr-defined]  (a stand-in names what it simulates)
    return (
        "simulated (GPU model, wall clock)"
        if getattr(gpu, "clock_kind", "model") == "wall"
        else "simulated (GPU model)"
    )


def warn_measure_only(kind: str, detail: str) -> None:
    """Say once, clearly, that power limits cannot be set and the run is measure-only."""
    log.warning(
        "zeus[%s]: cannot set GPU power limits (%s). Running MEASURE-ONLY: energy and time are measured, "
        "no power-limit profiling or optimal limit. Give the pod SYS_ADMIN, or run zeusd on the node "
        "and set ZEUSD_HOST, to enable it.",
        kind,
        detail,
    )
