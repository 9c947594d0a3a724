"""The JIT profiler's state machine, driven step by step on a simulated GPU with an exact clock, and on the
fake pynvml with a coarse energy counter (what a real H200 has) under a fake clock."""

from __future__ import annotations

import logging
import sys

import pandas as pd
import pytest

from zeus_kfp.power import (
    PROFILE_COLUMNS,
    Done,
    EnergyMonitor,
    Eval,
    PowerLimitProfiler,
    PowerModel,
    ProfileParams,
    Profiling,
    Ready,
    SimulatedGPU,
    candidate_limits,
    choose_limit,
)
from zeus_kfp.power.nvml import NvmlGPU
from zeus_kfp.power.profiler import MAX_REMEASURES
from zeus_kfp.profiles import PowerProfile

from .conftest import rate, wall_optimum
from .fake_pynvml import FakeDevice, make_module

STEP_S = 0.01  # real seconds per step at full speed
BATCH = 32


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(eta: float = 0.5, params: ProfileParams | None = None, **kw):
    clock = ManualClock()
    gpu = SimulatedGPU(clock="wall", real_clock=clock)
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(eta, 250.0), params=params or ProfileParams.zeus(2, 5), **kw)
    return gpu, profiler, clock


def step(profiler: PowerLimitProfiler, clock: ManualClock) -> None:
    profiler.on_step_begin()
    clock.now += STEP_S
    profiler.on_step_end(BATCH)


