"""The recurrence gate through kfp.local: the real components (the gate first, the rest in its condition), the
real store, trials replayed from the squad/v100 trace. Each outcome: due by time, due by drift, not due (and no
drift), no free slot; a forced run. A skipped run trains nothing: no step after the gate runs, no trial exists.

Periods are either far longer than any test (1e9 s: never due by time) or far shorter than one recurrence
(1 microsecond: the second run begins seconds after the first), so no outcome depends on how fast this runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.pipelines.local import run_local
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import spec_to_params
from zeus_kfp.steps.drift_detectors import DataSummary
from zeus_kfp.store import GateRequest, keys, open_store

TRACE = "trace:squad/v100"
NEVER_DUE, ALWAYS_DUE = 1e9, 1e-6


def spec(job_id: str):
    return TraceBackend.parse(TRACE).spec(job_id, max_attempts=2)


def run(job, store, tmp_path, recurrences=1, **options):
    return run_local(job, recurrences=recurrences, store=store, trial_backend=TRACE, runs_dir=tmp_path, **options)


def ran_steps(tmp_path, job_id: str, recurrence_id: str) -> set[str]:
    """The tasks kfp.local ran for one run: each leaves a directory of its outputs in the pipeline run's."""
    return {p.name for p in (tmp_path / job_id / recurrence_id).glob("zeus-recurrence-*/*") if p.is_dir()}


@pytest.mark.slow
def test_due_by_time_then_not_due(tmp_path):
    store = str(tmp_path / "store")
    due = run(spec("gate-time"), store, tmp_path, recurrences=2, run_settings=RunSettings(period_s=ALWAYS_DUE))
    assert [s.skipped for s in due] == ["", ""] and [s.recurrence for s in due] == [1, 2]
    runs = open_store(store).recurrences("gate-time")
    assert runs["why"].tolist() == ["first", "time"] and runs["opened"].all()

    never = RunSettings(period_s=NEVER_DUE)
    later = run(spec("gate-wait"), store, tmp_path, recurrences=2, run_settings=never)
    assert later[0].trials and not later[0].skipped  # the first recurrence of a job is always due
    assert later[1].skipped == "skipped: not due" and later[1].trials == ()
    opened = open_store(store)
    runs = opened.recurrences("gate-wait")
    assert runs["why"].tolist() == ["first", "not due"] and runs["recurrence"].tolist()[0] == 1
    assert pd.isna(runs["recurrence"].iloc[1])
    skipped = runs["recurrence_id"].iloc[1]
    assert set(opened.trials("gate-wait")["recurrence_id"]) == {runs["recurrence_id"].iloc[0]}  # trained nothing
    assert ran_steps(tmp_path, "gate-wait", skipped) == {"gate"}  # the run ended at the gate
    assert {"gate", "preprocess", "attempt-1-train"} <= ran_steps(tmp_path, "gate-wait", runs["recurrence_id"].iloc[0])

    forced = run(spec("gate-wait"), store, tmp_path, run_settings=never, force=True)  # run --force
    assert forced[0].trials and open_store(store).recurrences("gate-wait")["why"].tolist()[-1] == "forced"


def shifted(tmp_path, shift: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pd.DataFrame({"x": rng.normal(shift, 1.0, 2000), "y": rng.normal(0.0, 1.0, 2000)}).to_parquet(
        tmp_path / "in.parquet"
    )


@pytest.mark.slow
def test_due_by_drift_and_no_drift(tmp_path):
    store, data = str(tmp_path / "store"), tmp_path / "in.parquet"
    job, how = spec("gate-drift"), RunSettings(period_s=NEVER_DUE, drift_detector="ks", drift_data=str(data))
    shifted(tmp_path, 0.0, seed=1)
    first = run(job, store, tmp_path, run_settings=how)
    assert first[0].trials
    first_data = pd.read_parquet(data)
    shifted(tmp_path, 0.0, seed=2)  # the same distribution, new draws: no drift at the default threshold 0.1
    same = run(job, store, tmp_path, run_settings=how)
    second_data = pd.read_parquet(data)
    shifted(tmp_path, 1.0, seed=3)  # x moved by one standard deviation
    moved = run(job, store, tmp_path, run_settings=how)
    assert same[0].skipped.startswith("skipped: no drift") and same[0].trials == ()
    assert moved[0].trials and not moved[0].skipped

    opened = open_store(store)
    runs = opened.recurrences("gate-drift")
    assert runs["why"].tolist() == ["first", "no drift", "drift"]
    # the statistic stored with each run: scipy's KS of its data against the last *opened* recurrence's data
    from scipy.stats import ks_2samp

    third_data = pd.read_parquet(data)
    no_drift = max(ks_2samp(first_data[c], second_data[c]).statistic for c in "xy")
    drift = max(ks_2samp(first_data[c], third_data[c]).statistic for c in "xy")
    assert runs["drift_stat"].tolist()[1:] == pytest.approx([no_drift, drift], abs=1e-12)
    assert pd.isna(runs["drift_stat"].iloc[0]) and runs["drift_threshold"].tolist()[1:] == [0.1, 0.1]
    assert opened.drift_recurrences("gate-drift") == [2]  # the contract with the policies: numbers, ascending
    # what is kept to compare with is a summary of each run's data, not the data
    summary = DataSummary.from_parquet(opened.get_drift_summary("gate-drift", runs["recurrence_id"].iloc[2]))
    assert summary.rows == 2000 and set(summary.samples) == {"x", "y"}
    assert keys.drift_key("gate-drift", runs["recurrence_id"].iloc[2]) in opened.backend.list(
        keys.job_dir("gate-drift")
    )


@pytest.mark.slow
def test_no_free_slot_until_the_running_recurrence_ends(tmp_path):
    """Another schedule's recurrence is running (its gate opened it, its trial is out): a run finds no free slot,
    forced or not, and trains nothing; once that trial reaches the target, the next run opens one."""
    store = str(tmp_path / "store")
    job, how = spec("gate-cap"), RunSettings(period_s=ALWAYS_DUE, max_running=1)
    opened = open_store(store)
    opened.ensure_job(job)
    request = GateRequest(how.period_s, how.max_running, job.max_attempts, timeout_s=86400.0)
    assert opened.open_recurrence(job.job_id, "other-schedule", request).opened
    opened.dispatch_trial(job.job_id, "other-schedule", 1, Decision(job.default_batch_size, None, "exploration", "x"))
    blocked = run(job, store, tmp_path, run_settings=how) + run(job, store, tmp_path, run_settings=how, force=True)
    assert [s.skipped for s in blocked] == ["skipped: no free slot"] * 2 and all(s.trials == () for s in blocked)
    done = TrialResult.build(job, batch_size=job.default_batch_size, status="reached", time_s=1.0, energy_j=1.0,
                             num_epochs=1)  # fmt: skip
    open_store(store).finish_trial(job.job_id, "other-schedule", 1, done)
    freed = run(job, store, tmp_path, run_settings=how)
    assert freed[0].trials and freed[0].recurrence == 2
    runs = open_store(store).recurrences(job.job_id)
    assert runs["why"].tolist() == ["first", "no free slot", "no free slot", "time"]
    assert spec_to_params(how)["max_running"] == 1  # the cap travelled as the pipeline's parameter
