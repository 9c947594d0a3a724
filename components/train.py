"""train: one trial of the user's training script at the bandit's batch size, with just-in-time
power-limit profiling. Touches the store only to read back a cluster trial's result (launcher trainjob or
pytorchjob); its outputs feed the feedback step."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from components.artifacts import PowerProfile
from components.image import LOCAL_TRAIN_IMAGE


@dsl.component(base_image=LOCAL_TRAIN_IMAGE, install_kfp_package=False)
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
    trial_log: Output[Artifact],
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
    """Runs one trial of the training script at the bandit's batch size, with just-in-time power-limit
    profiling. A failing script, or a bad input, does not fail the step: the trial comes back 'failed' with
    the error, feedback records it and the recurrence ends.

    Args:
        spec_json: The job's JobSpec as JSON (preprocess's output).
        batch_size: The batch size the bandit chose.
        cost_threshold: The early-stop cost threshold in joules; negative for none.
        command: The training command, with placeholders {python}, {batch_size}, {data_dir}, {log_dir}, {work_dir}.
        zeus_aware: The script uses ZeusDataLoader (false: a plain script, its metrics collected).
        metric_pattern: A plain script's metric regex, groups name and value ("" for Katib's name=value).
        metrics_collector: A plain script's Katib-style metricsCollectorSpec, JSON or YAML ("" for stdout).
        trial_backend: "script" (run `command`) or "trace:<workload>/<gpu>" (replay the NSDI'23 trace).
        seed: The trial's own seed (ZEUS_SEED for the script).
        data: The recurrence's data directory (preprocess's output).
        reuse_profile: A stored power profile to train at (an empty table: profile this trial).
        profile: The power profile the trial measured.
        metrics: The trial's energy, time, cost, epochs, batch size and power limit.
        model: The model the script saved (a note when it saved none).
        trial_log: The trial's log: the script's stdout and stderr, result.json, what the collector read, and
            whatever else the script wrote to {log_dir} but the model.
        launcher: Where the trial runs: local, torchrun, trainjob or pytorchjob (zeus.launch).
        num_nodes: Nodes of a cluster trial.
        gpus_per_node: GPUs (processes) per node.
        trainjob_runtime: The TrainJob's ClusterTrainingRuntime.
        store_uri: The store, through which a cluster trial's pods hand their result back.
        recurrence_id: The trial's recurrence (labels a cluster trial's job).
        attempt: The trial's attempt (labels it too).

    Returns:
        status: How the trial ended (zeus.job.TrialStatus).
        reached: Whether it reached the target.
        time_s: Its time in seconds.
        energy_j: Its energy in joules, all GPUs.
        cost: Its cost by the job's cost function.
        epochs: Epochs it ran.
        result_json: Its zeus.job.TrialResult as JSON, for feedback.
    """
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
        trial_log=trial_log,
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
