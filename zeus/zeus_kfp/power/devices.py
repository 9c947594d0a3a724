"""Which GPU backend this process gets (`open_gpu`), and what it says about the GPUs' power.

Why a module of its own: the backends (NVML, zeusd, simulated) implement the protocol of
zeus_kfp.power.gpu, so they import it; the choice among them imports every backend. Kept in the
protocol's module, that choice made each backend import a module that imports it back.
"""

from __future__ import annotations

import os

from zeus_kfp.power.gpu import GPU, GPU_KINDS, GPUKindError
from zeus_kfp.power.nvml import NvmlGPU
from zeus_kfp.power.simulated import SimulatedGPU


def _nvml_visible() -> bool:
    try:
        import pynvml  # optional: absent on CPU machines

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return False


def _zeusd_configured() -> bool:
    return bool(os.environ.get("ZEUSD_HOST") or os.environ.get("ZEUSD_HOST_PORT"))


def open_gpu(kind: str = "auto") -> GPU:
    """Open the GPUs of this process through the backend `kind`.

    "auto": zeusd when a GPU is visible and ZEUSD_HOST (or ZEUSD_HOST_PORT) is set, NVML when a
    GPU is visible, else the simulated GPU. "nvml" and "zeusd" fail with `GPUError` when no GPU
    is visible (asking for real hardware and silently getting a model would mislabel numbers).
    """
    if kind not in GPU_KINDS:
        raise GPUKindError(kind)
    if kind == "auto":
        kind = ("zeusd" if _zeusd_configured() else "nvml") if _nvml_visible() else "simulated"
    if kind == "simulated":
        return SimulatedGPU.from_env()
    if kind == "nvml":
        return NvmlGPU()
    from zeus_kfp.power.zeusd import ZeusdGPU  # deferred: it loads requests (0.1 s), which only a zeusd node uses

    return ZeusdGPU.from_env()


def max_power_limit_w(kind: str = "auto") -> tuple[float, bool]:
    """The largest maximum power limit among this process's GPUs, and whether it is simulated.

    Why: Zeus prices time at the GPU's maximum power (MAXPOWER), so a job run on a real GPU should
    use that GPU's figure (700 W on an H200), not the simulated V100's 250 W.
    """
    gpu = open_gpu(kind)
    try:
        return max(gpu.constraints(i).max_w for i in range(gpu.device_count())), gpu.simulated
    finally:
        gpu.close()
