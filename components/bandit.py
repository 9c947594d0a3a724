"""bandit: asks the batch-size policy for this attempt, given the job's history in the store,
records the trial as dispatched and hands train the stored power profile to reuse, if any.
Never cached: a cached decision would replay an old one."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def bandit(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    policy: str,
    run_id: str,
    reprofile: bool,
    reuse_profile: Output[Dataset],
    dispatch_timeout_s: float = 86400.0,
) -> NamedTuple("BanditOutputs", batch_size=int, cost_threshold=float, trial=int, trial_seed=int):
    """cost_threshold is -1.0 when the trial has no early-stop threshold (a float output cannot be None);
    reuse_profile is the stored power profile to train at (an empty table: profile); reprofile forces one.
    A trial of the job left unfinished longer than dispatch_timeout_s (a killed pod) is recorded failed first."""
    from zeus import steps

    choice = steps.bandit(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        attempt=attempt,
        policy=policy,
        kfp_run_id=run_id,
        reprofile=reprofile,
        reuse_profile_path=reuse_profile.path,
        dispatch_timeout_s=dispatch_timeout_s,
    )
    for lost in choice.abandoned:
        print(f"attempt {attempt}: {lost}")
    print(f"attempt {attempt}: batch size {choice.batch_size} ({choice.decision.stage}: {choice.decision.reason})")
    return choice.batch_size, choice.cost_threshold_param, choice.trial, choice.trial_seed
