"""One trial, launched as its LaunchConfig says: the train step's single entry into zeus.launch.

Why one function: the train step should not care where a trial runs. local and torchrun go
through the script runner on the step's own machine (torchrun by wrapping the command in
zeus.launch.torchrun, so timeouts, OOM detection and reading result.json stay the runner's);
trainjob and pytorchjob create a Kubeflow job and read back what rank 0 handed over. Every path
returns the runner's TrialOutcome.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from zeus.job import JobSpec
from zeus.launch.config import LaunchConfig, LaunchError
from zeus.launch.torchrun import local_command
from zeus.train.runner import TrialOutcome, run_trial


def run_launched_trial(
    config: LaunchConfig,
    spec: JobSpec,
    *,
    batch_size: int,
    cost_threshold: float | None,
    command: Sequence[str],
    work_dir: Path,
    zeus_aware: bool = True,
    data_dir: str | os.PathLike[str] | None = None,
    gpu: str = "auto",
    metric_patterns: Sequence[str] | None = None,
    reuse_profile: pd.DataFrame | None = None,
    seed: int | None = None,
    store_uri: str = "",
    recurrence_id: str = "",
    attempt: int = 1,
    **runner_options: object,
) -> TrialOutcome:
    """Run one trial of `spec` at `batch_size` where `config` says; see the module docstring."""
    config.check_spec(spec)
    if config.cluster:
        if not zeus_aware:
            raise LaunchError(
                "zeus_aware",
                zeus_aware,
                f"true for launcher {config.launcher!r}: on a cluster rank 0's ZeusDataLoader measures the trial "
                "(a plain script is measured from outside, which needs launcher local or torchrun)",
            )
        from zeus.launch.cluster import run_cluster_trial

        return run_cluster_trial(
            config,
            spec,
            batch_size=batch_size,
            cost_threshold=cost_threshold,
            command=command,
            gpu=gpu,
            reuse_profile=reuse_profile,
            seed=seed,
            store_uri=store_uri,
            recurrence_id=recurrence_id,
            attempt=attempt,
            work_dir=work_dir,
            **runner_options,  # type: ignore[arg-type]
        )
    if config.launcher == "torchrun":
        command = local_command(command, config.gpus_per_node)
    return run_trial(
        spec,
        batch_size=batch_size,
        cost_threshold=cost_threshold,
        command=command,
        work_dir=work_dir,
        zeus_aware=zeus_aware,
        data_dir=data_dir,
        gpu=gpu,
        metric_patterns=metric_patterns,
        reuse_profile=reuse_profile,
        seed=seed,
        **runner_options,  # type: ignore[arg-type]
    )
