"""GPU power: backends behind one protocol (NVML, zeusd, simulated), an energy monitor, the JIT profiler."""

from zeus.power.gpu import GPU, GPU_KINDS, GPUError, GPUKindError, PowerConstraints, max_power_limit_w, open_gpu
from zeus.power.monitor import EnergyMonitor, Measurement
from zeus.power.profiler import (
    PowerLimitProfiler,
    ProfileParams,
    ProfilerState,
    candidate_limits,
    choose_limit,
    profile_frame,
)
from zeus.power.simulated import PowerModel, SimulatedGPU
from zeus.profiles import PROFILE_COLUMNS

__all__ = [
    "GPU",
    "GPU_KINDS",
    "PROFILE_COLUMNS",
    "EnergyMonitor",
    "GPUError",
    "GPUKindError",
    "Measurement",
    "PowerConstraints",
    "PowerLimitProfiler",
    "PowerModel",
    "ProfileParams",
    "ProfilerState",
    "SimulatedGPU",
    "candidate_limits",
    "choose_limit",
    "max_power_limit_w",
    "open_gpu",
    "profile_frame",
]
