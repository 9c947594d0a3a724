"""Profiling a plain script from outside: the collected progress counter drives the JIT profiler.

No subprocess here: observations are fed as a collector would yield them, so the rules (exact
replay on the model clock, report-bounded windows on a meter, epoch mode, unprofiled, reuse) are
checked on hand-made sequences, fast and deterministically.
"""

from __future__ import annotations

import pandas as pd
import pytest

from zeus_kfp.job import TrialStatus
from zeus_kfp.power import EnergyMonitor, PowerLimitProfiler, PowerModel, ProfileParams, SimulatedGPU
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train.collectors import Observation
from zeus_kfp.train.progress import UNIT_NOTES, ProfilingOptions, ProgressProfiler, Report

from .conftest import rate

BATCH = 16
STEPS_PER_EPOCH = 40
OPTIONS = ProfilingOptions(warmup_iters=2, profile_iters=3)
COST_RATE = rate(0.5, 250.0)


def zeus_aware_profile(epochs: int) -> tuple[pd.DataFrame, float]:
    """The oracle: the hook sequence ZeusDataLoader makes per batch, on the model clock."""
    gpu = SimulatedGPU()
    profiler = PowerLimitProfiler(gpu, cost_rate=COST_RATE, params=ProfileParams.zeus(2, 3), monitor=EnergyMonitor(gpu))
    for _ in range(epochs):
        for _ in range(STEPS_PER_EPOCH):
            profiler.on_step_begin()
            gpu.account_work(BATCH)
            profiler.on_step_end(BATCH)
        profiler.on_epoch_end()
    return profiler.profile().rows, profiler.chosen_limit


def step_reports(every: int, epochs: int) -> list[Observation]:
    """What a script printing `step=N` every `every` steps and `epoch=E step=N accuracy=..` per epoch yields."""
    out, step = [], 0
    for epoch in range(1, epochs + 1):
        for _ in range(STEPS_PER_EPOCH):
            step += 1
            if step % every == 0:
                out.append(Observation("step", step, step=step))
        out += [Observation("epoch", epoch, epoch, step), Observation("accuracy", 0.5, epoch, step)]
    return out


def drive(gpu, observations, options=OPTIONS, **kw) -> ProgressProfiler:
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=options, **kw)
    for obs in observations:
        progress.observe(obs, is_target=obs.metric == "accuracy")
    return progress


@pytest.mark.parametrize("every", [1, 7, 40])
def test_on_the_model_clock_any_reporting_interval_replays_the_zeus_aware_profile(every):
    expected, chosen = zeus_aware_profile(epochs=2)
    gpu = SimulatedGPU(clock="wall")  # as the runner opens it: the step counter moves it to the model clock
    switched = []
    progress = drive(gpu, step_reports(every, epochs=2), on_training_start=lambda: switched.append(gpu.clock()))
    assert gpu.clock_kind == "model" and len(switched) == 1 and progress.exact
    # bit for bit: the same arithmetic in the same order
    pd.testing.assert_frame_equal(progress.profile().rows, expected)
    assert progress.power_limit() == chosen and len(expected) == 7
    assert progress.notes() == [
        "profiled from outside: throughput from metric progress (step counter, 16 samples a step)"
    ]
    progress.close()
    assert gpu.get_power_limit(0) == 250.0  # restored


class MeterStandIn:
    """Stands in for a real meter (NVML): a wall-clock simulated GPU under a manual clock, without the
    simulated GPU's model clock, so the runner cannot replay steps and windows are bounded by reports. Its
    readings are the model's exact integral (`meter` exact), so the profiler keeps Zeus's sweep, whose order
    these tests read; the real meter's search has tests of its own (test_power_search.py, test_nvml_standin.py)."""

    kind, simulated, meter, can_set_limits, min_window_s = "meter-stand-in", True, "exact", True, 0.0

    def __init__(self) -> None:
        self.now = 0.0
        self._gpu = SimulatedGPU(clock="wall", real_clock=lambda: self.now)
        for name in ("device_count", "names", "constraints", "get_power_limit", "set_power_limit", "energy_j", "clock"):
            setattr(self, name, getattr(self._gpu, name))

    def account_work(self, samples: int) -> None:
        raise AssertionError("a real meter is never told about work")

    def close(self) -> None:
        return None


