"""The recurrence pipeline's function, its parameters written out: kfp reads a pipeline's parameters from its
function, their names, types and order from the signature and their descriptions from the docstring's Args,
and the KFP UI shows them. pipelines/dag.py gives each build's defaults (the job's values, the command, ...)
and the steps the body hands its parameters to (`build_pipeline`).
"""

# Written out by `make sources` (pipelines/sources.py) from the job's settings, the run settings, the trial request and STEP_RUN_PARAMETERS.
# Edit those and run it, never this file by hand: tests/test_sources.py fails while the two differ.
# No `from __future__ import annotations` here: kfp reads the pipeline function's annotations as types.
from collections.abc import Callable
from typing import Any


def recurrence_function(steps: Callable[[dict[str, Any]], None]) -> Callable[..., None]:
    """The pipeline function, whose body hands `steps` its parameters by name: kfp calls it once, with a
    channel per parameter, while it builds the pipeline."""

    def zeus_recurrence(
        job_id: str,
        batch_sizes: list,
        default_batch_size: int,
        target_metric: float,
        max_epochs: int,
        higher_is_better: bool,
        metric_name: str,
        eta_knob: float,
        beta_knob: float,
        num_pruning_rounds: int,
        window_size: int,
        seed: int,
        num_gpus: int,
        max_power_w: float,
        reprofile_after: int,
        drift_reaction: str,
        period_s: float,
        max_running: int,
        drift_detector: str,
        drift_threshold: float,
        drift_data: str,
        dispatch_timeout_s: float,
        train_command: list,
        zeus_aware: bool,
        metric_pattern: str,
        keep: str,
        metrics_collector: str,
        trial_backend: str,
        launcher: str,
        num_nodes: int,
        gpus_per_node: int,
        trainjob_runtime: str,
        store_uri: str,
        policy: str,
        reprofile: bool,
        preprocess_ref: str,
        recurrence_id: str,
        owner: str,
        force: bool,
    ) -> None:
        """One recurrence of an energy-optimal training job.

        Args:
            job_id: Names the job's history in the store, which the bandit learns from (a new id starts afresh).
            batch_sizes: Batch sizes the bandit may choose from. A JSON list, e.g. [16, 32, 64, 128].
            default_batch_size: The batch size used today (one of batch_sizes), the baseline of savings.
            target_metric: The metric value a trial must reach.
            max_epochs: Epochs a trial may take to reach the target.
            higher_is_better: The target is a value to reach or exceed (false: to reach or go below, e.g. a loss).
            metric_name: The metric's name, as the script reports it.
            eta_knob: Weight of energy against time in the cost, in [0, 1] (1: energy only).
            beta_knob: Early stop (> 1; 0: never): a trial stops once its cost would pass beta x the cheapest batch size's mean cost (the default policy; zeus-nsdi23: beta x the cheapest recurrence so far).
            num_pruning_rounds: Rounds of pruning exploration before Thompson sampling (0: none).
            window_size: Recent trials per batch size the bandit learns from (0: all of them).
            seed: The job's seed: every decision and every trial's seed derive from it.
            num_gpus: GPUs a trial trains on; the cost counts them all.
            max_power_w: A GPU's maximum power limit in watts: time is priced at it.
            reprofile_after: Profile a batch size's power limits again once its stored profile is this many recurrences old (0: never).
            drift_reaction: What a recurrence opened by drift does to the bandit's history: window (forget the trials before it), reexplore (forget them but restart the walk from the size cheapest before it) or none.
            period_s: Seconds between recurrences: a run opens one once this long has passed since the last one began, or on drift; otherwise it is skipped and trains nothing (0: every run is due).
            max_running: Recurrences of the job running at once at most, counted in the store across every schedule and submission; a run past it is skipped (0: no cap).
            drift_detector: What detects drift in drift_data, which opens a recurrence before its period: none, fingerprint, rows, psi, ks, or a function module:function.
            drift_threshold: The detector's statistic above which the data drifted (0: the detector's default: fingerprint 0.5, rows 0.1, psi 0.2, ks 0.1, a function 0).
            drift_data: The input data the drift detector reads: a Parquet or CSV file, or a directory of them.
            dispatch_timeout_s: Seconds after which a trial that never reported (its process was killed or lost) is recorded failed by the next bandit step, and its recurrence no longer holds a slot under max_running (default a day; 0 when nothing else runs the job).
            train_command: The training command, with placeholders {python}, {batch_size}, {data_dir}, {log_dir}, {work_dir}.
            zeus_aware: The script uses ZeusDataLoader (false: a plain script, its metrics collected).
            metric_pattern: A plain script's metric regex: groups name and value, or named groups name, value and epoch or step ("" for Katib's name=value).
            keep: Files the script saves that the trial keeps as its Model artifact: comma-separated globs relative to its work directory, e.g. 'checkpoints/*.pt' ("": {log_dir}/model.pt).
            metrics_collector: A plain script's Katib-style metricsCollectorSpec, JSON or YAML ("" for stdout).
            trial_backend: "script" (run the training command) or "trace:<workload>/<gpu>" (replay the NSDI'23 trace).
            launcher: Where a trial runs: local, torchrun, trainjob or pytorchjob (zeus_kfp.launch).
            num_nodes: Nodes a cluster trial runs on.
            gpus_per_node: GPUs (processes) per node of a trial.
            trainjob_runtime: The TrainJob's ClusterTrainingRuntime.
            store_uri: Where the store is: a directory, file:// or s3://bucket/prefix (a cluster trial's pods hand their result back through it).
            policy: The batch-size policy (zeus_kfp.policy); a running trial follows its early-stop rule (the live threshold).
            reprofile: Profile power limits again even where a stored profile could be reused.
            preprocess_ref: What fills the recurrence's data: module:function or a command.
            recurrence_id: The recurrence's id (empty: the KFP run id).
            owner: Who runs the job, recorded with it in the store.
            force: Open a recurrence even if it is not due (it still counts against max_running).
        """
        steps(
            dict(
                job_id=job_id,
                batch_sizes=batch_sizes,
                default_batch_size=default_batch_size,
                target_metric=target_metric,
                max_epochs=max_epochs,
                higher_is_better=higher_is_better,
                metric_name=metric_name,
                eta_knob=eta_knob,
                beta_knob=beta_knob,
                num_pruning_rounds=num_pruning_rounds,
                window_size=window_size,
                seed=seed,
                num_gpus=num_gpus,
                max_power_w=max_power_w,
                reprofile_after=reprofile_after,
                drift_reaction=drift_reaction,
                period_s=period_s,
                max_running=max_running,
                drift_detector=drift_detector,
                drift_threshold=drift_threshold,
                drift_data=drift_data,
                dispatch_timeout_s=dispatch_timeout_s,
                train_command=train_command,
                zeus_aware=zeus_aware,
                metric_pattern=metric_pattern,
                keep=keep,
                metrics_collector=metrics_collector,
                trial_backend=trial_backend,
                launcher=launcher,
                num_nodes=num_nodes,
                gpus_per_node=gpus_per_node,
                trainjob_runtime=trainjob_runtime,
                store_uri=store_uri,
                policy=policy,
                reprofile=reprofile,
                preprocess_ref=preprocess_ref,
                recurrence_id=recurrence_id,
                owner=owner,
                force=force,
            )
        )

    return zeus_recurrence
