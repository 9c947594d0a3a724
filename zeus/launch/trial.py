"""One trial, launched as its LaunchConfig says: the train step's single entry into zeus.launch.

Why one function: the train step should not care where a trial runs. local and torchrun go
through the script runner on the step's own machine (torchrun by wrapping the command in
zeus.launch.torchrun, so timeouts, OOM detection and reading result.json stay the runner's);
trainjob and pytorchjob create a Kubeflow job and read back what rank 0 handed over. Every path
returns a zeus.job.TrialOutcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zeus.job import JobSpec, TrialOutcome
from zeus.launch.cluster import run_cluster_trial
from zeus.launch.config import LaunchConfig, LaunchError
from zeus.launch.torchrun import local_command
from zeus.train.runner import run_trial


def run_launched_trial(
    config: LaunchConfig,
    spec: JobSpec,
    *,
    command: Sequence[str],
    zeus_aware: bool = True,
    store_uri: str = "",
    recurrence_id: str = "",
    attempt: int = 1,
    **trial: Any,
) -> TrialOutcome:
    """Run one trial of `spec` where `config` says; `trial` holds run_trial's settings (batch_size, cost_threshold,
    work_dir, gpu, reuse_profile, seed, ...). See the module docstring."""
    config.check_spec(spec)
    if not config.cluster:
        if config.launcher == "torchrun":
            command = local_command(command, config.gpus_per_node)
        return run_trial(spec, command=command, zeus_aware=zeus_aware, **trial)
    if not zeus_aware:
        raise LaunchError(
            "zeus_aware",
            zeus_aware,
            f"true for launcher {config.launcher!r}: on a cluster rank 0's ZeusDataLoader measures the trial "
            "(a plain script is measured from outside, which needs launcher local or torchrun)",
        )

    # The step's dataset path means nothing in the pods (the script reads its own data), and a collector reads a
    # plain script's metrics, which a cluster trial (Zeus-aware, checked above) has none of.
    for step_only in ("data_dir", "metric_patterns", "metrics_file", "collector"):
        trial.pop(step_only, None)
    return run_cluster_trial(
        config, spec, command=command, store_uri=store_uri, recurrence_id=recurrence_id, attempt=attempt, **trial
    )