def test_limits_go_from_the_maximum_down_in_25_w_steps():
    assert candidate_limits(SimulatedGPU()) == [250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    assert candidate_limits(SimulatedGPU(), 50.0) == [250.0, 200.0, 150.0, 100.0]


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0])
def test_sweep_measures_every_limit_exactly_and_picks_the_model_optimum(eta):
    gpu, profiler, clock = make(eta)
    model = PowerModel()
    for _ in range(7 * 7):
        assert not profiler.done
        step(profiler, clock)
    assert profiler.done
    table = profiler.profile().rows
    assert list(table.columns) == list(PROFILE_COLUMNS)
    assert list(table["power_limit_w"]) == [250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    for row in table.itertuples():
        assert row.throughput == pytest.approx(BATCH / STEP_S * model.relative_throughput(row.power_limit_w))
        assert row.average_power_w == pytest.approx(model.power_w(row.power_limit_w))
        assert row.simulated
    expected = wall_optimum(model, candidate_limits(gpu), eta, 250.0)
    assert profiler.chosen_limit == expected
    assert gpu.get_power_limit(0) == expected
    assert {0.0: 250.0, 0.5: 175.0, 1.0: 100.0}[eta] == expected  # interior optimum at eta 0.5


def test_an_epoch_ending_mid_window_cancels_it_and_the_limit_restarts_next_epoch():
    gpu, profiler, clock = make(params=ProfileParams.zeus(2, 5))
    for _ in range(10):  # 250 W: 2 warm-up + 5 profiled; 225 W: 2 warm-up + 1 profiled, then the epoch ends
        step(profiler, clock)
    assert profiler.state == Profiling(1, began_at=7, required_s=0.0, steps=1, samples=BATCH)
    assert gpu.get_power_limit(0) == 225.0
    profiler.on_epoch_end()
    assert profiler.state == Ready(1) and profiler.cancelled_windows == 1
    clock.now += 100.0  # eval and epoch-boundary work: must not leak into any window
    for _ in range(6):  # 225 W restarts from warm-up; one step short of finishing its window
        step(profiler, clock)
    assert [r["power_limit_w"] for r in profiler.rows] == [250.0]
    step(profiler, clock)
    assert [r["power_limit_w"] for r in profiler.rows] == [250.0, 225.0]
    expected = BATCH / STEP_S * PowerModel().relative_throughput(225.0)
    assert profiler.rows[1]["throughput"] == pytest.approx(expected)


def test_eval_is_profiled_once_at_the_chosen_limit():
    _, profiler, clock = make(params=ProfileParams.zeus(0, 1))
    profiler.on_eval_begin()  # before profiling is done: nothing measured
    profiler.on_eval_end(100)
    assert profiler.rows == []
    for _ in range(7):
        step(profiler, clock)
    assert profiler.state == Eval(175.0)  # chosen; eval is measured next, at that limit
    for _ in range(2):
        profiler.on_eval_begin()
        clock.now += 0.5
        profiler.on_eval_end(1000)
    evals = [r for r in profiler.rows if r["phase"] == "eval"]
    assert len(evals) == 1 and evals[0]["power_limit_w"] == profiler.chosen_limit == 175.0
    assert profiler.state == Done(175.0)
    assert evals[0]["throughput"] == pytest.approx(1000 / 0.5 * PowerModel().relative_throughput(175.0))


def test_restore_puts_the_maximum_back_on_an_untuned_gpu():
    gpu, profiler, clock = make()
    for _ in range(9):
        step(profiler, clock)
    assert gpu.get_power_limit(0) == 225.0
    profiler.restore()
    assert gpu.get_power_limit(0) == 250.0


def test_a_reused_profile_skips_profiling():
    _, first, clock = make(eta=1.0, params=ProfileParams.zeus(0, 1))
    for _ in range(7):
        step(first, clock)
    gpu, again, clock = make(eta=1.0, reuse=first.profile())
    assert again.done and again.reused and again.chosen_limit == 100.0
    step(again, clock)
    assert gpu.get_power_limit(0) == 100.0


def test_choose_limit_breaks_ties_toward_the_higher_limit():
    table = pd.DataFrame(
        {
            "phase": ["train", "train", "eval"],
            "power_limit_w": [200.0, 100.0, 100.0],
            "average_power_w": [100.0, 100.0, 1.0],
            "throughput": [10.0, 10.0, 1e9],
            "simulated": [True] * 3,
        }
    )
    assert choose_limit(PowerProfile.of(table), rate(0.5, 300)) == 200.0


def test_params_shrink_to_fit_a_short_epoch_and_reject_bad_values():
    assert ProfileParams().fit(1000) == ProfileParams()
    small = ProfileParams().fit(16)
    assert small.warmup_iters + small.profile_iters <= 16 and small.profile_iters >= 1
    with pytest.raises(ValueError, match="profile_iters"):
        ProfileParams(profile_iters=0)


def test_restore_puts_back_the_default_limit_not_the_one_found_at_the_start(monkeypatch):
    """A limit found when the trial starts may be a killed trial's profiling rung: it is never put back."""
    monkeypatch.delenv("ZEUS_POWER_LIMIT_CAP_W", raising=False)
    clock = ManualClock()
    gpu = SimulatedGPU(clock="wall", real_clock=clock)
    gpu.set_power_limit(0, 200.0)  # left by a trial killed mid-profile
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 250.0), params=ProfileParams.zeus(2, 5))
    for _ in range(3):
        step(profiler, clock)
    assert gpu.get_power_limit(0) == 250.0  # profiling starts from the maximum
    profiler.restore()
    assert gpu.get_power_limit(0) == gpu.constraints(0).default_w == 250.0


def test_an_administrators_stated_cap_bounds_the_limits_and_is_what_restore_leaves(monkeypatch):
    monkeypatch.setenv("ZEUS_POWER_LIMIT_CAP_W", "200")
    clock = ManualClock()
    gpu = SimulatedGPU(clock="wall", real_clock=clock)
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 250.0), params=ProfileParams.zeus(2, 5))
    assert profiler.limits == [200.0, 175.0, 150.0, 125.0, 100.0]
    for _ in range(3):
        step(profiler, clock)
    assert gpu.get_power_limit(0) == 200.0  # profiling starts from the cap, never above it
    profiler.restore()
    assert gpu.get_power_limit(0) == 200.0


@pytest.mark.parametrize("value", ["-5", "0", "lots", "nan"])
def test_a_cap_that_is_not_a_positive_number_of_watts_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("ZEUS_POWER_LIMIT_CAP_W", value)
    with pytest.raises(ValueError, match=r"ZEUS_POWER_LIMIT_CAP_W.*number of watts > 0"):
        PowerLimitProfiler(SimulatedGPU(), cost_rate=rate(0.5, 250.0))


