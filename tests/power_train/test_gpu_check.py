"""benchmarks/gpu_check.py's logic on the fake pynvml: every step reports, failures are caught, JSON is written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.fixture
def gpu_check(monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "BUSY_S", 0.3)
    return module


def test_full_report_with_settable_limits(fake_nvml, gpu_check, tmp_path):
    out = tmp_path / "check.json"
    gpu_check.main(["--out", str(out), "--skip-trial"])
    report = json.loads(out.read_text())
    assert report["ok"] and report["devices"]["result"][1]["energy_counter"] is False
    energy = report["energy"]["result"]
    assert energy["counter_j"] / energy["time_s"] == pytest.approx(150.0, rel=0.05)
    assert abs(energy["sampled_vs_counter_pct"]) < 10 and energy["simulated"] is False
    limit = report["power_limit"]["result"]
    assert (limit["target_w"], limit["read_back_w"], limit["restored_w"]) == (250.0, 250.0, 300.0)
    assert fake_nvml.devices[0].limit_mw == 300_000


def test_permission_error_is_reported_as_measure_only(fake_nvml, gpu_check, tmp_path):
    for d in fake_nvml.devices:
        d.may_set = False
    report = gpu_check.main(["--out", str(tmp_path / "c.json"), "--skip-trial"])
    limit = report["power_limit"]["result"]
    assert limit["can_set_limits"] is False and "SYS_ADMIN" in limit["measure_only"]
    assert limit["restored_ok"]


def test_a_failing_step_is_caught_and_the_rest_still_run(fake_nvml, gpu_check, tmp_path, monkeypatch):
    def broken(_handle):
        raise fake_nvml.NVMLError(999)

    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetPowerManagementLimitConstraints", broken)
    report = gpu_check.main(["--out", str(tmp_path / "c.json"), "--skip-trial"])
    assert not report["ok"]
    assert not report["devices"]["ok"] and "NVMLError" in report["devices"]["error"]
    assert report["energy"]["ok"] and not report["power_limit"]["ok"]


@pytest.mark.slow
def test_the_profiling_step_runs_the_example_until_every_limit_is_profiled(fake_nvml, gpu_check):
    # The same code path as on a GPU, with the simulated GPU in the child (exact energy, no window floor):
    # two epochs of 256 steps hold all 7 limits of 50 steps, and the step reports the summary the script wrote.
    out = gpu_check.profiling(None, 64, 120.0, epochs=2, gpu="simulated")
    assert out["done"] and out["limits_profiled"] == out["limits_total"] == 7, out["log_tail"]
    assert out["zero_power_rows"] == 0 and out["invalid_windows"] == 0 and out["min_window_s"] == 0.0
    assert out["chosen_limit_w"] in [r["power_limit_w"] for r in out["profile"]] and out["profiling_s"] > 0
    assert out["result"]["status"] == "not_reached" and out["result"]["simulated"]
    assert out["limits_final_w"] == out["limits_before_w"] == [300.0, 300.0]
