"""The job model: every validation error names its field, dicts round-trip, cost is Zeus's formula."""

from __future__ import annotations

import math

import pytest

from zeus_kfp.cost import zeus_cost
from zeus_kfp.job import JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus_kfp.trials import Trial

BASE = {
    "job_id": "resnet-nightly",
    "batch_sizes": [8, 16, 32, 64, 128, 256],
    "default_batch_size": 128,
    "target_metric": 0.6,
    "max_epochs": 10,
}


def spec(**changes) -> JobSpec:
    return JobSpec.from_dict({**BASE, **changes})


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("job_id", "Bad_ID", "lowercase"),
        ("job_id", "", "1-63"),
        ("job_id", "a" * 64, "1-63"),
        ("job_id", "-leading", "starting and ending"),
        ("job_id", 7, "lowercase"),
        ("batch_sizes", [], "non-empty"),
        ("batch_sizes", [8, -16], "positive integers"),
        ("batch_sizes", [8, 16.0], "positive integers"),
        ("batch_sizes", [8, 8, 16], "distinct"),
        ("batch_sizes", "8,16", "non-empty list"),
        ("default_batch_size", 100, "one of batch_sizes"),
        ("target_metric", math.nan, "finite"),
        ("target_metric", math.inf, "finite"),
        ("target_metric", "high", "finite"),
        ("higher_is_better", "yes", "true or false"),
        ("metric_name", "val acc", "letters"),
        ("max_epochs", 0, "positive integer"),
        ("max_epochs", 2.5, "positive integer"),
        ("max_attempts", -1, "positive integer"),
        ("num_gpus", 0, "positive integer"),
        ("num_pruning_rounds", -1, ">= 0"),
        ("window_size", -3, ">= 0"),
        ("seed", 1.5, "an integer"),
        ("eta_knob", 1.5, "[0, 1]"),
        ("eta_knob", -0.1, "[0, 1]"),
        ("beta_knob", 1.0, "> 1"),
        ("beta_knob", 0.5, "> 1"),
        ("beta_knob", math.inf, "> 1"),
        ("max_power_w", 0, "positive number"),
        ("max_power_w", math.nan, "positive number"),
    ],
)
def test_every_bad_field_raises_an_error_naming_field_value_and_allowed(field, value, allowed):
    with pytest.raises(JobSpecError) as err:
        spec(**{field: value})
    assert err.value.field == field
    message = str(err.value)
    assert field in message
    # from_dict hands lists over as tuples; the error carries the value as given to the constructor.
    assert err.value.value == (tuple(value) if isinstance(value, list) else value) or math.isnan(value)
    assert repr(err.value.value) in message
    assert allowed in message


def test_job_spec_error_is_a_value_error():
    with pytest.raises(ValueError, match="eta_knob"):
        spec(eta_knob=2)


def test_valid_edge_values_are_accepted():
    s = spec(eta_knob=0, beta_knob=None, window_size=0, num_pruning_rounds=0, job_id="a")
    assert s.eta_knob == 0.0 and s.beta_knob is None and s.job_id == "a"
    assert spec(job_id="a" * 63).job_id == "a" * 63


def test_batch_sizes_are_sorted_and_numbers_normalized():
    s = spec(batch_sizes=[64, 8, 32], default_batch_size=32, eta_knob=1, beta_knob=3, max_power_w=250)
    assert s.batch_sizes == (8, 32, 64)
    assert isinstance(s.eta_knob, float) and isinstance(s.beta_knob, float) and isinstance(s.max_power_w, float)


def test_dict_round_trip_keeps_every_field():
    s = spec(beta_knob=None, window_size=5, seed=42, num_gpus=4, higher_is_better=False, metric_name="wer")
    data = s.to_dict()
    assert data["batch_sizes"] == [8, 16, 32, 64, 128, 256]
    assert JobSpec.from_dict(data) == s


def test_from_dict_rejects_unknown_keys_and_missing_required():
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict({**BASE, "batchsize": 3})
    assert err.value.field == "batchsize"
    missing = dict(BASE)
    del missing["max_epochs"]
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict(missing)
    assert err.value.field == "max_epochs"


def test_diff_lists_changed_fields_only():
    a = spec()
    b = a.with_changes(eta_knob=0.8, max_epochs=20)
    assert a.diff(b) == {"eta_knob": (0.5, 0.8), "max_epochs": (10, 20)}
    assert a.diff(a) == {}


def test_reached_respects_direction():
    assert spec().reached(0.6) and not spec().reached(0.59)
    lower = spec(higher_is_better=False, target_metric=0.2)
    assert lower.reached(0.1) and not lower.reached(0.3)


def test_cost_is_eta_energy_plus_time_priced_at_max_power_of_all_gpus():
    s = spec(eta_knob=0.25, max_power_w=300, num_gpus=2)
    # 0.25 * 1000 J + 0.75 * 300 W * 2 GPUs * 10 s
    assert s.cost_model.cost(1000.0, 10.0) == pytest.approx(250.0 + 4500.0)
    assert zeus_cost(1000.0, 10.0, eta=1.0, max_power_w=300, num_gpus=2) == 1000.0
    assert zeus_cost(1000.0, 10.0, eta=0.0, max_power_w=300, num_gpus=2) == 6000.0


def test_trial_result_build_computes_cost_and_round_trips():
    s = spec(eta_knob=0.5, max_power_w=200)
    r = TrialResult.build(s, batch_size=32, status="reached", time_s=100, energy_j=15000, num_epochs=3, metric=0.61)
    assert r.cost == pytest.approx(0.5 * 15000 + 0.5 * 200 * 100)
    assert r.status is TrialStatus.REACHED and r.reached
    data = r.to_dict()
    assert data["status"] == "reached" and data["reached"] is True
    assert TrialResult.from_dict(data) == r


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"status": "dispatched"}, "status"),
        ({"time_s": -1}, "time_s"),
        ({"energy_j": -5}, "energy_j"),
        ({"num_epochs": 1.5}, "num_epochs"),
    ],
)
def test_trial_result_build_rejects_bad_values(changes, field):
    args = {"batch_size": 32, "status": "oom", "time_s": 1.0, "energy_j": 2.0, "num_epochs": 0, **changes}
    with pytest.raises(JobSpecError) as err:
        TrialResult.build(spec(), **args)
    assert err.value.field == field


def test_unknown_status_is_rejected():
    with pytest.raises(ValueError, match="exploded"):
        TrialResult.build(spec(), batch_size=8, status="exploded", time_s=1, energy_j=1, num_epochs=1)


def test_trial_record_finished_tracks_dispatch():
    assert not Trial(0, 0, 32, TrialStatus.DISPATCHED).finished
    assert Trial(0, 0, 32, TrialStatus.FAILED, 1.0).finished