def test_on_a_meter_windows_open_and_close_where_progress_was_reported():
    gpu, model = MeterStandIn(), PowerModel()
    observations = [Observation("step", s, step=s) for s in range(10, 400, 10)]  # a report every 10 steps
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=OPTIONS)
    for obs in observations:
        gpu.now += 1.0  # 10 steps per real second; at limit p the wall-clock model runs them in 1 / speed(p) s
        progress.observe(obs, is_target=False)
    rows = progress.profile().rows
    # First report: profiling starts (the steps before it are not profiled). Each limit then has a
    # warm-up report (10 >= 2 steps) and a profiled report (10 >= 3 steps): 160 samples in 1 real second.
    assert rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    for row in rows.itertuples():
        assert row.throughput == pytest.approx(10 * BATCH * model.relative_throughput(row.power_limit_w))
        assert row.average_power_w == pytest.approx(model.power_w(row.power_limit_w))
    assert not progress.exact and progress.profiler.done


def test_epoch_counter_without_steps_profiles_one_limit_per_epoch():
    gpu = MeterStandIn()
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=OPTIONS)
    for epoch in range(1, 5):
        gpu.now += 2.0  # an epoch takes 2 real seconds
        for obs in (Observation("epoch", epoch, epoch), Observation("accuracy", 0.1 * epoch, epoch)):
            progress.observe(obs, is_target=obs.metric == "accuracy")
    assert progress.mode == "epoch" and not progress.exact
    assert not progress.from_training_start  # a meter cannot tell start-up from epoch 1: charged from the start
    # Epoch 1's evaluation starts profiling; epochs 2, 3, 4 are measured at 250, 225, 200 W.
    rows = progress.profile().rows
    assert rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]
    assert rows["throughput"].iloc[0] == pytest.approx(0.5 * PowerModel().relative_throughput(250.0))  # epochs/s
    assert "epoch counter; throughput in epochs/s" in progress.notes()[0]
    assert "chose among 3 of 7 limits" in progress.notes()[1]


def epoch_cost(limit_w: float, batch_size: int = BATCH) -> tuple[float, float]:
    """(seconds, joules) of one modelled epoch of a script that reports only epochs, by hand from the model."""
    model = PowerModel()
    seconds, joules = model.step(limit_w, batch_size)
    steps = model.epoch_samples // batch_size  # 50,000 / 16: no partial step
    return steps * seconds, steps * joules


def test_on_the_simulated_gpu_an_epoch_counter_is_charged_as_modelled_epochs_from_the_first_report():
    """However long the script took before its first report (start-up), the model clock charges only the epochs
    it reported: each at the limit the profiler had set, one limit an epoch from 250 W down."""
    clock = {"now": 0.0}
    gpu = SimulatedGPU(clock="wall", real_clock=lambda: clock["now"])
    monitor = EnergyMonitor(gpu)
    monitor.begin_window("trial")
    progress = ProgressProfiler(
        gpu,
        monitor,
        batch_size=BATCH,
        cost_rate=COST_RATE,
        options=OPTIONS,
        on_training_start=lambda: (monitor.cancel_window("trial"), monitor.begin_window("trial")),
    )
    clock["now"] += 1000.0  # a start-up of 1000 real seconds
    for epoch in range(1, 4):
        clock["now"] += 5.0  # real time no longer counts: the model clock does
        for obs in (Observation("epoch", epoch, epoch), Observation("accuracy", 0.1 * epoch, epoch)):
            progress.observe(obs, is_target=obs.metric == "accuracy")
    assert progress.mode == "epoch" and progress.exact and progress.from_training_start
    charged = monitor.peek("trial")
    expected = [epoch_cost(limit) for limit in (250.0, 225.0, 200.0)]
    assert charged.time_s == pytest.approx(sum(t for t, _ in expected))
    assert charged.total_energy_j == pytest.approx(sum(e for _, e in expected))
    assert progress.profile().rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]


