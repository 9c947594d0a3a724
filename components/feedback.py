"""feedback: writes the finished trial, its power profile and a bandit-state snapshot to the
store. Safe to retry: every object it writes is keyed by (recurrence, attempt)."""

from kfp import dsl
from kfp.dsl import Input

from components.artifacts import PowerProfile
from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def feedback(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    policy: str,
    result_json: str,
    profile: Input[PowerProfile],
) -> bool:
    """Returns whether the trial reached the target: the next attempt runs only if not."""
    from zeus import steps

    return steps.feedback(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        attempt=attempt,
        result_json=result_json,
        profile_path=profile.path,
        policy=policy,
    )
