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


@pytest.mark.slow
def test_the_sweep_step_sweeps_every_limit_and_runs_the_pipeline_on_the_standin(gpu_check, tmp_path, monkeypatch):
    """What a lent GPU needs only `gpu_check.py --sweep` for, run here on the stand-in H200 (every figure simulated):
    each limit from 700 W down to 200 W in 25 W steps measured twice (down, then up), then `zeus-kfp run` at the
    same batch size, its pick read against the sweep, and the GPU left at its default limit."""
    import sys

    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.chdir(tmp_path)
    report = gpu_check.main(["--out", str(tmp_path / "c.json"), "--skip-trial", "--sweep", "--standin",
                             "--sweep-args", "--recurrences 2 --window-s 1.5 --warmup-s 0.5"])  # fmt: skip
    sweep = report["sweep"]
    assert sweep["ok"], sweep.get("error")
    found = sweep["result"]
    limits = [row["power_limit_w"] for row in found["sweep"]]
    ladder = [700.0 - 25.0 * i for i in range(21)]
    assert limits == ladder + ladder[::-1] and found["simulated"]
    assert 200.0 < found["optimum_w"] <= 325.0  # the stand-in's curve: its cost falls below the draw (about 307 W)
    picks = found["picks"]
    assert [p["recurrence"] for p in picks] == [1, 2] and all(p["status"] == "reached" for p in picks)
    assert all(p["ratio"] >= 1.0 and p["windows"] >= 2 for p in picks)
    assert found["left_at_w"] == [700.0]
