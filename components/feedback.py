"""feedback: writes the finished trial and its power profile to the store. Safe to retry: every
object it writes is keyed by (recurrence, attempt)."""

from kfp import dsl
from kfp.dsl import Input

from zeus_kfp.components.artifacts import PowerProfile
from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def feedback(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    result_json: str,
    profile: Input[PowerProfile],
) -> bool:
    """Records the finished trial and the power profile it measured in the store.

    Args:
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        job_id: The job the trial belongs to.
        recurrence_id: The trial's recurrence.
        attempt: The trial's attempt within the recurrence.
        result_json: The trial's result (train's output, zeus_kfp.job.TrialResult as JSON).
        profile: The power profile train measured (empty when it reused a stored one).

    Returns:
        Whether the recurrence ends with this trial (it reached the target, or the script failed): the next
        attempt runs only if not.
    """
    from zeus_kfp.steps.feedback import feedback as step

    return step(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        attempt=attempt,
        result_json=result_json,
        profile_path=profile.path,
    )