def test_without_a_counter_each_report_of_the_metric_is_a_unit_and_the_trial_is_profiled():
    gpu, started = SimulatedGPU(clock="wall"), []
    progress = drive(
        gpu, [Observation("accuracy", 0.1 * i) for i in range(3)], on_training_start=lambda: started.append(gpu.clock())
    )
    assert progress.mode == "report" and progress.exact
    # each report is one modelled epoch, replayed at one limit a report from 250 W down (Zeus's sweep on the model)
    assert progress.profile().rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]
    assert progress.notes()[0] == "profiled from outside: " + UNIT_NOTES["report"]
    expected = sum(epoch_cost(limit)[0] for limit in (250.0, 225.0, 200.0))
    assert gpu.clock_kind == "model" and gpu.clock() - started[0] == pytest.approx(expected)


def test_on_a_meter_a_script_reporting_only_its_metric_is_profiled_on_the_time_between_its_lines():
    gpu = MeterStandIn()
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=OPTIONS)
    for i in range(4):
        gpu.now += 2.0  # a report every 2 real seconds; at limit p the wall-clock model runs it in 2 / speed(p) s
        progress.observe(Observation("accuracy", 0.1 * i), is_target=True)
    rows = progress.profile().rows
    assert progress.mode == "report" and not progress.exact
    assert rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]  # the first report starts profiling
    assert rows["throughput"].iloc[0] == pytest.approx(0.5 * PowerModel().relative_throughput(250.0))  # reports/s


def test_an_evaluation_is_left_out_of_the_window_where_the_script_also_reports_training():
    """`step=N` every 10 steps (1 real second), then an evaluation of 3 real seconds ending in `epoch=E accuracy=..`:
    the windows hold the training only, so each limit's throughput is the training's, not diluted by the eval."""
    gpu, model = MeterStandIn(), PowerModel()
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE,
                                options=ProfilingOptions(warmup_iters=2, profile_iters=20))  # fmt: skip
    step = 0
    for epoch in range(1, 8):
        for _ in range(4):
            step += 10
            gpu.now += 1.0
            progress.report(Report(step=step))
        gpu.now += 3.0  # the evaluation
        progress.report(Report(step=step, epoch=epoch, counter_only=False, is_target=True))
    rows = progress.profile().rows
    assert len(rows) >= 3 and progress.profiler.span_epochs
    for row in rows.itertuples():  # 10 steps of 16 samples a real second, stretched by the limit: no eval in it
        assert row.throughput == pytest.approx(10 * BATCH * model.relative_throughput(row.power_limit_w))


def test_keras_names_the_epoch_before_it_trains_and_the_work_is_credited_at_its_metrics_line():
    """`Epoch 3/10` comes before epoch 3 trains: crediting it there would give an epoch no time at all."""
    gpu = MeterStandIn()
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=OPTIONS)
    for epoch in range(1, 5):
        progress.report(Report(epoch=epoch))  # `Epoch 3/10`, then the epoch trains for 2 real seconds
        gpu.now += 2.0
        progress.report(Report(epoch=epoch, counter_only=False, is_target=True))  # `... - val_acc: 0.9`
    rows = progress.profile().rows
    assert progress.mode == "epoch" and rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]
    assert rows["throughput"].iloc[0] == pytest.approx(0.5 * PowerModel().relative_throughput(250.0))  # epochs/s


