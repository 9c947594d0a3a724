"""gate: the first step of every run. Asks the store to open a recurrence of the job (zeus_kfp.steps.gate): due
by its period or by drift, and a free slot under its cap. The pipeline's other steps run only when it
opened one (its one output, pipelines/dag.py); a skipped run ends here, its reason recorded in the store.

The one step that takes the job's settings (the KFP UI shows one typed field per setting; written out from the
declaration, pipelines/sources.py says why): it registers the job or checks its spec before it asks, and the
steps after it read the spec from the store. Beside them every run setting (zeus_kfp.run_settings.RunSettings:
the period, cap, drift detector and dispatch timeout this run runs under, no part of the job's spec), and how
the script reports (train's inputs of those names), which its begin records for the job.

One output, not a NamedTuple: kfp.local (2.17) cannot resolve a named output in a condition (it reads
`gate-opened` as a parent input and skips the branch), while the single output `gate-Output` it resolves; the
reason a run was skipped is in the store, not an output.
"""

# Written out by `make sources` (pipelines/sources.py) from the job's and the run's settings (zeus/zeus_kfp/job.py, zeus/zeus_kfp/run_settings.py).
# Edit those and run it, never this file by hand: tests/test_sources.py fails while the two differ.
from kfp import dsl

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def gate(
    job_id: str,
    batch_sizes: list,
    default_batch_size: int,
    target_metric: float,
    max_epochs: int,
    higher_is_better: bool,
    metric_name: str,
    eta_knob: float,
    beta_knob: float,
    max_attempts: int,
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
    zeus_aware: bool,
    metric_pattern: str,
    metrics_collector: str,
    keep: str,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    owner: str,
    force: bool,
) -> bool:
    """Opens a recurrence of the job, or skips this run: due (its period passed, or drift) and a free slot
    (fewer than max_running recurrences running, counted in the store).

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
        max_attempts: Trials per recurrence at most (the retry loop's length, fixed when the pipeline is compiled).
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
        zeus_aware: The script uses ZeusDataLoader (else a plain script whose metric train reads).
        metric_pattern: The regex train reads a plain script's metric lines with ("" for Katib's name=value).
        metrics_collector: A plain script's metrics collector, Katib's metricsCollectorSpec as JSON ("" for stdout).
        keep: The files a trial keeps as its model, globs in its work directory ("" for {log_dir}/model.pt).
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        owner: Who runs the job, recorded with it in the store.
        force: Open a recurrence even if it is not due (it still takes a slot under the cap).

    Returns:
        Whether this run is a recurrence (false: it ends here and trains nothing; the store says why).
    """
    from zeus_kfp.steps.gate import gate as step

    settings = dict(
        job_id=job_id,
        batch_sizes=batch_sizes,
        default_batch_size=default_batch_size,
        target_metric=target_metric,
        max_epochs=max_epochs,
        higher_is_better=higher_is_better,
        metric_name=metric_name,
        eta_knob=eta_knob,
        beta_knob=beta_knob,
        max_attempts=max_attempts,
        num_pruning_rounds=num_pruning_rounds,
        window_size=window_size,
        seed=seed,
        num_gpus=num_gpus,
        max_power_w=max_power_w,
        reprofile_after=reprofile_after,
        drift_reaction=drift_reaction,
    )
    run_settings = dict(
        period_s=period_s,
        max_running=max_running,
        drift_detector=drift_detector,
        drift_threshold=drift_threshold,
        drift_data=drift_data,
        dispatch_timeout_s=dispatch_timeout_s,
    )
    return step(
        settings,
        run_settings,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        owner=owner,
        force=force,
        reads=dict(
            zeus_aware=zeus_aware, metric_pattern=metric_pattern, metrics_collector=metrics_collector, keep=keep
        ),
    )
