"""The mid-trial early stop on the simulated clock: overlapping recurrences whose finishing order is fixed by
a hand-made trace, every figure worked out on paper.

The trace is test_engine's power table (eta 0.5, 200 W: a per-epoch cost is 0.5 * energy + 100 * time) with
runs that never vary, so no draw decides anything:
  bs 16: profiling epoch 8 s, 990 J; then 6 s, 1080 J (200 W); reaches at epoch 4;
  bs 32: profiling epoch 4.5 s, 630 J; then 5 s, 500 J (100 W, cost 750); reaches at epoch 2;
  bs 64: profiling epoch 2.5 s, 350 J; then 2 s, 400 J (200 W, cost 400); never reaches.
Two recurrences start together (K = 2), beta 1.2, one attempt each, no threshold at dispatch (nothing has
reached yet). Recurrence 1 runs bs 64, whose epochs end at 2.5, 4.5, 6.5, 8.5, 10.5, 12.5 s.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.simulate.test_engine import POWER, Scripted
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.policy import get_policy
from zeus_kfp.simulate.engine import Simulator
from zeus_kfp.simulate.trace import POWER_COLUMNS, TRAIN_COLUMNS, load_workload_trace
from zeus_kfp.simulate.workload_runs import build_simulator

RUNS = {16: [4, 4], 32: [2, 2], 64: [None, None]}


@pytest.fixture
def sim(tmp_path):
    train = [
        ("toy", "net", b, "sgd", run + 1, 0.5, epoch) for b, epochs in RUNS.items() for run, epoch in enumerate(epochs)
    ]
    power = [("toy", "net", b, "sgd", pl, t, w) for b, pl, t, w in POWER]
    trace = load_workload_trace(
        pd.DataFrame(train, columns=list(TRAIN_COLUMNS)),
        pd.DataFrame(power, columns=list(POWER_COLUMNS)),
        dataset="toy",
        network="net",
        optimizer="sgd",
        target_metric=0.5,
    )
    spec = JobSpec(
        "toy", (16, 32, 64), 32, 0.5, max_epochs=6, max_attempts=1, beta_knob=1.2, max_power_w=trace.max_power_w
    )
    return Simulator(spec, trace)


def test_a_result_that_finishes_after_a_trial_started_stops_it_at_its_next_epoch_end(sim):
    # Recurrence 2 runs bs 32: reached at 4.5 + 5 = 9.5 s, spending 0.5 * (630 + 500) + 100 * 9.5 = 1515.
    # From 9.5 s the threshold is 1.2 x 1515 = 1818: bs 64 may run floor(1818 / 400) = 4 epochs. At its
    # epoch end at 8.5 s (epoch 4) nothing had reached; at 10.5 s (epoch 5) it has run past 4: stopped there.
    result = sim.run(Scripted([(64, None), (32, None)]), seed=0, num_recurrences=2, in_flight=2)
    first, second = result.history
    assert (second.recurrence, second.status) == (2, TrialStatus.REACHED)
    assert second.time_s == pytest.approx(9.5) and second.cost == pytest.approx(1515)
    assert (first.recurrence, first.status) == (1, TrialStatus.COST_EXCEEDED)
    assert first.time_s == pytest.approx(10.5) and first.energy_j == pytest.approx(350 + 4 * 400)
    assert first.cost == pytest.approx(0.5 * 1950 + 100 * 10.5)
    assert result.rows[0].trials[0].num_epochs == 5
    assert result.rows[0].trials[0].cost_threshold is None  # what it was dispatched with


def test_without_the_live_read_the_same_trial_runs_to_max_epochs(sim):
    result = sim.run(Scripted([(64, None), (32, None)]), seed=0, num_recurrences=2, in_flight=2, live_stop=False)
    first = result.history[0]
    assert first.status is TrialStatus.NOT_REACHED
    assert first.time_s == pytest.approx(12.5) and first.energy_j == pytest.approx(350 + 5 * 400)


def test_a_result_that_finishes_after_the_trial_changes_nothing(sim):
    # Recurrence 2 runs bs 16 instead: reached at 8 + 3 x 6 = 26 s, after bs 64's last epoch end (12.5 s).
    result = sim.run(Scripted([(64, None), (16, None)]), seed=0, num_recurrences=2, in_flight=2)
    first, second = result.history
    assert second.status is TrialStatus.REACHED and second.time_s == pytest.approx(26)
    assert first.status is TrialStatus.NOT_REACHED and first.time_s == pytest.approx(12.5)


def test_a_lower_dispatched_threshold_stands(sim):
    # Dispatched with 1000: floor(1000 / 400) = 2 epochs, stopped at its second epoch end (4.5 s), before
    # recurrence 2 reaches (9.5 s); the live 1818 would allow more, but a trial never gets more than it was given.
    result = sim.run(Scripted([(64, 1000.0), (32, None)]), seed=0, num_recurrences=2, in_flight=2)
    first = result.history[0]
    assert first.status is TrialStatus.COST_EXCEEDED and first.time_s == pytest.approx(4.5)


@pytest.mark.parametrize("policy", ["zeus-nsdi23", "turning-walk"])
def test_one_recurrence_at_a_time_is_untouched_by_the_live_read(policy):
    # K = 1: nothing else runs while a recurrence reaches, so every trial is what its dispatched threshold gives.
    sim = build_simulator("cifar100", power_trace="v100", eta=0.5)
    live = sim.run(get_policy(policy), 3)
    assert live.trials == sim.run(get_policy(policy), 3, live_stop=False).trials
    if policy == "zeus-nsdi23":
        assert any(t.status is TrialStatus.COST_EXCEEDED for t in live.trials)  # the early stop did act
