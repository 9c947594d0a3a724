"""The ZEUS_* environment contract between the runner and a Zeus-aware script."""

from __future__ import annotations

import pytest

from zeus_kfp.job import JobSpecError
from zeus_kfp.power import ProfileParams
from zeus_kfp.train import TrialEnv, TrialEnvError, example_spec, run_trial


def test_round_trip_through_the_environment():
    env = TrialEnv.for_trial(example_spec(), batch_size=64, log_dir="/tmp/x", cost_threshold=12.5, gpu="simulated")
    variables = env.to_env()
    assert variables["ZEUS_BATCH_SIZE"] == "64" and variables["ZEUS_HIGHER_IS_BETTER"] == "1"
    assert "ZEUS_DATA_DIR" not in variables  # None is not exported
    assert TrialEnv.from_env(variables) == env
    assert env.cost_model.cost(10.0, 1.0) == example_spec().cost_model.cost(10.0, 1.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [("ZEUS_BATCH_SIZE", "sixty-four"), ("ZEUS_COST_THRESHOLD", "inf"), ("ZEUS_MAX_EPOCHS", "2.5")],
)
def test_a_malformed_variable_is_named(name, value):
    variables = TrialEnv(batch_size=8, target_metric=0.5, max_epochs=3, log_dir="/tmp/x").to_env() | {name: value}
    with pytest.raises(TrialEnvError) as info:
        TrialEnv.from_env(variables)
    assert info.value.field == name


def test_missing_required_and_out_of_range_values_are_named():
    with pytest.raises(TrialEnvError, match="ZEUS_LOG_DIR"):
        TrialEnv.from_env({"ZEUS_BATCH_SIZE": "8", "ZEUS_TARGET_METRIC": "0.5", "ZEUS_MAX_EPOCHS": "3"})
    env = TrialEnv(batch_size=8, target_metric=0.5, max_epochs=3, log_dir="/tmp/x", eta_knob=1.5)
    with pytest.raises(TrialEnvError, match="ZEUS_ETA_KNOB"):
        env.check()


def test_min_window_s_travels_as_zeus_min_window_s_and_a_bad_one_is_named(tmp_path):
    env = TrialEnv(batch_size=8, target_metric=0.5, max_epochs=3, log_dir="/tmp/x", min_window_s=2.5)
    assert env.to_env()["ZEUS_MIN_WINDOW_S"] == "2.5" and TrialEnv.from_env(env.to_env()) == env
    assert "ZEUS_MIN_WINDOW_S" not in TrialEnv(batch_size=8, target_metric=0.5, max_epochs=3, log_dir="x").to_env()
    for raw in ("-1", "nan", "soon"):
        with pytest.raises(TrialEnvError) as info:
            TrialEnv.from_env(env.to_env() | {"ZEUS_MIN_WINDOW_S": raw})
        assert info.value.field == "ZEUS_MIN_WINDOW_S"
    with pytest.raises(TrialEnvError, match="min_window_s"):
        TrialEnv(batch_size=8, target_metric=0.5, max_epochs=3, log_dir="/tmp/x", min_window_s=-0.5)
    with pytest.raises(ValueError, match="min_window_s"):
        ProfileParams(min_window_s=-1.0)
    with pytest.raises(JobSpecError) as info:
        run_trial(
            example_spec(), batch_size=16, cost_threshold=None, command=["true"], work_dir=tmp_path, min_window_s=-1
        )
    assert info.value.field == "min_window_s"
