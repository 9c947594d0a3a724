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
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from zeus_kfp.errors import FieldError

log = logging.getLogger(__name__)

GPU_KINDS = ("auto", "nvml", "zeusd", "simulated")
MEASURE_ONLY_NOTE = "measure-only: power limits could not be set"  # in a trial's reason


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

    `min_window_s` is how long a measurement window must last for its energy to mean something.
    Real meters are coarse: an H200's energy counter advances in steps of about 100 ms, and sampled
    power is a ~1 s moving average, so a 50 ms window reads zero or one step of energy. The
    profiler keeps each window open at least this long (ZEUS_MIN_WINDOW_S overrides it). A model
    whose energy is exact (the simulated GPU) says 0.
    """

    kind: str
    simulated: bool
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
