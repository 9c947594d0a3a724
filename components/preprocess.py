"""preprocess: once per recurrence. Validates the job settings, registers or checks the job in
the store, opens the recurrence and writes the Dataset the trials train on.

Takes every JobSpec setting as a typed, described parameter (the KFP UI shows one field per setting and
`--param max_epochs=10` stays a number), written out from the declaration (pipelines/sources.py says why).
tests/test_job_fields.py compares the compiled component with the declaration.
"""

# Written out by `make sources` (pipelines/sources.py) from the job's settings (zeus/zeus_kfp/job.py).
# Edit those and run it, never this file by hand: tests/test_sources.py fails while the two differ.
from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def preprocess(
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
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    preprocess_ref: str,
    owner: str,
    data: Output[Dataset],
) -> NamedTuple("PreprocessOutputs", spec_json=str, recurrence_id=str, recurrence=int):
    """Validates the job's settings (a JobSpec), registers the job in the store on its first recurrence
    or checks it, opens the recurrence and runs the user's preprocessing once, into `data`.

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
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        preprocess_ref: What fills `data`: module:function, file.py:function or a command ("" for none).
        owner: Who runs the job, recorded with it in the store.
        data: The recurrence's data directory, which every trial of it trains on.

    Returns:
        spec_json: The validated JobSpec as JSON.
        recurrence_id: The recurrence's id.
        recurrence: The recurrence's number within the job.
    """
    from zeus_kfp.steps.preprocess import preprocess as step

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
    return step(
        settings,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        data_dir=data.path,
        preprocess_ref=preprocess_ref,
        owner=owner,
    )
