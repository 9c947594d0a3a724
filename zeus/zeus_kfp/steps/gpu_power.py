"""The gpu-power step: the maximum power limit a run prices time at, read from the GPU at run time.

Why a step of its own: Zeus prices time at the GPU's maximum power (MAXPOWER), so the job's cost function
depends on the GPU the cluster has (700 W on an H100, 400 W on an A100), which the machine that compiles the
pipeline cannot know. The job's spec, with that figure, is registered by the gate, which runs on a CPU pod;
the policies price every trial of the history with it, so it must be known before the first trial and stay
the same afterwards (a later recurrence on another GPU model is refused as a changed spec, naming
max_power_w). This step runs first, in a pod scheduled like the trials (the train image, one GPU of the
trials' resource, their node selector and tolerations), and reads the limit through NVML (no privilege
needed). A run that pins max_power_w (> 0) gets its own figure back and no GPU is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeus_kfp.errors import FieldError
from zeus_kfp.power import max_power_limit_w
from zeus_kfp.steps.step_events import reported


@dataclass(frozen=True)
class MaxPower:
    """The figure and where it came from, for the step's log."""

    watts: float
    source: str


@reported("gpu-power")
def gpu_power(max_power_w: float, gpu: str = "auto") -> MaxPower:
    """`max_power_w` when it is pinned (> 0); 0: the largest maximum power limit of this pod's GPUs."""
    if not isinstance(max_power_w, (int, float)) or isinstance(max_power_w, bool) or max_power_w < 0:
        raise FieldError("max_power_w", max_power_w, "watts > 0 to pin it, or 0 to read it from the GPU at run time")
    if max_power_w > 0:
        return MaxPower(float(max_power_w), "pinned by the run's max_power_w")
    watts, simulated = max_power_limit_w(gpu)
    source = "the simulated GPU's (no GPU in this pod)" if simulated else "read from this pod's GPU through NVML"
    return MaxPower(float(watts), source)
