"""ZeusDataLoader end to end: in-process with the fake NVML, and the example scripts as real subprocesses."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

from zeus_kfp.job import TrialStatus
from zeus_kfp.power import PowerModel, SimulatedGPU, candidate_limits
from zeus_kfp.power.nvml import NvmlGPU
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train import TrialEnv, example_command, example_spec, make_dataset, run_trial
from zeus_kfp.train.dataloader import ZeusDataLoader


def tiny_data(n: int = 256) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g))


def test_limit_is_restored_and_the_failure_recorded_when_the_loop_raises(fake_nvml, tmp_path):
    env = TrialEnv(
        batch_size=8,
        target_metric=0.9,
        max_epochs=3,
        log_dir=str(tmp_path),
        profile_iters=2,
        warmup_iters=1,
        min_window_s=0.0,  # about restoring on an exception: 1 s NVML windows would not close within 12 steps
    )
    loader = ZeusDataLoader(tiny_data(), env=env, gpu=NvmlGPU())
    seen = []

    def train() -> None:
        for _ in loader.epochs():
            for i, _batch in enumerate(loader):
                seen.append(fake_nvml.devices[0].limit_mw)
                if i == 12:
                    raise RuntimeError("loss is nan")

    with pytest.raises(RuntimeError, match="loss is nan"):
        train()
    assert min(seen) < 300_000  # it really was profiling lower limits
    assert [d.limit_mw for d in fake_nvml.devices] == [300_000, 300_000]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and not result["simulated"] and result["gpu_kind"] == "nvml"


def test_in_process_trial_reaches_the_target_and_writes_its_profile(tmp_path):
    env = TrialEnv(
        batch_size=16, target_metric=0.5, max_epochs=5, log_dir=str(tmp_path), warmup_iters=0, profile_iters=2
    )
    train = ZeusDataLoader(tiny_data(), env=env, gpu=SimulatedGPU(), shuffle=False)
    evals = ZeusDataLoader(tiny_data(64), split="eval", trial=train.trial)
    epochs = []
    for epoch in train.epochs():
        epochs.append(epoch)
        sum(1 for _ in train)
        assert sum(len(y) for _, y in evals) == 64
        train.report_metric([0.1, 0.4, 0.6, 0.7][epoch])
    assert epochs == [0, 1, 2]
    result = train.trial.result
    assert result.status is TrialStatus.REACHED and result.num_epochs == 3 and result.metric == 0.6
    assert result.simulated and result.power_limit_w == train.trial.profiler.chosen_limit
    profile = train.trial.profiler.profile().rows
    assert list(profile["phase"]) == ["train"] * 7 + ["eval"]
    written = PowerProfile.read_parquet(tmp_path / "profile.parquet")  # what the runner reads back
    assert written.rows["phase"].tolist() == ["train"] * 7 + ["eval"] and written.simulated
    assert json.loads((tmp_path / "result.json").read_text())["reached"]


def test_eval_loader_needs_the_train_loaders_trial_and_batch_size_is_the_trials(tmp_path):
    env = TrialEnv(batch_size=16, target_metric=0.5, max_epochs=5, log_dir=str(tmp_path))
    with pytest.raises(ValueError, match="trial"):
        ZeusDataLoader(tiny_data(), split="eval", env=env, gpu=SimulatedGPU())
    with pytest.raises(ValueError, match="batch_size"):
        ZeusDataLoader(tiny_data(), env=env, gpu=SimulatedGPU(), batch_size=32)


@pytest.mark.slow
def test_example_on_the_simulated_gpu_picks_the_exhaustive_optimum(tmp_path):
    # eta = 1 (energy only): the model's optimum, 100 W, beats its neighbour by ~14%, far above CPU timing noise.
    spec = example_spec().with_changes(eta_knob=1.0)
    make_dataset(str(tmp_path / "data"))
    out = run_trial(
        spec,
        batch_size=16,  # 1024 steps in the first epoch: all 7 limits at 10 + 120 steps fit, long windows beat noise
        cost_threshold=None,
        command=example_command("zeus"),
        work_dir=tmp_path / "trial",
        data_dir=str(tmp_path / "data"),
        gpu="simulated",
        profile_iters=120,
    )
    expected = PowerModel().optimal_limit(candidate_limits(SimulatedGPU()), spec.cost_model.cost, samples=16)
    assert out.result.status is TrialStatus.REACHED, out.log_tail
    assert out.result.power_limit_w == expected == 100.0, out.profile.rows.to_string()
    assert out.result.simulated and out.result.energy_j > 0
    assert list(out.profile.rows["phase"]) == ["train"] * 7 + ["eval"]
    assert out.profile.simulated and out.profile.rows["simulated"].all()
    assert out.model_path is not None and out.model_path.stat().st_size > 0


@pytest.mark.slow
def test_example_stops_itself_when_the_next_epoch_would_pass_the_threshold(tmp_path):
    spec = example_spec()
    out = run_trial(
        spec, batch_size=1024, cost_threshold=40.0, command=example_command("zeus"), work_dir=tmp_path, gpu="simulated"
    )
    assert out.result.status is TrialStatus.COST_EXCEEDED, out.log_tail
    assert 1 <= out.result.num_epochs < spec.max_epochs and "threshold" in out.result.reason


@pytest.mark.slow
def test_plain_example_and_sigterm_to_a_zeus_aware_script(tmp_path):
    spec = example_spec()
    out = run_trial(
        spec,
        batch_size=64,
        cost_threshold=None,
        command=example_command("plain"),
        work_dir=tmp_path / "plain",
        zeus_aware=False,
        gpu="simulated",
    )
    assert out.result.status is TrialStatus.REACHED and out.result.num_epochs <= 3, out.log_tail
    assert out.model_path is not None
    # A Zeus-aware script on a (fake) NVML GPU gets SIGTERM mid-profiling (as from the runner or
    # Kubernetes): it must put the maximum limit back and record the trial. The fake pynvml lives in
    # the child, so the child reports the limits it saw from an atexit hook registered first (atexit
    # runs it last, after the trial's own).
    report = tmp_path / "limits.json"
    hang = tmp_path / "hang.py"
    hang.write_text(
        textwrap.dedent(
            f"""
            import atexit, json, os, signal, sys, time
            sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
            from power_train.fake_pynvml import FakeDevice, make_module
            nvml = make_module([FakeDevice()])
            sys.modules["pynvml"] = nvml
            seen = []
            atexit.register(lambda: open({str(report)!r}, "w").write(json.dumps([nvml.devices[0].limit_mw, min(seen)])))
            import torch
            from zeus_kfp.train.dataloader import ZeusDataLoader
            loader = ZeusDataLoader(torch.utils.data.TensorDataset(torch.zeros(4096, 2)))
            for _ in loader.epochs():
                while True:
                    for _ in loader:
                        seen.append(nvml.devices[0].limit_mw)
                        if min(seen) < 300_000:
                            os.kill(os.getpid(), signal.SIGTERM)
                            time.sleep(5)
            """
        )
    )
    out = run_trial(
        spec,
        batch_size=16,
        cost_threshold=None,
        command=[sys.executable, str(hang)],
        work_dir=tmp_path / "hang",
        gpu="simulated",  # the runner's own view; the script itself opens the fake NVML:
        env={"ZEUS_GPU": "nvml"},
        warmup_iters=1,
        profile_iters=2,
    )
    assert out.result.status is TrialStatus.FAILED and "terminated by signal 15" in out.result.reason, out.log_tail
    final_limit, lowest_seen = json.loads(report.read_text())
    assert lowest_seen < 300_000 and final_limit == 300_000


def test_a_stored_profile_is_reused_instead_of_profiled_again(tmp_path):
    stored = tmp_path / "reuse_profile.parquet"  # as the runner hands it over (ZEUS_PROFILE_PATH)
    figures = [(250.0, 200.0, 1000.0), (150.0, 120.0, 900.0), (100.0, 99.0, 500.0)]
    # complete: every limit of the simulated GPU (an unfinished profile is continued, not reused)
    figures += [(225.0, 190.0, 300.0), (200.0, 180.0, 300.0), (175.0, 170.0, 300.0), (125.0, 110.0, 300.0)]
    model = PowerModel().name  # measured on this GPU model (on another it is not reused)
    rows = [dict(phase="train", power_limit_w=w, average_power_w=p, throughput=t, simulated=True, gpu=model)
            for w, p, t in figures]  # fmt: skip
    PowerProfile.of(rows).to_parquet(stored)
    env = TrialEnv(
        batch_size=16, target_metric=0.5, max_epochs=2, log_dir=str(tmp_path / "log"), profile_path=str(stored)
    )
    gpu = SimulatedGPU()
    loader = ZeusDataLoader(tiny_data(), env=env, gpu=gpu)
    limits = []
    for _ in loader.epochs():
        for _batch in loader:
            limits.append(gpu.get_power_limit(0))
        loader.report_metric(0.9)
    assert loader.trial.profiler.reused
    assert set(limits) == {150.0}  # (0.5*120+0.5*250)/900 beats 250 W and 100 W
    assert loader.trial.result.power_limit_w == 150.0 and gpu.get_power_limit(0) == 250.0


@pytest.mark.slow
def test_the_example_gives_the_same_figures_on_a_busy_machine(tmp_path):
    """The simulated GPU's clock is a model of the work done, not CPU or wall time: the same trial on a
    machine whose cores are all busy gives the same time, energy and power limit to the last bit."""
    import subprocess

    spec = example_spec()
    make_dataset(str(tmp_path / "data"))

    def trial(name: str):
        out = run_trial(
            spec,
            batch_size=64,
            cost_threshold=None,
            command=example_command("zeus"),
            work_dir=tmp_path / name,
            data_dir=str(tmp_path / "data"),
            gpu="simulated",
        )
        r = out.result
        return r.status, r.num_epochs, r.power_limit_w, r.time_s, r.energy_j, out.profile.rows.to_dict("list")

    quiet = trial("quiet")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = trial("busy")
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert quiet[0] is TrialStatus.REACHED
    assert busy == quiet
