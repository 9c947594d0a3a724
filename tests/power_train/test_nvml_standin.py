"""The real-meter path on a GPU that behaves like the measured H200: the stand-in NVML (zeus_kfp.simulate.nvml_standin)
reached through zeus_kfp.power.nvml, its state in a file that outlives the processes that use it.

Every figure here is SIMULATED (the stand-in follows the curve fitted to a real H200's sweep); what is real is the
code path: NvmlGPU, the energy monitor, the profiler's real-meter search, the plain-script runner, processes that
die. The node's clock advances only by the work the script does, so no outcome depends on the machine's load.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from ux.cli_process import wait_for

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power.monitor import EnergyMonitor
from zeus_kfp.simulate import nvml_standin
from zeus_kfp.simulate.h200 import fitted

SPEC = JobSpec(job_id="standin", batch_sizes=(256,), default_batch_size=256, target_metric=0.9, max_epochs=30,
               max_power_w=700.0)  # fmt: skip


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fresh stand-in H200 at its default limit, opened as `pynvml` by this process and every process it starts."""
    state = nvml_standin.create(tmp_path / "node.json", seed=1, speedup=50.0)
    for name, value in nvml_standin.shim_env(state, tmp_path / "shim").items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(tmp_path / "shim"))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.delenv("ZEUS_POWER_LIMIT_CAP_W", raising=False)
    return nvml_standin.Node(state)


def open_nvml():
    from zeus_kfp.power.nvml import NvmlGPU

    return NvmlGPU()


def standin_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "zeus_kfp.simulate.standin_train", "--batch-size", "{batch_size}", *args]


def test_through_nvml_the_standin_reads_as_the_sweep_it_is_fitted_to(node):
    """A 3 s window at 700 W and at 250 W, as the sweep measured them: the draw and speed of the fitted curve."""
    gpu = open_nvml()
    assert gpu.simulated and gpu.meter == "real" and gpu.source.startswith("simulated (NVML stand-in")
    assert gpu.min_window_s == 1.0 and gpu.constraints(0).default_w == 700.0
    curve, monitor = fitted(), EnergyMonitor(gpu)
    for limit in (700.0, 250.0):
        gpu.set_power_limit(0, limit)
        node.train(256, steps=20)  # the limit takes effect
        node.publish()
        monitor.begin_window("w")
        node.train(256, steps=round(3.0 * curve.samples_per_s / 256))
        node.publish()
        m = monitor.end_window("w")
        samples = 256 * round(3.0 * curve.samples_per_s / 256)
        # within three standard deviations of a 3 s window's noise (2 %), and the counter's 0.1 s steps
        assert samples / m.time_s == pytest.approx(curve.throughput(limit), rel=0.07)
        assert m.average_power_w == pytest.approx(curve.power_w(limit), rel=0.05)


KILLABLE_RUNNER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from zeus_kfp.job import JobSpec
    from zeus_kfp.train.runner import run_trial

    spec = JobSpec.from_dict(json.loads(sys.argv[1]))
    run_trial(spec, batch_size=256, cost_threshold=None, zeus_aware=False, gpu="nvml", work_dir=Path(sys.argv[2]),
              command=[sys.executable, "-m", "zeus_kfp.simulate.standin_train", "--batch-size", "{batch_size}"])
    """
)


def test_a_trial_killed_mid_profile_leaves_the_gpu_throttled_and_the_next_trial_starts_and_ends_at_the_default(
    node, tmp_path
):
    from zeus_kfp.train.runner import run_trial

    runner = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_RUNNER, json.dumps(SPEC.to_dict()), str(tmp_path / "killed")]
    )
    wait_for(lambda: node.read()["limit_w"] < 700.0, "the killed trial to profile below the maximum", deadline_s=300)
    os.kill(runner.pid, signal.SIGKILL)  # the trial's profiler dies with it: nothing restores the limit
    runner.wait(timeout=60)
    for process in _standin_scripts(tmp_path / "killed"):
        process.kill()
    assert node.read()["limit_w"] < 700.0  # left as the killed trial set it
    calls_before = len(node.read()["set_calls"])

    out = run_trial(SPEC, batch_size=256, cost_threshold=None, zeus_aware=False, gpu="nvml", work_dir=tmp_path / "next",
                    command=standin_command("--epochs", "2"))  # fmt: skip
    calls = node.read()["set_calls"][calls_before:]
    assert out.result.status is TrialStatus.NOT_REACHED, out.log_tail
    assert calls[0] == 700.0  # the next trial's first act: the GPU back at its default, before it trains
    assert node.read()["limit_w"] == 700.0  # and where it leaves it
    assert out.result.source.startswith("simulated (NVML stand-in")


def _standin_scripts(work_dir):
    """The killed runner's training script (in a session of its own, it outlives its runner)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if "zeus_kfp.simulate.standin_train" in " ".join(process.info["cmdline"] or []) and str(
                process.info["cwd"] or ""
            ).startswith(str(work_dir)):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_an_administrators_stated_cap_bounds_the_search_and_is_where_the_gpu_is_left(node, tmp_path, monkeypatch):
    from zeus_kfp.train.runner import run_trial

    monkeypatch.setenv("ZEUS_POWER_LIMIT_CAP_W", "400")
    out = run_trial(SPEC, batch_size=256, cost_threshold=None, zeus_aware=False, gpu="nvml", work_dir=tmp_path / "w",
                    command=standin_command("--epochs", "6"))  # fmt: skip
    profiling = json.loads((tmp_path / "w" / "logs" / "result.json").read_text())["profiling"]
    assert max(profiling["limits_w"]) == 400.0 and max(node.read()["set_calls"]) == 400.0
    assert node.read()["limit_w"] == 400.0 and out.result.status is TrialStatus.REACHED  # at epoch 5 of 6


def test_a_slow_first_evaluation_is_charged_but_never_prices_the_next_epoch(node, tmp_path):
    """10 s of autotuning before the first evaluation, then epochs of about 2.2 s, at 700 W throughout. Priced by
    epoch 1 (start-up and all), the trial would stop after it: 2 x (slow + epoch) passes the threshold. Priced by
    epoch 2, it reaches the target at epoch 4: at epoch 3 slow + 3 epochs + one more stays below it. The
    threshold lies halfway between the two, each worked out from the stand-in's model (a margin of about 10 %)."""
    from zeus_kfp.train.runner import run_trial

    curve, cost = fitted(), SPEC.cost_model.cost
    train_s = (50_000 // 256) * 256 / curve.throughput(700.0)
    eval_s = 10_000 / (nvml_standin.EVAL_SPEEDUP * curve.throughput(700.0))
    epoch = cost(curve.power_w(700.0) * (train_s + eval_s), train_s + eval_s)
    slow = cost(nvml_standin.IDLE_W * 10.0, 10.0)
    threshold = ((slow + 4 * epoch) + 2 * (slow + epoch)) / 2
    out = run_trial(SPEC, batch_size=256, cost_threshold=threshold, zeus_aware=False, gpu="nvml",
                    work_dir=tmp_path / "w", warmup_iters=1_000_000,  # held at 700 W: no limit changes the prices
                    command=standin_command("--halving", "1.0", "--slow-first-eval-s", "10"))  # fmt: skip
    assert out.result.status is TrialStatus.REACHED, out.result.reason
    assert out.result.num_epochs == 4 and out.result.cost < threshold