def test_fractional_epochs_are_progress_as_huggingfaces_trainer_reports_them():
    gpu = MeterStandIn()
    progress = ProgressProfiler(gpu, EnergyMonitor(gpu), batch_size=BATCH, cost_rate=COST_RATE, options=OPTIONS)
    for i in range(1, 13):
        gpu.now += 1.0
        progress.report(Report(epoch=0.25 * i, counter_only=False))  # {'loss': .., 'epoch': 0.25}
    rows = progress.profile().rows
    assert progress.mode == "epoch" and len(rows) >= 2
    assert rows["throughput"].iloc[0] == pytest.approx(0.25 * PowerModel().relative_throughput(250.0))


def test_a_stored_profile_is_held_from_the_start_without_any_counter():
    stored = pd.DataFrame(
        {
            "phase": ["train"] * 7,  # complete: every limit of the simulated GPU (an unfinished one is continued)
            "power_limit_w": [250.0, 150.0, 100.0, 225.0, 200.0, 175.0, 125.0],
            "average_power_w": [200.0, 120.0, 99.0, 190.0, 180.0, 170.0, 110.0],
            "throughput": [1000.0, 900.0, 500.0, 300.0, 300.0, 300.0, 300.0],
            "simulated": [True] * 7,
            "gpu": [PowerModel().name] * 7,  # measured on this model
        }
    )
    gpu = SimulatedGPU(clock="wall")
    progress = drive(gpu, [], reuse=PowerProfile.of(stored))
    assert gpu.get_power_limit(0) == 150.0 == progress.power_limit()  # (0.5*120+125)/900 is the cheapest
    assert progress.notes() == []
    progress.close()
    # The same profile measured on another GPU model is not reused: the trial profiles afresh, and says why
    elsewhere = SimulatedGPU(clock="wall")
    other = drive(elsewhere, [Observation("accuracy", 0.1)], reuse=PowerProfile.of(stored.assign(gpu="NVIDIA A100")))
    assert not other.profiler.reused and other.profile().rows["power_limit_w"].tolist() == [250.0]
    assert "measured on NVIDIA A100, not this Simulated V100" in " ".join(other.notes())
    assert gpu.get_power_limit(0) == 250.0


@pytest.mark.slow
def test_plain_example_profiled_from_outside_picks_the_zeus_aware_limit(tmp_path):
    """The same job, Zeus-aware and plain (stdout `step=N` every 7 steps), on the simulated GPU: the plain
    trial's step counter puts the runner's GPU on the model clock, so the tolerance is zero."""
    from zeus_kfp.power import candidate_limits
    from zeus_kfp.train import example_command, example_spec, make_dataset, run_trial

    spec = example_spec()
    make_dataset(str(tmp_path / "data"))
    common = dict(cost_threshold=None, data_dir=str(tmp_path / "data"), gpu="simulated", warmup_iters=2)
    # 128 steps an epoch at batch size 128: 7 limits x (2 + 8) steps profile within the first epoch.
    zeus = run_trial(
        spec, batch_size=128, command=example_command("zeus"), work_dir=tmp_path / "z", profile_iters=8, **common
    )
    plain = run_trial(
        spec,
        batch_size=128,
        command=[*example_command("plain"), "--log-every", "7"],
        work_dir=tmp_path / "p",
        zeus_aware=False,
        profile_iters=8,
        **common,
    )
    expected = PowerModel().optimal_limit(candidate_limits(SimulatedGPU()), spec.cost_model.cost, samples=128)
    assert zeus.result.status is plain.result.status is TrialStatus.REACHED, plain.log_tail
    assert plain.result.power_limit_w == zeus.result.power_limit_w == expected
    train = zeus.profile.rows[zeus.profile.rows["phase"] == "train"].reset_index(drop=True)
    pd.testing.assert_frame_equal(plain.profile.rows, train)  # the same windows: every train row identical
    assert plain.result.source == "simulated (GPU model)"
    assert "throughput from metric progress (step counter, 128 samples a step)" in plain.result.reason
    assert plain.result.num_epochs == zeus.result.num_epochs
