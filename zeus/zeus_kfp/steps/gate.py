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

The begin also carries the spec the run presents, and how its script reports (zeus_kfp.store.gating). A changed
spec takes the job's place while none of its trials has reached the target and no recurrence runs ("spec
replaced": the step says so in one line); otherwise the step fails with one line naming what helps. How the
script reports is the job's until a run says otherwise: a run that changes it says so too.
"""

from __future__ import annotations

from typing import Any

from zeus_kfp.job import JobSpec
from zeus_kfp.run_settings import NO_DRIFT, RunSettings
from zeus_kfp.steps import drift_detectors as drift
from zeus_kfp.steps.params import open_step_store, run_settings_from_params, spec_from_params
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.step_lines import GATE
from zeus_kfp.store import GateOutcome, GateRequest, JobSpecMismatchError, Store
from zeus_kfp.store.errors import changes_text
from zeus_kfp.store.gating import SPEC_IN_USE, SPEC_REPLACED, SPEC_SETTLED, spec_text
from zeus_kfp.store.specs import READS


def replaced_line(job_id: str, changes: dict[str, tuple[Any, Any]]) -> str:
    """What a run that took a changed spec says, in one line (the gate step, `zeus-kfp run`)."""
    return (
        f"job {job_id}'s spec was replaced ({changes_text(changes)}): no result is lost, none of its trials had "
        "reached the target; the trials under the old spec are left out of its history (`zeus-kfp show` lists them)"
    )


def describe_reads(metric_name: str, reads: dict[str, Any]) -> str:
    """How a job's script reports, for people: where its metric comes from and which files a trial keeps."""
    if reads.get("zeus_aware"):
        source = f"{metric_name} as the script reports it to ZeusDataLoader (Zeus-aware)"
    elif reads.get("metrics_collector"):
        from zeus_kfp.train.collectors import CollectorSpec  # deferred: pandas

        collector = CollectorSpec.from_params(reads["metrics_collector"], reads.get("metric_pattern", ""))
        source = f"{metric_name} through the {collector.describe()}"
    elif reads.get("metric_pattern"):
        source = f"{metric_name} from the script's output with --metric-pattern {reads['metric_pattern']!r}"
    else:
        source = f"{metric_name} from the script's output as Katib's name=value lines"
    keeps = f"--keep {reads['keep']!r}" if reads.get("keep") else "{log_dir}/model.pt"
    return f"reads {source}; keeps {keeps} as the model"


def reads_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What a run changes of how the job's script reports ({} for a new job, or none)."""
    if before is None:
        return {}
    return {n: (before.get(n), now.get(n)) for n in READS if (before.get(n) or "") != (now.get(n) or "")}


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


def open_gate(
    spec: JobSpec,
    run: RunSettings,
    *,
    store: Store,
    recurrence_id: str,
    force: bool = False,
    reads: dict[str, Any] | None = None,
) -> GateOutcome:
    """Ask the store to open recurrence `recurrence_id` of the (registered) job under `run`'s settings, presenting
    `spec` (which may replace the job's: zeus_kfp.store.gating) and how the script reports (`reads`: READS, None:
    unsaid): measure drift against the last recurrence's data, store this data's summary, append the request; the
    log's answer. A retried gate of the same run is told the first one's outcome and measures nothing."""
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
        spec=spec_text(spec.to_dict()),
        **(reads or {}),
    )
    return store.open_recurrence(spec.job_id, recurrence_id, request)


def refused(store: Store, spec: JobSpec, outcome: GateOutcome) -> JobSpecMismatchError | None:
    """The error of a begin the log refused a changed spec to (a run that raced another), else None."""
    if outcome.why not in (SPEC_SETTLED, SPEC_IN_USE):
        return None
    changes = store.get_job(spec.job_id).diff(spec)
    if outcome.why == SPEC_SETTLED:
        return JobSpecMismatchError(spec.job_id, changes, settled_by=store.reached_trial(spec.job_id))
    runs = store.recurrences(spec.job_id)  # in slot order: the latest opened before this begin runs
    before = runs.iloc[: int(runs.index[runs["recurrence_id"] == outcome.recurrence_id][0])]
    return JobSpecMismatchError(spec.job_id, changes, running=int(before.loc[before["opened"], "recurrence"].iloc[-1]))


def took_line(store: Store, job_id: str, outcome: GateOutcome) -> str:
    """The replaced line of a recurrence that took a changed spec ("" for any other), from the store's record."""
    if outcome.why != SPEC_REPLACED:
        return ""
    history = store.spec_history(job_id)
    at = next(i for i, (number, _) in enumerate(history) if number == outcome.recurrence)
    return replaced_line(job_id, history[at - 1][1].diff(history[at][1]))


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
    reads: dict[str, Any] | None = None,
) -> bool:
    """The gate step: the job's settings and the run's (pipeline parameters) in, whether it opened a recurrence
    out (the store records why). Registers the job (or checks its spec: a bad field, a changed spec the job has
    settled, or a bad run setting fails the run here, before anything is asked) and asks to open the recurrence,
    presenting its spec and how its script reports (`reads`)."""
    spec = spec_from_params(**params)
    run = run_settings_from_params(**run_params)
    store = open_step_store(store_uri)
    store.spec_change(spec, owner=owner)  # registers a new job; a change of a settled spec is refused here
    before = store.reads(spec.job_id)
    outcome = open_gate(spec, run, store=store, recurrence_id=recurrence_id or run_id, force=force, reads=reads)
    error = refused(store, spec, outcome)
    if error is not None:
        raise error
    print(GATE.say(outcome_line(outcome)))
    took = took_line(store, spec.job_id, outcome)
    if took:
        print(GATE.say(took))
    changed = reads_changes(before, reads or {}) if outcome.opened else {}
    if changed:
        now = describe_reads(spec.metric_name, reads or {})
        print(GATE.say(f"job {spec.job_id} now {now} ({changes_text(changed)})"))
    return outcome.opened
