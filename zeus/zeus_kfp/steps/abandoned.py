"""Trials nobody will finish: recorded as failed, so no job is left with a trial `dispatched` forever.

Two ways a dispatched trial loses its owner:

- the run that holds it is interrupted (SIGINT, SIGTERM): the local driver stops its steps and
  records the recurrence's unfinished trials as failed, "interrupted by SIGINT" (`fail_interrupted`);
  a pipeline step of a local run fails (the store refused a write, say): the same, with the step's
  error as the reason (`fail_unfinished`), so the next run does not take the trial for one in flight;
- the process that holds it is killed outright (SIGKILL, a lost node or pod): nothing can record
  anything then, so the next bandit step of the job does it, for any trial dispatched longer ago
  than the run's `dispatch_timeout_s`, a run setting (zeus_kfp.run_settings; `fail_stale`). Zeus's BSO
  marks a trial that never reported failed when its client exits; a pipeline step has no such exit to
  hook, hence the timeout.

Either way the trial is finished through the store's ordinary `finish_trial` with a FAILED result
(no figures: none were reported), so the store format does not change, `show` lists it with its
reason, and the policies treat it as Zeus treats any failed trial: forgotten (zeus_kfp.policy.history).
A trial that does report after all finds its finished event taken: first wins, and it is refused
with the store's EventConflictError, which is why the timeout must exceed the longest real trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from zeus_kfp.job import JobSpec, TrialResult, TrialStatus
from zeus_kfp.report.units import duration
from zeus_kfp.run_settings import check_dispatch_timeout
from zeus_kfp.store import EventConflictError
from zeus_kfp.trials import Trial, trials_of

NO_FIGURES = "none (no result was reported)"


def abandoned_line(trial: Trial) -> str:
    """A trial recorded as failed here, as the one line a person sees."""
    return (
        f"trial {trial.trial} (recurrence {trial.recurrence}, attempt {trial.attempt}, batch size {trial.batch_size}) "
        f"recorded as failed: {trial.reason}"
    )


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


def _fail(store, job_id: str, trials: Sequence[Trial], reasons: list[str]) -> list[Trial]:
    """Finish each trial as failed; a trial whose real result got in first keeps it."""
    if not trials:  # nothing to record: not even the spec is read
        return []
    spec = store.get_job(job_id)
    done = []
    for trial, reason in zip(trials, reasons, strict=True):
        try:
            store.finish_trial(
                job_id, trial.recurrence_id, trial.attempt, abandoned_result(spec, trial.batch_size, reason)
            )
        except EventConflictError:
            continue  # it finished after all (first wins): nothing to record
        done.append(replace(trial, status=TrialStatus.FAILED, reason=reason, source=NO_FIGURES))
    return done


def fail_unfinished(store, job_id: str, recurrence_id: str, reason: str) -> list[Trial]:
    """Record the recurrence's unfinished trials as failed with `reason`, and the recurrence as ended (it holds
    no slot of the job's cap any more, zeus_kfp.store.gating, even if it failed before any trial). Call it only
    once the steps that could still finish them have stopped (an interrupted run, a failed pipeline step)."""
    mine = [t for t in store.read_trials(job_id).unfinished if t.recurrence_id == str(recurrence_id)]
    failed = _fail(store, job_id, mine, [reason] * len(mine))
    outcome = store.gate_outcome(job_id, str(recurrence_id))
    if outcome is not None and outcome.opened:
        store.end_recurrence(job_id, str(recurrence_id), reason)
    return failed


def fail_interrupted(store, job_id: str, recurrence_id: str, signal_name: str) -> list[Trial]:
    """Record the recurrence's unfinished trials as failed, "interrupted by <signal>" (zeus_kfp.signals.stop_children
    first). Returns every trial of the recurrence the interruption ended: those recorded here, without figures,
    and those the stopped train step recorded itself with what it measured (zeus_kfp.steps.train)."""
    reason = f"interrupted by {signal_name}"
    fail_unfinished(store, job_id, recurrence_id, reason)
    ended = trials_of(store.trials(job_id))
    return [t for t in ended if t.recurrence_id == str(recurrence_id) and str(t.reason).startswith(reason)]


def fail_stale(
    store,
    job_id: str,
    *,
    timeout_s: float,
    now: datetime,
    current: tuple[str, int],
    unfinished: Sequence[Trial],
) -> list[Trial]:
    """Record as failed every trial of `unfinished` (the job's dispatched trials with no result, as
    `Store.read_trials` gives them) dispatched at least `timeout_s` before `now`, except `current` =
    (recurrence_id, attempt), the trial the calling bandit step is deciding. `now` is tz-aware, as the
    store's `started_at` is."""
    timeout_s = check_dispatch_timeout(timeout_s)
    stale, reasons = [], []
    for trial in unfinished:
        if (trial.recurrence_id, trial.attempt) == (str(current[0]), int(current[1])):
            continue
        age = (now - trial.started_at).total_seconds()
        if age >= timeout_s:
            stale.append(trial)
            reasons.append(
                f"no result {duration(age)} after it was dispatched (dispatch_timeout_s={timeout_s:g}): "
                "its process was killed or lost"
            )
    return _fail(store, job_id, stale, reasons)
