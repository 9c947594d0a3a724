"""The drift detectors (zeus_kfp.steps.drift_detectors) on data whose shift is built by hand: the expected statistics
are worked out here from the construction (PSI) or by scipy on the whole data (KS), never by the code under test;
and the recurrence gate's settings (run settings, zeus_kfp.run_settings) refused with the field and what is
allowed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ks_2samp

from zeus_kfp.errors import FieldError, JobSpecError
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.steps import run_settings_from_params, spec_to_params
from zeus_kfp.steps.drift_detectors import MAX_SAMPLE, DataSummary, measure

BASE = RunSettings()


def write(path, frame: pd.DataFrame) -> str:
    frame.to_parquet(path) if str(path).endswith(".parquet") else frame.to_csv(path, index=False)
    return str(path)


def statistic(detector: str, before: pd.DataFrame, after: pd.DataFrame, tmp_path, name: str = "data.parquet"):
    """The detector's statistic for `after` against `before`, through the gate's path: the first data's summary
    as stored (Parquet bytes), then the second measured against it."""
    path = tmp_path / name
    run = BASE.with_changes(drift_detector=detector, drift_data=str(path))
    write(path, before)
    first, summary = measure(run, None)
    assert first is None  # nothing to compare the first data with
    write(path, after)
    stat, _ = measure(run, summary)
    return stat


def test_psi_of_a_shift_built_bin_by_bin(tmp_path):
    # before: 0..999, ten bins of 100 at its deciles (e = 0.1 each). after: the first bin's values six times,
    # the other bins once: a = 600/1500 in bin 1 and 100/1500 in each of the other nine. A column that does not
    # move ("same": the same values, each once) has PSI 0: the statistic is the largest column's.
    before = pd.DataFrame({"x": np.arange(1000.0), "same": np.arange(1000.0)})
    after_x = np.concatenate([np.tile(np.arange(100.0), 6), np.arange(100.0, 1000.0)])
    after = pd.DataFrame({"x": after_x, "same": np.concatenate([np.arange(1000.0), np.arange(1000.0)[::2]])})
    a1, a, e = 600 / 1500, 100 / 1500, 0.1
    expected = (a1 - e) * math.log(a1 / e) + 9 * (a - e) * math.log(a / e)
    assert statistic("psi", before, after, tmp_path) == pytest.approx(expected, rel=1e-12)
    assert expected > 0.2 > statistic("psi", before, before, tmp_path)  # the default threshold tells them apart


def test_ks_is_scipys_on_the_whole_data_and_the_largest_column(tmp_path):
    rng = np.random.default_rng(7)
    before = pd.DataFrame({"a": rng.normal(0, 1, 3000), "b": rng.normal(0, 1, 3000)})
    after = pd.DataFrame({"a": rng.normal(0.05, 1, 2500), "b": rng.normal(0.8, 1, 2500)})
    expected = max(ks_2samp(before[c], after[c]).statistic for c in "ab")
    assert statistic("ks", before, after, tmp_path) == pytest.approx(expected, abs=1e-12)


def test_ks_on_the_stored_sketch_of_large_data_stays_near_scipys(tmp_path):
    """Past MAX_SAMPLE rows a column is kept as a quantile sketch; the statistic stays within 1e-3 of scipy's."""
    rng = np.random.default_rng(3)
    before = pd.DataFrame({"v": rng.exponential(1.0, 4 * MAX_SAMPLE)})
    after = pd.DataFrame({"v": rng.exponential(1.3, 3 * MAX_SAMPLE)})
    expected = ks_2samp(before["v"], after["v"]).statistic
    assert statistic("ks", before, after, tmp_path) == pytest.approx(expected, abs=1e-3)


def test_rows_and_fingerprint(tmp_path):
    before = pd.DataFrame({"x": np.arange(1000)})
    after = pd.DataFrame({"x": np.arange(1250)})
    assert statistic("rows", before, after, tmp_path, "d.csv") == pytest.approx(250 / 1000)
    assert statistic("fingerprint", before, after, tmp_path, "d.csv") == 1.0
    assert statistic("fingerprint", before, before.copy(), tmp_path, "d.csv") == 0.0


def test_a_directory_of_files_is_one_data_set(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    write(folder / "a.parquet", pd.DataFrame({"x": [1.0, 2.0]}))
    write(folder / "b.csv", pd.DataFrame({"x": [3.0]}))
    run = BASE.with_changes(drift_detector="rows", drift_data=str(folder))
    _, summary = measure(run, None)
    assert DataSummary.from_parquet(summary).rows == 3
    assert sorted(DataSummary.from_parquet(summary).samples["x"]) == [1.0, 2.0, 3.0]


def test_a_user_function_gets_the_data_and_the_last_sample(tmp_path):
    (tmp_path / "my_detector.py").write_text(
        "def mean_shift(current, previous):\n    return abs(current['x'].mean() - previous['x'].mean())\n"
    )
    before, after = pd.DataFrame({"x": [1.0, 2.0, 3.0]}), pd.DataFrame({"x": [5.0, 6.0, 7.0, 8.0]})
    ref = f"{tmp_path / 'my_detector.py'}:mean_shift"
    assert statistic(ref, before, after, tmp_path) == pytest.approx(6.5 - 2.0)


def test_a_user_function_must_return_a_finite_number(tmp_path):
    (tmp_path / "bad_detector.py").write_text("def nan(current, previous):\n    return float('nan')\n")
    frame = pd.DataFrame({"x": [1.0]})
    with pytest.raises(FieldError, match="drift_detector"):
        statistic(f"{tmp_path / 'bad_detector.py'}:nan", frame, frame, tmp_path)


def test_missing_data_names_drift_data(tmp_path):
    run = BASE.with_changes(drift_detector="psi", drift_data=str(tmp_path / "nowhere.parquet"))
    with pytest.raises(FieldError, match=r"drift_data.*Parquet or CSV"):
        measure(run, None)


@pytest.mark.parametrize(
    ("changes", "field", "allowed"),
    [
        ({"period_s": -1.0}, "period_s", "seconds >= 0"),
        ({"period_s": float("inf")}, "period_s", "seconds >= 0"),
        ({"max_running": -1}, "max_running", "integer from 0 to 9223372036854775807"),
        ({"max_running": 1.5}, "max_running", "integer from 0 to 9223372036854775807"),
        ({"drift_detector": "kl"}, "drift_detector", "none, fingerprint, rows, psi, ks, or a function"),
        ({"drift_threshold": -0.1}, "drift_threshold", ">= 0"),
        ({"drift_detector": "ks"}, "drift_data", "Parquet or CSV"),
    ],
)
def test_bad_gate_settings_name_the_field_and_what_is_allowed(changes, field, allowed):
    with pytest.raises(JobSpecError, match=rf"invalid {field}=.*allowed.*{allowed}"):
        BASE.with_changes(**changes)
    with pytest.raises(JobSpecError, match=rf"invalid {field}="):  # the way the gate step builds them
        run_settings_from_params(**spec_to_params(BASE) | changes)


def test_the_default_threshold_is_the_detectors():
    assert BASE.with_changes(drift_detector="psi", drift_data="x").gate_threshold == 0.2
    assert BASE.with_changes(drift_detector="psi", drift_data="x", drift_threshold=0.3).gate_threshold == 0.3
    assert BASE.gate_threshold == 0.0 and BASE.period_s == 0.0 and BASE.max_running == 1
