"""The optimum selectors on a profile worked by hand, and a selector injected into the live profiler."""

from __future__ import annotations

import pandas as pd
import pytest

from zeus_kfp.power import (
    Done,
    Energy,
    Eval,
    MaxSlowdown,
    PowerLimitProfiler,
    ProfileParams,
    SimulatedGPU,
    Time,
    ZeusCost,
)
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.profiles import PowerProfile

from .conftest import rate

# Per unit of work: energy p/t = 30, 26.7, 25 J; time 1/t = 0.100, 0.111, 0.167 s; Zeus cost at eta 0.5 and
# 300 W, (0.5 p + 150) / t = 30, 30, 37.5 (300 W and 250 W tie: the higher limit wins, same cost and faster).
PROFILE = pd.DataFrame(
    {
        "phase": ["train", "train", "train", "eval"],
        "power_limit_w": [300.0, 250.0, 200.0, 200.0],
        "average_power_w": [300.0, 240.0, 150.0, 1.0],
        "throughput": [10.0, 9.0, 6.0, 1e9],  # the eval row is never chosen from
        "simulated": [True] * 4,
    }
)


@pytest.mark.parametrize(
    ("selector", "limit"),
    [
        (ZeusCost(rate(0.5, 300.0)), 300.0),
        (Energy(), 200.0),
        (Time(), 300.0),
        (MaxSlowdown(1.2), 250.0),  # 9 >= 10 / 1.2; 6 is not
        (MaxSlowdown(2.0), 200.0),
    ],
)
def test_each_selector_picks_its_optimum(selector, limit) -> None:
    assert choose_limit(PowerProfile.of(PROFILE), selector) == limit


def test_a_cost_rate_is_the_zeus_cost_selector_and_a_slowdown_below_one_is_refused() -> None:
    assert choose_limit(PowerProfile.of(PROFILE), rate(1.0, 300.0)) == 200.0  # eta 1: energy only
    with pytest.raises(ValueError, match="factor"):
        MaxSlowdown(0.9)


def test_an_injected_selector_decides_and_eval_is_its_own_state() -> None:
    # The simulated V100's throughput rises with the limit (its model: a smooth min of limit and demand),
    # so Time picks the maximum; within a 2x slowdown every limit qualifies (its compute alone runs at over
    # 0.7x the speed at 100 W), so the lowest, 100 W.
    for selector, limit in ((Time(), 250.0), (MaxSlowdown(2.0), 100.0)):
        gpu = SimulatedGPU()
        profiler = PowerLimitProfiler(gpu, selector=selector, params=ProfileParams.zeus(0, 1))
        for _ in range(7):
            profiler.on_step_begin()
            gpu.account_work(32)
            profiler.on_step_end(32)
        assert profiler.state == Eval(limit) and gpu.get_power_limit(0) == limit
        profiler.on_eval_begin()
        gpu.account_work(100)
        profiler.on_eval_end(100)
        assert profiler.state == Done(limit) and profiler.profile().rows["phase"].tolist()[-1] == "eval"
    with pytest.raises(ValueError, match="selector or a cost_rate"):
        PowerLimitProfiler(SimulatedGPU(), selector=Time(), cost_rate=rate(0.5, 250.0))
