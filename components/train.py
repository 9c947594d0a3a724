"""train: one trial of the user's training script at the bandit's batch size, with just-in-time
power-limit profiling. Touches the store only to read back a cluster trial's result (launcher trainjob or
pytorchjob); its result feeds the feedback step.

Every field of the declared trial request (zeus_kfp.steps.request.TrialRequest) is a typed, described parameter,
written out from the declaration (pipelines/sources.py), and the body hands the step the request as one value.
tests/test_trial_request.py compares the component with the declaration.

Its outputs: the trial's result as JSON (what feedback records), the power profile it measured, the model,
the trial's log, and a Metrics artifact (energy, time, cost, epochs, ...): the KFP UI shows it beside the
step, and benchmarks/pipeline.py reads its wall_s and script_cpu_s. Nothing else: the result's scalars as
separate outputs were read by no step.
"""

# Written out by `make sources` (pipelines/sources.py) from the trial request (zeus/zeus_kfp/steps/request.py).
# Edit those and run it, never this file by hand: tests/test_sources.py fails while the two differ.
from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from zeus_kfp.components.artifacts import PowerProfile
from zeus_kfp.components.image import LOCAL_TRAIN_IMAGE


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
    keep: str = "",
    launcher: str = "local",
    num_nodes: int = 1,
    gpus_per_node: int = 1,
    trainjob_runtime: str = "torch-distributed",
    store_uri: str = "",
    policy: str = "default",
    recurrence_id: str = "",
    attempt: int = 1,
) -> NamedTuple("TrainOutputs", result_json=str):
    """Runs one trial of the training script at the bandit's batch size, with just-in-time power-limit
    profiling. A failing script, or a bad input, does not fail the step: the trial comes back 'failed' with
    the error, feedback records it and the recurrence ends.

    Args:
        spec_json: The job's JobSpec as JSON (preprocess's output).
        batch_size: The batch size the bandit chose.
        cost_threshold: The early-stop cost threshold in joules; negative for none.
        command: The training command, with placeholders {python}, {batch_size}, {data_dir}, {log_dir}, {work_dir}.
        zeus_aware: The script uses ZeusDataLoader (false: a plain script, its metrics collected).
        metric_pattern: A plain script's metric regex: groups name and value, or named groups name, value and epoch or step ("" for Katib's name=value).
        keep: Files the script saves that the trial keeps as its Model artifact: comma-separated globs relative to its work directory, e.g. 'checkpoints/*.pt' ("": {log_dir}/model.pt).
        metrics_collector: A plain script's Katib-style metricsCollectorSpec, JSON or YAML ("" for stdout).
        trial_backend: "script" (run the training command) or "trace:<workload>/<gpu>" (replay the NSDI'23 trace).
        seed: The trial's own seed (ZEUS_SEED for the script).
        launcher: Where a trial runs: local, torchrun, trainjob or pytorchjob (zeus_kfp.launch).
        num_nodes: Nodes a cluster trial runs on.
        gpus_per_node: GPUs (processes) per node of a trial.
        trainjob_runtime: The TrainJob's ClusterTrainingRuntime.
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix (a cluster trial's pods hand their result back through it).
        policy: The batch-size policy (zeus_kfp.policy); a running trial follows its early-stop rule (the live threshold).
        recurrence_id: The trial's recurrence (labels a cluster trial's job).
        attempt: The trial's attempt (labels it too).
        data: The recurrence's data directory (preprocess's output).
        reuse_profile: A stored power profile to train at (an empty table: profile this trial).
        profile: The power profile the trial measured.
        metrics: The trial's energy, time, cost, epochs, batch size and power limit.
        model: The model the script saved (a note when it saved none).
        trial_log: The trial's log: the script's stdout and stderr, result.json, what the collector read, and
            whatever else the script wrote to {log_dir} but the model.

    Returns:
        result_json: The trial's zeus_kfp.job.TrialResult as JSON, for feedback.
    """
    from zeus_kfp.steps.request import TrialRequest
    from zeus_kfp.steps.train import train as step

    request = TrialRequest(
        spec_json=spec_json,
        batch_size=batch_size,
        cost_threshold=cost_threshold,
        command=command,
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern,
        keep=keep,
        metrics_collector=metrics_collector,
        trial_backend=trial_backend,
        seed=seed,
        launcher=launcher,
        num_nodes=num_nodes,
        gpus_per_node=gpus_per_node,
        trainjob_runtime=trainjob_runtime,
        store_uri=store_uri,
        policy=policy,
        recurrence_id=recurrence_id,
        attempt=attempt,
    )
    result = step(
        request,
        data_dir=data.path,
        reuse_profile_path=reuse_profile.path,
        profile=profile,
        metrics=metrics,
        model=model,
        trial_log=trial_log,
    )
    return (result.to_json(),)
