"""train: one trial of the user's training script at the bandit's batch size, with just-in-time
power-limit profiling. Touches the store only to read back a cluster trial's result (launcher trainjob or
pytorchjob); its outputs feed the feedback step."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components.artifacts import PowerProfile
from components.image import ZEUS_KFP_TRAIN_IMAGE


@dsl.component(base_image=ZEUS_KFP_TRAIN_IMAGE, install_kfp_package=False)
def train(
    spec_json: str,
    batch_size: int,
    cost_threshold: float,
    command: list,
    zeus_aware: bool,
    metric_pattern: str,
    metrics_collector: str,
    trial_backend: str,
    seed: int,
    data: Input[Dataset],
    reuse_profile: Input[Dataset],
    profile: Output[PowerProfile],
    metrics: Output[Metrics],
    model: Output[Model],
    launcher: str = "local",
    num_nodes: int = 1,
    gpus_per_node: int = 1,
    trainjob_runtime: str = "torch-distributed",
    store_uri: str = "",
    recurrence_id: str = "",
    attempt: int = 1,
) -> NamedTuple(
    "TrainOutputs",
    status=str,
    reached=bool,
    time_s=float,
    energy_j=float,
    cost=float,
    epochs=int,
    result_json=str,
):
    """A failing script does not fail the step: the trial comes back 'failed' with the script's error.
    trial_backend: "script" (run `command`) or "trace:<workload>/<gpu>" (replay the NSDI'23 trace).
    metrics_collector: a plain script's Katib-style metricsCollectorSpec as JSON/YAML ("" = stdout).
    launcher: local | torchrun | trainjob | pytorchjob (zeus.launch), over num_nodes x gpus_per_node GPUs."""
    from zeus import steps

    result = steps.train(
        spec_json=spec_json,
        batch_size=batch_size,
        cost_threshold=cost_threshold,
        command=command,
        data_dir=data.path,
        profile=profile,
        metrics=metrics,
        model=model,
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern,
        metrics_collector=metrics_collector,
        trial_backend=trial_backend,
        seed=seed,
        reuse_profile_path=reuse_profile.path,
        launcher=launcher,
        num_nodes=num_nodes,
        gpus_per_node=gpus_per_node,
        runtime=trainjob_runtime,
        store_uri=store_uri,
        recurrence_id=recurrence_id,
        attempt=attempt,
    )
    r = result
    return r.status.value, r.reached, r.time_s, r.energy_j, r.cost, r.num_epochs, r.to_json()