# -- windows long enough for the meter -----------------------------------------------------------------------
H200_STEP_S = 0.0013  # the example's step at batch 16 on an H200: 40-step windows last ~50 ms
COUNTER_PERIOD_S = 0.1  # the H200's energy counter advances in steps of about this
EPOCH_STEPS = 1024  # the example at batch 16


def coarse_nvml(monkeypatch: pytest.MonkeyPatch, clock: ManualClock, period_s: float = COUNTER_PERIOD_S) -> NvmlGPU:
    """A fake NVML GPU whose draw follows the V100 model and whose counter ticks every `period_s` of fake time."""
    model = PowerModel()
    device = FakeDevice(
        min_mw=100_000,
        max_mw=250_000,
        limit_mw=250_000,
        clock=clock,
        counter_period_s=period_s,
        power_at_limit_w=model.power_w,
    )
    monkeypatch.setitem(sys.modules, "pynvml", make_module([device]))
    return NvmlGPU(clock=clock)


def train(profiler: PowerLimitProfiler, gpu: NvmlGPU, clock: ManualClock, max_epochs: int = 40) -> int:
    """Epochs of EPOCH_STEPS steps at the model's speed under the current limit, with eval time between epochs,
    until profiling is done; returns the epochs it took."""
    model = PowerModel()
    for epoch in range(1, max_epochs + 1):
        for _ in range(EPOCH_STEPS):
            profiler.on_step_begin()
            clock.now += H200_STEP_S / model.relative_throughput(gpu.get_power_limit(0))
            profiler.on_step_end(BATCH)
        profiler.on_epoch_end()
        clock.now += 0.3  # eval and reshuffling: must not leak into any window
        if profiler.done:
            return epoch
    raise AssertionError(f"profiling not done after {max_epochs} epochs: {profiler.summary()}")


@pytest.mark.parametrize("eta", [0.0, 1.0])
def test_on_a_coarse_counter_windows_last_the_backends_minimum_and_the_choice_is_the_optimum(monkeypatch, eta):
    clock = ManualClock()
    gpu = coarse_nvml(monkeypatch, clock)
    assert gpu.min_window_s == 1.0
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(eta, 250.0), params=ProfileParams.zeus())  # 10 + 40 steps
    train(profiler, gpu, clock)
    model = PowerModel()
    table = profiler.profile().rows
    # Zeus's sweep, then (a real meter) the pick confirmed in a second window
    assert list(table["power_limit_w"]) == [*candidate_limits(gpu), profiler.chosen_limit]
    assert (table["average_power_w"] > 0).all() and profiler.invalid_windows == 0
    for row in table.itertuples():  # a 1 s window reads the energy to within one 100 ms counter step
        assert row.average_power_w == pytest.approx(model.power_w(row.power_limit_w), rel=COUNTER_PERIOD_S / 1.0)
    assert profiler.chosen_limit == wall_optimum(model, candidate_limits(gpu), eta, 250.0)
    assert gpu.get_power_limit(0) == profiler.chosen_limit


def test_the_coarse_counter_reads_zero_over_short_windows_which_are_void_and_measured_longer(monkeypatch, caplog):
    clock = ManualClock()
    gpu = coarse_nvml(monkeypatch, clock)
    # What the profiler did on the H200: 40-step windows of ~50 ms. Many read no energy at all.
    monitor, zero = EnergyMonitor(gpu), 0
    for _ in range(20):
        monitor.begin_window("w")
        clock.now += 40 * H200_STEP_S
        zero += monitor.end_window("w").total_energy_j == 0
    assert zero >= 5
    # With min_window_s=0 the profiler meets those windows, counts them void, warns once, and re-measures them.
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(1.0, 250.0), params=ProfileParams.zeus(min_window_s=0.0))
    with caplog.at_level(logging.WARNING, logger="zeus_kfp.power.profiler"):
        train(profiler, gpu, clock)
    assert profiler.invalid_windows >= 3
    assert len([r for r in caplog.records if "did not advance" in r.getMessage()]) == 1
    assert (profiler.profile().rows["average_power_w"] > 0).all() and not profiler.gave_up


