"""What a job is and how a run runs, apart: the JobSpec is the job's identity, compared whole with the stored one;
the run settings (zeus_kfp.run_settings: the recurrence gate's period, cap and drift detector, the dispatch
timeout) travel beside it, so one job's schedules and submissions may each run under their own."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from zeus_kfp.job import JobSpec, JobSpecError
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.steps import run_settings_from_params, spec_to_params
from zeus_kfp.steps.gate import gate
from zeus_kfp.store import JobSpecMismatchError, open_store

SPEC = JobSpec(job_id="settings", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.5, max_epochs=3)
RUN_FIELDS = ("period_s", "max_running", "drift_detector", "drift_threshold", "drift_data", "dispatch_timeout_s")


def test_the_job_spec_holds_no_run_setting_and_a_spec_that_gives_one_is_told_where_it_goes() -> None:
    assert {f.name for f in fields(JobSpec)} & set(RUN_FIELDS) == set()
    assert tuple(f.name for f in fields(RunSettings)) == RUN_FIELDS
    told = r"invalid period_s=3600: allowed no JobSpec field: a run setting.*--period-s"
    with pytest.raises(JobSpecError, match=told):
        JobSpec.from_dict(SPEC.to_dict() | {"period_s": 3600})


def opens(uri: str, spec: JobSpec, run: RunSettings, rid: str) -> bool:
    """One run's gate step, as the gate component calls it: the job's settings and the run's, as parameters."""
    return gate(spec_to_params(spec), spec_to_params(run), store_uri=uri, run_id=rid, recurrence_id="", owner="",
                force=False)  # fmt: skip


def test_each_run_runs_under_its_own_settings_while_the_job_stays_one(tmp_path) -> None:
    """Two schedules of one job with another period and cap are the same job, each gated by its own settings;
    a run that changes what the job is (max_epochs) is refused, naming the field."""
    uri = str(tmp_path / "store")
    assert opens(uri, SPEC, RunSettings(period_s=0.0, max_running=1), "nightly-1")
    assert not opens(uri, SPEC, RunSettings(period_s=1e9, max_running=5), "weekly-1")  # not due by its period
    assert not opens(uri, SPEC, RunSettings(period_s=0.0, max_running=1), "nightly-2")  # its cap is taken
    assert opens(uri, SPEC, RunSettings(period_s=0.0, max_running=0), "manual-1")  # no cap
    store = open_store(uri)
    assert store.recurrences(SPEC.job_id)["why"].tolist()[1:3] == ["not due", "no free slot"]
    assert store.get_job(SPEC.job_id) == SPEC
    with pytest.raises(JobSpecMismatchError, match=r"max_epochs: 3 -> 30"):
        opens(uri, SPEC.with_changes(max_epochs=30), RunSettings(), "changed-1")


@pytest.mark.parametrize(
    ("changes", "field", "allowed"),
    [
        ({"period_s": -1.0}, "period_s", "a number of seconds >= 0 (0: every run is due)"),
        ({"max_running": -2}, "max_running", "an integer from 0 to 9223372036854775807 (0: no cap)"),
        ({"max_running": 2**63}, "max_running", "an integer from 0 to 9223372036854775807 (0: no cap)"),
        ({"drift_detector": "kl"}, "drift_detector", "one of none, fingerprint, rows, psi, ks, or a function"),
        ({"drift_threshold": float("nan")}, "drift_threshold", "a number >= 0 (0: the detector's default)"),
        ({"drift_detector": "psi"}, "drift_data", "a Parquet or CSV file or directory for the 'psi' detector"),
        ({"dispatch_timeout_s": -1}, "dispatch_timeout_s", "a number of seconds >= 0 (0: every unfinished trial"),
    ],
)
def test_a_bad_run_setting_is_refused_naming_the_field_and_what_is_allowed(changes, field, allowed) -> None:
    with pytest.raises(JobSpecError, match=rf"invalid {field}=.*: allowed {re.escape(allowed)}") as info:
        RunSettings(**changes)
    assert info.value.field == field
    with pytest.raises(JobSpecError, match=rf"invalid {field}="):  # as the gate step builds them from its parameters
        run_settings_from_params(**spec_to_params(RunSettings()) | changes)


def test_run_settings_travel_as_pipeline_parameters_and_come_back_the_same() -> None:
    run = RunSettings(period_s=60, max_running=2, drift_detector="ks", drift_data="/data", dispatch_timeout_s=0)
    params = spec_to_params(run) | {"max_running": 2.0}  # protobuf may hand an integer back as a double
    assert run_settings_from_params(**params) == run
    assert (run.period_s, run.gate_threshold, RunSettings().dispatch_timeout_s) == (60.0, 0.1, 86400.0)
