"""The JIT profiler's state machine, driven step by step on a simulated GPU with an exact clock."""

from __future__ import annotations

import pandas as pd
import pytest

from zeus.power import (
    PROFILE_COLUMNS,
    PowerLimitProfiler,
    PowerModel,
    ProfileParams,
    ProfilerState,
    SimulatedGPU,
    candidate_limits,
    choose_limit,
)

STEP_S = 0.01  # real seconds per step at full speed
BATCH = 32


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(eta: float = 0.5, params: ProfileParams | None = None, **kw):
    clock = ManualClock()
    gpu = SimulatedGPU(real_clock=clock)
    profiler = PowerLimitProfiler(gpu, eta=eta, max_power_w=250.0, params=params or ProfileParams(2, 5), **kw)
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
        assert profiler.state is not ProfilerState.DONE
        step(profiler, clock)
    assert profiler.done
    table = profiler.profile()
    assert list(table.columns) == list(PROFILE_COLUMNS)
    assert list(table["power_limit_w"]) == [250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    for row in table.itertuples():
        assert row.throughput == pytest.approx(BATCH / STEP_S * model.relative_throughput(row.power_limit_w))
        assert row.average_power_w == pytest.approx(model.power_w(row.power_limit_w))
        assert row.simulated
    expected = model.optimal_limit(candidate_limits(gpu), eta=eta, max_power_w=250.0)
    assert profiler.chosen_limit == expected
    assert gpu.get_power_limit(0) == expected
    assert {0.0: 250.0, 0.5: 175.0, 1.0: 100.0}[eta] == expected  # interior optimum at eta 0.5


def test_an_epoch_ending_mid_window_cancels_it_and_the_limit_restarts_next_epoch():
    gpu, profiler, clock = make(params=ProfileParams(2, 5))
    for _ in range(10):  # 250 W: 2 warm-up + 5 profiled; 225 W: 2 warm-up + 1 profiled, then the epoch ends
        step(profiler, clock)
    assert profiler.state is ProfilerState.PROFILING and gpu.get_power_limit(0) == 225.0
    profiler.on_epoch_end()
    assert profiler.state is ProfilerState.READY and profiler.cancelled_windows == 1
    clock.now += 100.0  # eval and epoch-boundary work: must not leak into any window
    for _ in range(6):  # 225 W restarts from warm-up; one step short of finishing its window
        step(profiler, clock)
    assert [r["power_limit_w"] for r in profiler.rows] == [250.0]
    step(profiler, clock)
    assert [r["power_limit_w"] for r in profiler.rows] == [250.0, 225.0]
    expected = BATCH / STEP_S * PowerModel().relative_throughput(225.0)
    assert profiler.rows[1]["throughput"] == pytest.approx(expected)


def test_eval_is_profiled_once_at_the_chosen_limit():
    _, profiler, clock = make(params=ProfileParams(0, 1))
    profiler.on_eval_begin()  # before profiling is done: nothing measured
    profiler.on_eval_end(100)
    assert profiler.rows == []
    for _ in range(7):
        step(profiler, clock)
    for _ in range(2):
        profiler.on_eval_begin()
        clock.now += 0.5
        profiler.on_eval_end(1000)
    evals = [r for r in profiler.rows if r["phase"] == "eval"]
    assert len(evals) == 1 and evals[0]["power_limit_w"] == profiler.chosen_limit == 175.0
    assert evals[0]["throughput"] == pytest.approx(1000 / 0.5 * PowerModel().relative_throughput(175.0))


def test_restore_puts_the_maximum_back_on_an_untuned_gpu():
    gpu, profiler, clock = make()
    for _ in range(9):
        step(profiler, clock)
    assert gpu.get_power_limit(0) == 225.0
    profiler.restore()
    assert gpu.get_power_limit(0) == 250.0


def test_a_reused_profile_skips_profiling():
    _, first, clock = make(eta=1.0, params=ProfileParams(0, 1))
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
    assert choose_limit(table, eta=0.5, max_power_w=300) == 200.0


def test_params_shrink_to_fit_a_short_epoch_and_reject_bad_values():
    assert ProfileParams().fit(1000) == ProfileParams()
    small = ProfileParams().fit(16)
    assert small.warmup_iters + small.profile_iters <= 16 and small.profile_iters >= 1
    with pytest.raises(ValueError, match="profile_iters"):
        ProfileParams(profile_iters=0)


def test_restore_keeps_a_cap_set_before_the_trial():
    clock = ManualClock()
    gpu = SimulatedGPU(real_clock=clock)
    gpu.set_power_limit(0, 200.0)  # an admin's cap
    profiler = PowerLimitProfiler(gpu, eta=0.5, max_power_w=250.0, params=ProfileParams(2, 5))
    for _ in range(3):
        step(profiler, clock)
    assert gpu.get_power_limit(0) == 250.0  # profiling starts from the maximum
    profiler.restore()
    assert gpu.get_power_limit(0) == 200.0
