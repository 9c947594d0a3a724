"""bandit: asks the batch-size policy for this attempt, given the job's history in the store,
records the trial as dispatched and hands train the stored power profile to reuse, if any.
Never cached: a cached decision would replay an old one."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
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
    """Decides this attempt's batch size with the policy, from the job's history in the store, and records
    the trial as dispatched. A trial of the job left unfinished longer than dispatch_timeout_s (a killed
    pod) is recorded failed first.

    Args:
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        job_id: The job whose history the policy reads.
        recurrence_id: The recurrence this attempt belongs to.
        attempt: The attempt's number within the recurrence (1, 2, ...).
        policy: The batch-size policy's name (zeus_kfp.policy).
        run_id: The KFP run id, recorded with the dispatch.
        reprofile: Profile power limits again even where a stored profile could be reused.
        reuse_profile: The stored power profile train is to train at (an empty table: profile).
        dispatch_timeout_s: Seconds after which another trial still unfinished counts as lost.

    Returns:
        batch_size: The batch size the trial trains with.
        cost_threshold: Its early-stop cost threshold in joules; -1.0 for none (a float output cannot be None).
        trial: The trial's number within the job.
        trial_seed: The seed of the trial's own randomness (zeus_kfp.seeds).
    """
    from zeus_kfp.steps.bandit import bandit as step

    choice = step(
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
    for line in choice.abandoned_lines:
        print(line)  # `zeus-kfp run` shows it (pipelines.local); the decision it reads from the store
    print(f"attempt {attempt}: batch size {choice.batch_size} ({choice.decision.stage}: {choice.decision.reason})")
    return choice.batch_size, choice.cost_threshold_param, choice.trial, choice.trial_seed
