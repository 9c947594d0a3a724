"""The recurrence gate, the first step of every run: does this run open a recurrence of the job, or end at once?

It takes the job's spec (what the job is, checked against the stored one) and the run's settings beside it
(zeus_kfp.run_settings.RunSettings: how this run runs, never stored with the job). It opens one when the period
has passed since the last recurrence began or the drift detector finds drift (zeus_kfp.steps.drift_detectors),
and the job has a free slot (fewer than max_running recurrences running). The decision is not taken here but
by the log (zeus_kfp.store.gating): the gate appends its request, with the drift statistic it measured, as the
recurrence's `begin` entry, and its outcome is a rule of the log before that entry's slot. So however many
schedules and manual submissions start runs of one job at once, every one of them, and every later reader,
agrees which opened a recurrence, and the cap holds.

A skipped run trains nothing: the pipeline's steps after the gate sit in a condition on its `opened` output
(pipelines/dag.py), and the store records why ("not due", "no drift", "no free slot"), which `show` lists.
`force` (`zeus-kfp run --force`, `submit --force`) opens a recurrence that is not due; it still takes a slot,
so no run exceeds the cap.
"""

from __future__ import annotations

from zeus_kfp.job import JobSpec
from zeus_kfp.run_settings import NO_DRIFT, RunSettings
from zeus_kfp.steps import drift_detectors as drift
from zeus_kfp.steps.params import open_step_store, run_settings_from_params, spec_from_params
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.step_lines import GATE
from zeus_kfp.store import GateOutcome, GateRequest, Store


def outcome_line(outcome: GateOutcome) -> str:
    """The gate's outcome as one line: what the step prints and `zeus-kfp run` says of a skipped run."""
    stat = "" if outcome.drift_stat is None else f", {outcome.drift_detector} {outcome.drift_stat:.4g}"
    if not outcome.opened:
        return f"skipped: {outcome.why}{stat}"
    return f"opened recurrence {outcome.recurrence} ({outcome.why}{stat})"


def last_recurrence_id(store: Store, job_id: str) -> str | None:
    """The id of the job's latest opened recurrence (None: none yet), whose data the detector compares with."""
    frame = store.recurrences(job_id)
    opened = frame[frame["opened"]]
    return None if opened.empty else str(opened["recurrence_id"].iloc[-1])


def open_gate(spec: JobSpec, run: RunSettings, *, store: Store, recurrence_id: str, force: bool = False) -> GateOutcome:
    """Ask the store to open recurrence `recurrence_id` of the (registered) job under `run`'s settings: measure
    drift against the last recurrence's data, store this data's summary, append the request; the log's answer.
    A retried gate of the same run is told the first one's outcome and measures nothing."""
    found = store.gate_outcome(spec.job_id, recurrence_id)
    if found is not None:
        return found
    last = last_recurrence_id(store, spec.job_id)
    previous = None if last is None else store.get_drift_summary(spec.job_id, last)
    stat, summary = drift.measure(run, previous)
    if summary:
        store.put_drift_summary(spec.job_id, recurrence_id, summary)
    request = GateRequest(
        period_s=run.period_s,
        max_running=run.max_running,
        max_attempts=spec.max_attempts,
        timeout_s=run.dispatch_timeout_s,
        forced=bool(force),
        drift_detector=run.drift_detector,
        drift_stat=stat,
        drift_threshold=run.gate_threshold if run.drift_detector != NO_DRIFT else None,
    )
    return store.open_recurrence(spec.job_id, recurrence_id, request)


@reported("gate")
def gate(
    params: dict,
    run_params: dict,
    *,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    owner: str,
    force: bool,
) -> bool:
    """The gate step: the job's settings and the run's (pipeline parameters) in, whether it opened a recurrence
    out (the store records why). Registers the job (or checks its spec: a bad or changed field, or a bad run
    setting, fails the run here, before anything is asked) and asks to open the recurrence."""
    spec = spec_from_params(**params)
    run = run_settings_from_params(**run_params)
    store = open_step_store(store_uri)
    spec = store.ensure_job(spec, owner=owner)
    outcome = open_gate(spec, run, store=store, recurrence_id=recurrence_id or run_id, force=force)
    print(GATE.say(outcome_line(outcome)))
    return outcome.opened
