"""One cost function, priced the same for 1, 4 and 8 GPUs by every part that prices: the job, the
JIT profiler's choice, the report's default-config estimate and the trace-backed trial.

Numbers worked by hand. eta 0.5, max power 300 W per GPU, n GPUs:
  cost(E, t)      = 0.5 E + 0.5 * 300 * n * t
  cost_rate(P, r) = (0.5 P + 150 n) / r          (P: power of all n GPUs, r: units of work per second)
A two-limit profile with P per GPU 280 W at 300 W / 190 W at 200 W and r = 100 / 80:
  rate(300) = (140 n + 150 n) / 100 = 2.9 n,  rate(200) = (95 n + 150 n) / 80 = 3.0625 n
so 300 W is the choice for every n. Pricing time for one GPU only (150, not 150 n: what the report
once did) would pick 200 W at n = 8: (1120 + 150) / 100 = 12.7 > (760 + 150) / 80 = 11.375.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from zeus_kfp.cost import Figures
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.report import default_config_cost
from zeus_kfp.simulate.trace import SizeTrace
from zeus_kfp.simulate.trace_trial import run_trace_trial
from zeus_kfp.trials import Trial

GPUS = [1, 4, 8]


def spec(n: int) -> JobSpec:
    return JobSpec("cost-job", (64, 128), 128, 0.9, 10, eta_knob=0.5, max_power_w=300.0, num_gpus=n)


def profile(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "phase": ["train", "train"],
            "power_limit_w": [300.0, 200.0],
            "average_power_w": [280.0 * n, 190.0 * n],
            "throughput": [100.0, 80.0],
            "simulated": [True, True],
        }
    )


@pytest.mark.parametrize("n", GPUS)
def test_job_cost_and_cost_rate_price_time_for_every_gpu(n):
    assert spec(n).cost_model.cost(1000.0, 10.0) == pytest.approx(500.0 + 1500.0 * n)
    assert spec(n).cost_model.rate(200.0 * n, 50.0) == pytest.approx(5.0 * n)
    assert spec(n).cost_model.rate(100.0, 0.0) == float("inf")


@pytest.mark.parametrize("n", GPUS)
def test_the_profilers_choice_is_the_same_for_every_gpu_count(n):
    assert choose_limit(PowerProfile.of(profile(n)), spec(n).cost_model.rate) == 300.0


@pytest.mark.parametrize("n", GPUS)
def test_the_reports_default_config_scales_by_the_same_rate(n):
    s = spec(n)
    trial = {
        "recurrence": 1,
        "recurrence_id": "r1",
        "trial": 1,
        "attempt": 1,
        "batch_size": 128,
        "power_limit_w": 200.0,
        "status": "reached",
        "finished": True,
        "energy_j": 1000.0,
        "time_s": 10.0,
        "cost": s.cost_model.cost(1000.0, 10.0),
    }
    profiles = profile(n).assign(batch_size=128, trial=1)
    baseline = default_config_cost(pd.DataFrame([trial]), profiles, s)
    assert baseline.cost == pytest.approx((500.0 + 1500.0 * n) * 2.9 / 3.0625)


@pytest.mark.parametrize("n", GPUS)
def test_a_trace_backed_trial_prices_its_epochs_for_every_gpu(n):
    # per epoch: 300 W -> 2 s, 560 J; 200 W -> 2.5 s, 475 J (one run: the target at epoch 2)
    size = SizeTrace(128, np.array([2.0]), np.array([200.0, 300.0]), np.array([2.5, 2.0]), np.array([475.0, 560.0]))
    run = run_trace_trial(spec(n), size, cost_threshold=None, seed=0, reuse=None, source="simulated (trace: toy)")
    # epoch cost: 300 W 0.5*560 + 300 n = 280 + 300 n; 200 W 237.5 + 375 n: 300 W is cheaper for every n
    assert run.result.power_limit_w == 300.0 and run.result.status is TrialStatus.REACHED
    # first epoch profiles (mean over limits: 517.5 J, 2.25 s), the second runs at 300 W
    energy, time = 517.5 + 560.0, 2.25 + 2.0
    assert (run.result.energy_j, run.result.time_s) == pytest.approx((energy, time))
    assert run.result.cost == pytest.approx(0.5 * energy + 150.0 * n * time)


def test_a_recurrences_figures_are_the_sum_of_its_trials_and_a_trial_without_figures_adds_nothing():
    """Figures.of is the one sum of what trials spent (the run's summary, the simulator, the replay)."""
    trials = [
        Trial(1, 1, 64, TrialStatus.NOT_REACHED, 1500.0, 10.0, 1000.0),
        Trial(1, 2, 128, TrialStatus.DISPATCHED),  # no figures yet
        Trial(1, 3, 128, TrialStatus.REACHED, 700.0, 4.0, 400.0),
    ]
    assert Figures.of(trials) == Figures(2200.0, 1400.0, 14.0)
    assert Figures.of([]) == Figures(0.0, 0.0, 0.0)
