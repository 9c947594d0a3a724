"""bandit: asks the batch-size policy for this attempt, given the job's history in the store,
and records the trial as dispatched. Never cached: a cached decision would replay an old one."""

from typing import NamedTuple

from kfp import dsl

from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def bandit(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    policy: str,
    run_id: str,
) -> NamedTuple("BanditOutputs", batch_size=int, cost_threshold=float, trial=int):
    """cost_threshold is -1.0 when the trial has no early-stop threshold (a float output cannot be None)."""
    from zeus.steps import choose

    choice = choose(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        attempt=attempt,
        policy=policy,
        kfp_run_id=run_id,
    )
    print(f"attempt {attempt}: batch size {choice.batch_size} ({choice.stage}: {choice.reason})")
    return choice.batch_size, choice.cost_threshold, choice.trial
