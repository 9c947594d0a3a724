"""GPU power: backends behind one protocol (NVML, zeusd, simulated), an energy monitor, the JIT profiler."""

from zeus_kfp.power.devices import max_power_limit_w, open_gpu
from zeus_kfp.power.gpu import GPU, GPU_KINDS, GPUError, GPUKindError, PowerConstraints
from zeus_kfp.power.monitor import EnergyMonitor, Measurement
from zeus_kfp.power.profiler import (
    Done,
    Eval,
    PowerLimitProfiler,
    ProfileParams,
    Profiling,
    Ready,
    Warmup,
    candidate_limits,
)
from zeus_kfp.power.selection import (
    Energy,
    MaxSlowdown,
    OptimumSelector,
    Time,
    ZeusCost,
    choose_limit,
)
from zeus_kfp.power.simulated import PowerModel, SimulatedGPU
from zeus_kfp.profiles import PROFILE_COLUMNS

__all__ = [
    "GPU",
    "GPU_KINDS",
    "PROFILE_COLUMNS",
    "Done",
    "Energy",
    "EnergyMonitor",
    "Eval",
    "GPUError",
    "GPUKindError",
    "MaxSlowdown",
    "Measurement",
    "OptimumSelector",
    "PowerConstraints",
    "PowerLimitProfiler",
    "PowerModel",
    "ProfileParams",
    "Profiling",
    "Ready",
    "SimulatedGPU",
    "Time",
    "Warmup",
    "ZeusCost",
    "candidate_limits",
    "choose_limit",
    "max_power_limit_w",
    "open_gpu",
]
