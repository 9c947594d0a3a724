"""The feedback step: records an attempt's finished trial, what the KFP component of the same name calls.

It writes the trial and its power profile, each under a key unique to (recurrence, attempt), so a retried step
rewrites the same objects, and says whether the recurrence ends there.
"""

from __future__ import annotations

from pathlib import Path

from zeus_kfp.job import TrialResult, TrialStatus
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.steps.params import open_step_store
from zeus_kfp.steps.step_events import reported


def ends_recurrence(result: TrialResult) -> bool:
    """Whether no further attempt of the recurrence runs after `result`: it reached the target, or it failed.
    A failed trial is the script's own failure (a crash, no metric, bad inputs, a timeout, an interruption),
    which another batch size would only repeat, so the recurrence ends and the user is told; a miss
    (not_reached, cost_exceeded) or an oom is the batch size's, and the next attempt tries another."""
    return result.reached or result.status is TrialStatus.FAILED


@reported("feedback", attempt=lambda **kwargs: kwargs["attempt"])
def feedback(
    *, store_uri: str, job_id: str, recurrence_id: str, attempt: int, result_json: str, profile_path: str
) -> bool:
    """Record the finished trial and the profile it measured (none when it reused one); return whether the
    recurrence ends with it (`ends_recurrence`). Nothing else: the arm states people see are computed from the
    history where they are shown."""
    result = TrialResult.from_json(result_json)
    store = open_step_store(store_uri)
    store.finish_trial(job_id, recurrence_id, attempt, result)
    profile = PowerProfile.read_parquet(profile_path) if Path(profile_path).is_file() else PowerProfile.empty()
    if not profile.is_empty:
        store.write_profile(job_id, recurrence_id, attempt, profile)
    return ends_recurrence(result)