def test_a_counter_that_never_moves_ends_profiling_at_the_limit_in_force(monkeypatch):
    clock = ManualClock()
    gpu = coarse_nvml(monkeypatch, clock, period_s=1e9)
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(1.0, 250.0), params=ProfileParams.zeus())
    train(profiler, gpu, clock)
    assert profiler.invalid_windows == MAX_REMEASURES + 1 and "did not advance" in profiler.gave_up
    assert profiler.profile().rows.empty and profiler.chosen_limit == gpu.get_power_limit(0) == 250.0


def run_epochs(profiler: PowerLimitProfiler, clock: ManualClock, steps: int, max_epochs: int) -> int:
    for epoch in range(1, max_epochs + 1):
        for _ in range(steps):
            step(profiler, clock)
        profiler.on_epoch_end()
        clock.now += 100.0  # eval and epoch-boundary work
        if profiler.done:
            return epoch
    raise AssertionError(f"profiling not done after {max_epochs} epochs: {profiler.summary()}")


def test_a_window_longer_than_an_epoch_spans_epochs_instead_of_restarting_forever():
    # 20 steps of 10 ms = 0.2 s epochs; each window needs 0.5 s: it can never fit in one epoch.
    _, profiler, clock = make(eta=1.0, params=ProfileParams.zeus(2, 5, min_window_s=0.5))
    epochs = run_epochs(profiler, clock, steps=20, max_epochs=40)
    assert profiler.cancelled_windows == 0 and profiler.spanned_epochs > 0 and epochs <= 7 * 3 + 1
    model = PowerModel()
    for row in profiler.profile().rows.itertuples():  # exact: the 100 s between epochs was left out of every window
        assert row.throughput == pytest.approx(BATCH / STEP_S * model.relative_throughput(row.power_limit_w))
        assert row.average_power_w == pytest.approx(model.power_w(row.power_limit_w))
    assert profiler.chosen_limit == 100.0


def test_a_window_that_fits_an_epoch_is_still_cancelled_at_its_end_and_restarted():
    # 80-step epochs of 0.8 s: a 0.5 s window fits from the epoch's start; the next one is cut and restarts.
    _, profiler, clock = make(eta=1.0, params=ProfileParams.zeus(2, 5, min_window_s=0.5))
    assert run_epochs(profiler, clock, steps=80, max_epochs=20) == 7
    assert profiler.cancelled_windows == 6 and profiler.spanned_epochs == 0 and not profiler.span_epochs
    for row in profiler.profile().rows.itertuples():
        assert row.throughput == pytest.approx(BATCH / STEP_S * PowerModel().relative_throughput(row.power_limit_w))


def test_eval_is_profiled_over_as_many_passes_as_it_takes_to_last_min_window_s():
    _, profiler, clock = make(params=ProfileParams.zeus(0, 1, min_window_s=0.05))
    for _ in range(7 * 5):
        step(profiler, clock)
    assert profiler.done and profiler.chosen_limit == 175.0
    for _ in range(3):  # 0.02 s passes: the window closes on the third
        profiler.on_eval_begin()
        clock.now += 0.02
        profiler.on_eval_end(100)
        clock.now += 10.0  # training between evals is not eval
    evals = [r for r in profiler.rows if r["phase"] == "eval"]
    assert len(evals) == 1
    assert evals[0]["throughput"] == pytest.approx(300 / 0.06 * PowerModel().relative_throughput(175.0))


def test_zero_power_rows_of_an_old_stored_profile_are_never_chosen():
    stored = pd.DataFrame(
        {
            "phase": ["train"] * 3,
            "power_limit_w": [700.0, 625.0, 600.0],
            "average_power_w": [213.3, 0.0, 101.4],  # as the H200 profiled them with 50 ms windows
            "throughput": [11251.0, 16095.0, 10381.0],
            "simulated": [False] * 3,
        }
    )
    # The 625 W row's cost would be (0.5 * 0 + 0.5 * 700) / 16095, the lowest: the void row would win.
    assert choose_limit(PowerProfile.of(stored), rate(0.5, 700.0)) == 600.0
    _, profiler, _ = make(reuse=PowerProfile.of(stored.assign(average_power_w=0.0)))  # nothing valid: profile again
    assert not profiler.reused and profiler.state == Ready(0)
