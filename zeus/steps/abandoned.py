"""Trials nobody will finish: recorded as failed, so no job is left with a trial `dispatched` forever.

Two ways a dispatched trial loses its owner:

- the run that holds it is interrupted (SIGINT, SIGTERM): the local driver stops its steps and
  records the recurrence's unfinished trials as failed, "interrupted by SIGINT" (`fail_interrupted`);
- the process that holds it is killed outright (SIGKILL, a lost node or pod): nothing can record
  anything then, so the next bandit step of the job does it, for any trial dispatched longer ago
  than the run's `dispatch_timeout_s` (`fail_stale`). Zeus's BSO marks a trial that never
  reported failed when its client exits; a pipeline step has no such exit to hook, hence the timeout.

Either way the trial is finished through the store's ordinary `finish_trial` with a FAILED result
(no figures: none were reported), so the store format does not change, `show` lists it with its
reason, and the policies treat it as Zeus treats any failed trial: forgotten (zeus.policy.history).
A trial that does report after all finds its finished event taken: first wins, and it is refused
with the store's EventConflictError, which is why the timeout must exceed the longest real trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from zeus.errors import FieldError
from zeus.job import JobSpec, TrialResult, TrialStatus
from zeus.report.units import duration

# The default `dispatch_timeout_s`: a day. A recurring job's trial that runs longer than its own
# period (nightly at most, as a rule) would overlap the next recurrence anyway; raise it for longer ones.
DEFAULT_DISPATCH_TIMEOUT_S = 24 * 3600.0
DISPATCH_TIMEOUT_ALLOWED = "a number of seconds >= 0 (0: every unfinished trial of another attempt counts as lost)"
NO_FIGURES = "none (no result was reported)"


@dataclass(frozen=True)
class AbandonedTrial:
    """A trial recorded as failed here, for the one line a person sees."""

    trial: int
    recurrence: int
    attempt: int
    batch_size: int
    reason: str

    def __str__(self) -> str:
        return (
            f"trial {self.trial} (recurrence {self.recurrence}, attempt {self.attempt}, batch size {self.batch_size}) "
            f"recorded as failed: {self.reason}"
        )


def check_dispatch_timeout(value: object) -> float:
    """The timeout as a float, or FieldError naming the parameter."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok:
        raise FieldError("dispatch_timeout_s", value, DISPATCH_TIMEOUT_ALLOWED)
    return float(value)


def abandoned_result(spec: JobSpec, batch_size: int, reason: str) -> TrialResult:
    """A FAILED result without figures: the trial's energy and time were never reported."""
    return TrialResult.build(
        spec,
        batch_size=int(batch_size),
        status=TrialStatus.FAILED,
        time_s=0.0,
        energy_j=0.0,
        num_epochs=0,
        reason=reason,
        source=NO_FIGURES,
    )


def _fail(store, job_id: str, rows: pd.DataFrame, reasons: list[str]) -> list[AbandonedTrial]:
    """Finish each row's trial as failed; a trial whose real result got in first keeps it."""
    from zeus.store import EventConflictError

    if rows.empty:  # nothing to record: not even the spec is read
        return []
    spec = store.get_job(job_id)
    done = []
    for row, reason in zip(rows.itertuples(index=False), reasons, strict=True):
        try:
            store.finish_trial(
                job_id, row.recurrence_id, int(row.attempt), abandoned_result(spec, row.batch_size, reason)
            )
        except EventConflictError:
            continue  # it finished after all (first wins): nothing to record
        done.append(AbandonedTrial(int(row.trial), int(row.recurrence), int(row.attempt), int(row.batch_size), reason))
    return done


def _unfinished(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[trials["status"] == TrialStatus.DISPATCHED.value]


def fail_interrupted(store, job_id: str, recurrence_id: str, signal_name: str) -> list[AbandonedTrial]:
    """Record the recurrence's unfinished trials as failed, "interrupted by <signal>". Call it only once
    the steps that could still finish them have stopped (zeus.signals.stop_children)."""
    trials = store.trials(job_id)
    rows = _unfinished(trials[trials["recurrence_id"].astype(str) == str(recurrence_id)])
    return _fail(store, job_id, rows, [f"interrupted by {signal_name}"] * len(rows))


def fail_stale(
    store,
    job_id: str,
    *,
    timeout_s: float,
    now: datetime,
    current: tuple[str, int],
    trials: pd.DataFrame | None = None,
) -> list[AbandonedTrial]:
    """Record as failed every trial of the job dispatched at least `timeout_s` before `now` and never
    finished, except `current` = (recurrence_id, attempt), the trial the calling bandit step is deciding."""
    timeout_s = check_dispatch_timeout(timeout_s)
    trials = store.trials(job_id) if trials is None else trials
    rows = _unfinished(trials)
    mine = (rows["recurrence_id"].astype(str) == str(current[0])) & (rows["attempt"] == int(current[1]))
    rows = rows[~mine]
    if rows.empty:
        return []
    ages = (pd.Timestamp(now) - rows["started_at"]).dt.total_seconds()
    stale = rows[ages >= timeout_s]
    reasons = [
        f"no result {duration(float(age))} after it was dispatched (dispatch_timeout_s={timeout_s:g}): "
        "its process was killed or lost"
        for age in ages[ages >= timeout_s]
    ]
    return _fail(store, job_id, stale, reasons)
