"""The bandit step: the batch size of an attempt, what the KFP component of the same name calls.

State lives in the store only: bandit reads the job's history and the policy decides from all of it, as
optuna samplers do (well under 0.1 s at 10,000 trials, against a step's start-up of about a second), then
records the trial as dispatched under a key unique to (recurrence, attempt), so a retried step hands out the
decision already recorded. Nothing derived from the history is stored: the arm states people see are computed
where they are shown (zeus_kfp.report.arms).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from zeus_kfp.policy import get_policy
from zeus_kfp.policy.base import Decision
from zeus_kfp.policy.drift import decide_after_drift
from zeus_kfp.power.reuse import ProfileBook
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.run_settings import DEFAULT_DISPATCH_TIMEOUT_S, check_dispatch_timeout
from zeus_kfp.seeds import decision_seed, trial_seed
from zeus_kfp.steps.abandoned import abandoned_line, fail_stale
from zeus_kfp.steps.params import open_step_store, threshold_to_param
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.step_lines import LOST_TRIAL
from zeus_kfp.trials import Trial


@dataclass(frozen=True)
class Choice:
    """What the bandit step decided: the policy's decision as dispatched (batch size, early-stop threshold,
    stage, reason), the trial's number, the seed of the trial's own randomness (zeus_kfp.seeds), the stored
    profile the trial reuses (None: profile), and the lost trials this step recorded as failed before
    deciding (zeus_kfp.steps.abandoned)."""

    decision: Decision
    trial: int
    trial_seed: int
    reuse: PowerProfile | None
    abandoned: tuple[Trial, ...] = ()

    @property
    def batch_size(self) -> int:
        return int(self.decision.batch_size)

    @property
    def abandoned_lines(self) -> list[str]:
        """The lines the bandit step prints for the lost trials it recorded failed (`zeus-kfp run` shows them)."""
        return [LOST_TRIAL.say(abandoned_line(trial)) for trial in self.abandoned]

    @property
    def cost_threshold_param(self) -> float:
        """The threshold as the component's float output: NO_THRESHOLD (-1.0) for "no early stop"."""
        return threshold_to_param(self.decision.cost_threshold)


@reported("bandit", attempt=lambda **kwargs: kwargs["attempt"])
def bandit(
    *,
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    policy: str,
    kfp_run_id: str = "",
    reprofile: bool = False,
    reuse_profile_path: str = "",
    dispatch_timeout_s: float = DEFAULT_DISPATCH_TIMEOUT_S,
    now: datetime | None = None,
) -> Choice:
    """Ask the policy for this attempt's batch size given the job's history; record it as dispatched.

    First, a trial of the job dispatched at least `dispatch_timeout_s` ago (at `now`, default the
    clock) and never finished is recorded as failed: its process was killed or lost, and the policy
    then forgets it as it forgets any failed trial (zeus_kfp.steps.abandoned).

    Also decides whether the trial reuses a stored power profile (zeus_kfp.power.reuse) and, when
    `reuse_profile_path` is given, writes that profile there as Parquet (an empty table: profile), so
    the train step, which never touches the store, can train at the stored optimum from its first step.
    """
    timeout_s = check_dispatch_timeout(dispatch_timeout_s)
    store = open_step_store(store_uri)
    spec = store.get_job(job_id)
    recurrence = store.recurrence_number(job_id, recurrence_id)
    existing = store.get_dispatch(job_id, recurrence_id, attempt)
    abandoned: list[Trial] = []
    if existing is not None:  # a retried bandit step: hand out the decision already recorded
        trial, decision = existing
    else:
        when = now or datetime.now(UTC)
        trials = store.read_trials(job_id)
        abandoned = fail_stale(
            store, job_id, timeout_s=timeout_s, now=when, current=(recurrence_id, attempt), unfinished=trials.unfinished
        )
        if abandoned:  # the policy must see them failed (it forgets them), not in flight
            trials = store.read_trials(job_id)
        seed = decision_seed(spec.seed, recurrence, attempt)
        mine = decide_after_drift(
            get_policy(policy), spec, trials.history, seed, drifts=trials.drifts, recurrence=recurrence
        )
        # A twin step of this attempt may have recorded its dispatch first: the store then returns the
        # twin's decision, and that is the one handed out (train must run what the store says).
        trial, decision = store.dispatch_trial(job_id, recurrence_id, attempt, mine, kfp_run_id=kfp_run_id)
    book = ProfileBook.from_frame(store.profiles(job_id))
    reuse = book.to_reuse(decision.batch_size, recurrence, reprofile_after=spec.reprofile_after, force=reprofile)
    if reuse_profile_path:
        (reuse if reuse is not None else PowerProfile.empty()).to_parquet(reuse_profile_path)
    return Choice(
        decision=decision,
        trial=int(trial),
        trial_seed=trial_seed(spec.seed, recurrence, attempt),
        reuse=reuse,
        abandoned=tuple(abandoned),
    )
