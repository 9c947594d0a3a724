"""Results and profiles are checked where they enter: a bad field is refused with a one-line error naming
it, and what the real code paths make (TrialResult.build, the JIT profiler, the trace simulator) passes."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from zeus_kfp.job import JobSpec, JobSpecError, TrialResult, TrialStatus, check_result_for
from zeus_kfp.profiles import PROFILE_COLUMNS, PROFILE_SCHEMA, check_profile

SPEC = JobSpec(job_id="checked", batch_sizes=(32, 64, 128), default_batch_size=64, target_metric=0.9, max_epochs=5)


def good_result(**changes) -> TrialResult:
    result = TrialResult.build(
        SPEC, batch_size=64, status="reached", time_s=120.0, energy_j=30_000.0, num_epochs=3, power_limit_w=250.0,
        metric=0.91, simulated=True, reason="", source="simulated (GPU model)",
    )  # fmt: skip
    return dataclasses.replace(result, **changes) if changes else result


def good_dict(**changes) -> dict:
    return good_result().to_dict() | changes


def refused(call, field: str) -> JobSpecError:
    with pytest.raises(JobSpecError) as info:
        call()
    err = info.value
    assert err.field == field, str(err)
    assert f"invalid {field}=" in str(err) and "\n" not in str(err)
    return err


# -- TrialResult's own fields ----------------------------------------------------------------------------
BAD_FIELDS = [
    ("batch_size", 0),
    ("batch_size", -64),
    ("batch_size", 64.0),
    ("batch_size", True),
    ("batch_size", "64"),
    ("status", "dispatched"),
    ("status", "done"),
    ("status", None),
    ("time_s", math.nan),
    ("time_s", math.inf),
    ("time_s", -1.0),
    ("time_s", "120"),
    ("energy_j", math.nan),
    ("energy_j", -math.inf),
    ("energy_j", -0.5),
    ("energy_j", None),
    ("num_epochs", -1),
    ("num_epochs", 2.5),
    ("num_epochs", False),
    ("cost", -1e9),
    ("cost", math.nan),
    ("cost", math.inf),
    ("cost", "1"),
    ("power_limit_w", 0.0),
    ("power_limit_w", -250.0),
    ("power_limit_w", math.nan),
    ("power_limit_w", "250"),
    ("metric", math.nan),
    ("metric", math.inf),
    ("metric", "0.9"),
    ("metric", True),
    ("simulated", 1),
    ("simulated", "false"),
    ("reason", None),
    ("source", 3),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_every_constructor_refuses_a_bad_field_naming_it(field, value):
    refused(lambda: TrialResult.from_dict(good_dict(**{field: value})), field)
    refused(lambda: TrialResult.from_json(json.dumps(good_dict(**{field: value}))), field)
    refused(lambda: good_result(**{field: value}), field)  # dataclasses.replace, i.e. the constructor


def test_dispatched_says_which_statuses_are_allowed():
    err = refused(lambda: TrialResult.from_dict(good_dict(status="dispatched")), "status")
    assert "not 'dispatched'" in err.allowed and "reached" in err.allowed


@pytest.mark.parametrize(
    ("field", "value"),
    [("batch_size", 0), ("status", "dispatched"), ("time_s", math.nan), ("energy_j", -1.0), ("num_epochs", -1)],
)
def test_build_refuses_bad_measurements(field, value):
    kwargs = dict(batch_size=64, status="reached", time_s=1.0, energy_j=1.0, num_epochs=1) | {field: value}
    refused(lambda: TrialResult.build(SPEC, **kwargs), field)


def test_build_keeps_a_trial_whose_metric_diverged_without_its_metric():
    """A NaN loss is a trial that ran: its energy and time count, its metric is none, the reason says why."""
    result = TrialResult.build(
        SPEC, batch_size=64, status="not_reached", time_s=10.0, energy_j=900.0, num_epochs=5, metric=math.nan,
        reason="target not reached in 5 epochs",
    )  # fmt: skip
    assert result.metric is None and result.cost == SPEC.cost_model.cost(900.0, 10.0)
    assert result.reason.startswith("target not reached in 5 epochs; the last accuracy was nan")
    assert TrialResult.from_json(result.to_json()) == result


def test_from_json_refuses_what_is_not_a_result():
    refused(lambda: TrialResult.from_json("{not json"), "result")
    refused(lambda: TrialResult.from_json("[1, 2]"), "result")
    data = good_dict()
    del data["cost"]
    refused(lambda: TrialResult.from_dict(data), "cost")


def test_legitimate_results_round_trip():
    result = good_result()
    assert TrialResult.from_json(result.to_json()) == result
    assert check_result_for(SPEC, TrialResult.from_json(result.to_json())) == result
    data = good_dict(power_limit_w=250, metric=1, time_s=120, reached=True, metrics=[0.5, 0.91], gpu_kind="sim")
    same = TrialResult.from_dict(data)  # a result file's extras are ignored; JSON integers become floats
    assert same == dataclasses.replace(result, metric=1.0)
    assert isinstance(same.power_limit_w, float) and isinstance(same.time_s, float)
    failed = TrialResult.build(SPEC, batch_size=32, status=TrialStatus.FAILED, time_s=0.0, energy_j=0.0, num_epochs=0)
    assert check_result_for(SPEC, TrialResult.from_json(failed.to_json())) == failed
    assert failed.cost == 0.0 and failed.power_limit_w is None and failed.metric is None


# -- the result belongs to the job -----------------------------------------------------------------------
def test_check_result_for_refuses_a_cost_the_job_did_not_compute():
    err = refused(lambda: check_result_for(SPEC, good_result(cost=1.0)), "cost")
    assert repr(SPEC.cost_model.cost(30_000.0, 120.0)) in err.allowed
    other = SPEC.with_changes(eta_knob=1.0)  # priced under another eta
    refused(lambda: check_result_for(other, good_result()), "cost")


def test_check_result_for_tolerates_float_noise_only():
    cost = good_result().cost
    assert check_result_for(SPEC, good_result(cost=cost * (1 + 1e-12))).cost == cost * (1 + 1e-12)
    refused(lambda: check_result_for(SPEC, good_result(cost=cost * (1 + 1e-6))), "cost")
    zero = TrialResult.build(SPEC, batch_size=32, status="failed", time_s=0.0, energy_j=0.0, num_epochs=0)
    assert check_result_for(SPEC, dataclasses.replace(zero, cost=1e-12)).cost == 1e-12
    refused(lambda: check_result_for(SPEC, dataclasses.replace(zero, cost=1e-6)), "cost")


def test_check_result_for_refuses_a_batch_size_the_job_does_not_have():
    result = TrialResult.build(SPEC, batch_size=48, status="reached", time_s=1.0, energy_j=1.0, num_epochs=1)
    err = refused(lambda: check_result_for(SPEC, result), "batch_size")
    assert "[32, 64, 128]" in err.allowed
    refused(lambda: check_result_for(SPEC, good_result().to_dict()), "result")


# -- profiles --------------------------------------------------------------------------------------------
def good_profile() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "phase": ["train", "train", "eval"],
            "power_limit_w": [300, 275, 275],  # integers, as a hand-written table may have them
            "average_power_w": [280.0, 251.5, 240.0],
            "throughput": [900.0, 880.0, 2400.0],
            "simulated": [True, True, True],
            "gpu": ["NVIDIA H200"] * 3,
        }
    )


def with_value(column: str, value) -> pd.DataFrame:
    frame = good_profile().astype({column: object})
    frame.loc[1, column] = value
    return frame


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("average_power_w", math.nan),
        ("average_power_w", math.inf),
        ("average_power_w", -1.0),
        ("average_power_w", "250"),
        ("throughput", 0.0),
        ("throughput", -5.0),
        ("throughput", math.nan),
        ("throughput", math.inf),
        ("power_limit_w", 0.0),
        ("power_limit_w", math.nan),
        ("power_limit_w", True),
        ("power_limit_w", None),
        ("phase", "warmup"),
        ("phase", None),
        ("simulated", "False"),
        ("simulated", 1),
        ("simulated", None),
    ],
)
def test_a_bad_profile_value_is_refused_naming_its_column(column, value):
    err = refused(lambda: check_profile(with_value(column, value)), column)
    assert err.value is value or (isinstance(value, float) and math.isnan(value) and math.isnan(err.value))


def test_a_profile_without_its_columns_or_rows_is_refused():
    err = refused(lambda: check_profile(good_profile().drop(columns=["throughput"])), "profile")
    assert "throughput" in err.allowed
    refused(lambda: check_profile(good_profile().iloc[:0]), "profile")
    refused(lambda: check_profile(pd.DataFrame()), "profile")
    refused(lambda: check_profile(good_profile().to_dict("records")), "profile")
    doubled = pd.concat([good_profile(), good_profile()[["throughput"]]], axis=1)
    refused(lambda: check_profile(doubled), "profile")


def test_a_clean_profile_has_the_schema_columns_in_order_and_types():
    messy = good_profile()[list(reversed(PROFILE_COLUMNS))].assign(batch_size=64)
    messy.index = [7, 8, 9]
    clean = check_profile(messy)
    assert list(clean.columns) == list(PROFILE_COLUMNS)
    assert {c: str(t) for c, t in clean.dtypes.items()} == dict(PROFILE_SCHEMA)
    assert clean["power_limit_w"].tolist() == [300.0, 275.0, 275.0] and list(clean.index) == [0, 1, 2]
    assert clean.to_dict("records")[2] == {
        "phase": "eval", "power_limit_w": 275.0, "average_power_w": 240.0, "throughput": 2400.0, "simulated": True,
        "gpu": "NVIDIA H200",
    }  # fmt: skip
    # the GPU model is optional: rows written before profiles named theirs read with gpu ""
    assert check_profile(good_profile().drop(columns="gpu"))["gpu"].tolist() == ["", "", ""]
    assert check_profile(clean).equals(clean)
    zero_power = with_value("average_power_w", 0.0)  # a window whose clock did not move: kept, skipped by choices
    assert check_profile(zero_power)["average_power_w"].tolist()[1] == 0.0
    numpy_flags = good_profile().astype({"simulated": object})
    numpy_flags["simulated"] = [np.True_, np.False_, np.True_]
    assert check_profile(numpy_flags)["simulated"].tolist() == [True, False, True]


def test_the_jit_profilers_profile_passes():
    """A full sweep and the eval row on the simulated GPU: what a trial's PowerProfile artifact holds."""
    from zeus_kfp.power import PowerLimitProfiler, ProfileParams, SimulatedGPU

    now = [0.0]
    gpu = SimulatedGPU(clock="wall", real_clock=lambda: now[0])
    profiler = PowerLimitProfiler(gpu, cost_rate=SPEC.cost_model.rate, params=ProfileParams.zeus(2, 5))
    while not profiler.done:
        profiler.on_step_begin()
        now[0] += 0.01
        profiler.on_step_end(32)
    profiler.on_eval_begin()
    now[0] += 2.0
    profiler.on_eval_end(640)
    profile = profiler.profile().rows
    assert set(profile["phase"]) == {"train", "eval"}
    assert check_profile(profile).equals(profile)


def test_the_trace_simulators_profiles_pass():
    """Every shipped trace's profile, at every batch size, and the trial results replayed from them."""
    from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES
    from zeus_kfp.simulate.trace_trial import TraceBackend, trace_profile
    from zeus_kfp.simulate.workloads import WORKLOADS

    for workload in WORKLOADS:
        for gpu in SHIPPED_POWER_TRACES:
            backend = TraceBackend(workload, gpu)
            trace = backend.trace()
            spec = backend.spec("trace-check")
            for size in trace.sizes.values():
                profile = trace_profile(size)
                assert check_profile(profile.rows).equals(profile.rows), (workload, gpu, size.batch_size)
            b0 = spec.default_batch_size
            outcome = backend.run(spec, batch_size=b0, cost_threshold=None, seed=1, reuse=None)
            assert check_result_for(spec, TrialResult.from_json(outcome.result.to_json())) == outcome.result
