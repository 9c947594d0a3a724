"""gpu-power: the GPU's maximum power limit, read at run time, at which the run prices time (Zeus's MAXPOWER).
Runs first, on a GPU like the trials', unless the run pins max_power_w."""

from kfp import dsl

from zeus_kfp.components.image import LOCAL_TRAIN_IMAGE


@dsl.component(base_image=LOCAL_TRAIN_IMAGE, install_kfp_package=False)
def gpu_power(max_power_w: float) -> float:
    """Reads the maximum power limit of this pod's GPU (NVML), or passes a pinned one through.

    Args:
        max_power_w: Watts to pin (> 0), or 0 to read the GPU's maximum power limit here.

    Returns:
        The maximum power limit in watts that the run's cost function prices time at.
    """
    from zeus_kfp.steps.gpu_power import gpu_power as step

    found = step(max_power_w)
    print(f"gpu-power: time is priced at {found.watts:g} W, {found.source}")
    return found.watts
