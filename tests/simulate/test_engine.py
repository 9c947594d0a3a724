"""Simulator rules on a hand-made trace whose every figure can be worked out on paper.

eta 0.5, MAXPOWER 200 W, so a per-epoch cost is 0.5 * energy + 100 * time:
  bs 16: 100 W -> 10 s, 900 J (cost 1450);  200 W -> 6 s, 1080 J (cost 1140)  => profiler picks 200 W
  bs 32: 100 W ->  5 s, 500 J (cost  750);  200 W -> 4 s,  760 J (cost  780)  => 100 W
  bs 64: 100 W ->  3 s, 300 J (cost  450);  200 W -> 2 s,  400 J (cost  400)  => 200 W
Runs (epochs to target): bs 16 [4, 4]; bs 32 [2, 3]; bs 64 [never, 5].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.policy.base import Decision
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.simulate.engine import Simulator
from zeus_kfp.simulate.trace import POWER_COLUMNS, TRAIN_COLUMNS, SizeTrace, load_workload_trace, read_trace
from zeus_kfp.simulate.trace_trial import trace_profile

POWER = [
    (16, 100, 10, 90),
    (16, 200, 6, 180),
    (32, 100, 5, 100),
    (32, 200, 4, 190),
    (64, 100, 3, 100),
    (64, 200, 2, 200),
]
RUNS = {16: [4, 4], 32: [2, 3], 64: [None, 5]}


@pytest.fixture
def trace_files(tmp_path):
    train = [
        ("toy", "net", b, "sgd", 0.1, run + 1, 0.5, epoch)
        for b, epochs in RUNS.items()
        for run, epoch in enumerate(epochs)
    ]
    # Another target of the same workload must be ignored.
    train += [("toy", "net", 16, "sgd", 0.1, 1, 0.9, None)]
    tp = tmp_path / "train.csv"
    pd.DataFrame(
        train, columns=["dataset", "network", "batch_size", "optimizer", "learning_rate", "run", *TRAIN_COLUMNS[-2:]]
    ).to_csv(tp, index=False)
    pp = tmp_path / "power.csv"
    rows = [("toy", "net", b, "sgd", pl, t, w) for b, pl, t, w in POWER]
    pd.DataFrame(rows, columns=list(POWER_COLUMNS)).to_csv(pp, index=False)
    return tp, pp


@pytest.fixture
def sim(trace_files):
    tp, pp = trace_files
    trace = load_workload_trace(
        read_trace(tp, TRAIN_COLUMNS, "train"),
        read_trace(pp, POWER_COLUMNS, "power"),
        dataset="toy",
        network="net",
        optimizer="sgd",
        target_metric=0.5,
    )
    spec = JobSpec("toy", (16, 32, 64), 32, 0.5, max_epochs=6, max_attempts=3, max_power_w=trace.max_power_w)
    return Simulator(spec, trace)


@dataclass
class Scripted:
    """A stand-in policy that plays a fixed list of (batch size, threshold), one per decision."""

    script: list[tuple[int, float | None]]
    name: str = "scripted"

    def decide(self, spec, history, seed):
        self.seen = [*getattr(self, "seen", []), [r.status for r in history]]
        b, threshold = self.script[min(len(history), len(self.script) - 1)]
        return Decision(b, threshold, "scripted", "")

    def arm_states(self, spec, history):
        return []

    def stop_threshold(self, spec, history):
        """Zeus's rule, written out here: beta x the lowest spend of a recurrence that reached (None before).
        A recurrence's spend is the sum of its trials' costs."""
        spends: dict[int, float] = {}
        reached = set()
        for t in history:
            if t.cost is not None:
                spends[t.recurrence] = spends.get(t.recurrence, 0.0) + t.cost
            if t.reached:
                reached.add(t.recurrence)
        best = min((spends[r] for r in reached), default=None)
        return None if best is None or spec.beta_knob is None else spec.beta_knob * best


def test_profiler_pick_and_trace_join(sim):
    assert sim.trace.batch_sizes == (16, 32, 64) and sim.trace.max_power_w == 200.0
    assert sim.trace.power_limits == (100.0, 200.0)
    picks = {b: choose_limit(trace_profile(sim.trace.sizes[b]), sim.spec.cost_model.rate) for b in (16, 32, 64)}
    assert picks == {16: 200.0, 32: 100.0, 64: 200.0}
    assert list(sim.trace.sizes[16].target_epochs) == [4, 4]  # the 0.9 target row is not this job's


def test_profiler_ties_go_to_the_higher_limit(sim):
    # 0.5 E + 100 t: 0.5 * 500 + 500 == 0.5 * 700 + 400 == 750 at both limits.
    tied = SizeTrace(32, np.array([2.0]), np.array([100.0, 200.0]), np.array([5.0, 4.0]), np.array([500.0, 700.0]))
    assert choose_limit(trace_profile(tied), sim.spec.cost_model.rate) == 200.0


def test_oracle_and_default_config(sim):
    # Oracle: bs 64 has a run that never reaches, so bs 32 at 100 W, 2.5 epochs expected.
    assert sim.oracle.cost == pytest.approx(2.5 * 750)
    assert sim.oracle.energy_j == pytest.approx(2.5 * 500) and sim.oracle.time_s == pytest.approx(12.5)
    # Default config: b0 = 32 at the largest limit (200 W).
    assert sim.default.cost == pytest.approx(2.5 * 780) and sim.default.time_s == pytest.approx(10.0)
    assert sim.default_num_recurrences() == 2 * 3 * 2


def test_first_epoch_of_a_new_size_profiles_every_limit(sim):
    result = sim.run(Scripted([(16, None)]), seed=0, num_recurrences=2)
    first, second = result.history
    # First trial of 16: one epoch at the mean over limits, then 3 at 200 W.
    assert first.energy_j == pytest.approx((900 + 1080) / 2 + 3 * 1080)
    assert first.time_s == pytest.approx((10 + 6) / 2 + 3 * 6)
    assert second.energy_j == pytest.approx(4 * 1080) and second.time_s == pytest.approx(24)
    assert first.cost == pytest.approx(0.5 * 4230 + 0.5 * 200 * 26)  # eta 0.5, the trace's 200 W
    assert result.totals.cost == pytest.approx(first.cost + second.cost)
    assert [r.power_limits for r in result.rows] == [[200.0], [200.0]]


def test_threshold_caps_epochs_and_a_capped_trial_has_not_reached(sim):
    # floor(3000 / 1140) = 2 epochs < 4 needed: stopped, retried up to max_attempts (3), never reached.
    result = sim.run(Scripted([(16, 3000.0)]), seed=0, num_recurrences=1)
    assert [r.status for r in result.history] == [TrialStatus.COST_EXCEEDED] * 3
    first = result.history[0]
    assert first.energy_j == pytest.approx(990 + 1080) and first.time_s == pytest.approx(8 + 6)
    row = result.rows[0]
    assert not row.reached and row.num_trials == 3 and row.threshold == 3000.0


def test_max_epochs_cap_is_not_reached(sim):
    spec = sim.spec.with_changes(max_epochs=3)
    s = Simulator(spec, sim.trace)
    result = s.run(Scripted([(16, None)]), seed=0, num_recurrences=1)
    assert result.history[0].status is TrialStatus.NOT_REACHED


def test_a_threshold_below_one_epoch_still_runs_the_first_epoch(sim):
    # 1000 < 1140 per epoch: the trial still runs its first (profiling) epoch, as ZeusDataLoader does,
    # and counts. Then 32 without a threshold reaches.
    result = sim.run(Scripted([(16, 1000.0), (32, None), (16, None)]), seed=3, num_recurrences=2)
    stopped, reached, later = result.history
    assert stopped.status is TrialStatus.COST_EXCEEDED
    assert stopped.energy_j == pytest.approx((900 + 1080) / 2) and stopped.time_s == pytest.approx(8)
    assert reached.status is TrialStatus.REACHED and result.rows[0].num_trials == 2
    assert result.rows[0].cost == pytest.approx(stopped.cost + reached.cost)
    # 16 was profiled by the stopped trial: its next trial reuses that profile, 200 W from the first epoch.
    assert later.energy_j == pytest.approx(4 * 1080)
    assert [t.profiled for t in result.trials] == [True, True, False]
    assert result.totals.cost == pytest.approx(stopped.cost + reached.cost + later.cost)


def test_a_stale_profile_is_measured_again(sim):
    s = Simulator(sim.spec.with_changes(reprofile_after=2), sim.trace)
    result = s.run(Scripted([(16, None)]), seed=0, num_recurrences=4)
    # measured in recurrence 1, reused in 2, two recurrences old in 3: measured again, reused in 4
    assert [t.profiled for t in result.trials] == [True, False, True, False]
    assert result.history[2].energy_j == pytest.approx(result.history[0].energy_j)


def test_overlapping_recurrences_see_each_others_trials_in_flight(sim):
    policy = Scripted([(16, None)])
    result = sim.run(policy, seed=0, num_recurrences=3, in_flight=2)
    # recurrences 1 and 2 start together: the second decision sees the first trial dispatched, unfinished
    assert policy.seen[:2] == [[], [TrialStatus.DISPATCHED]]
    assert [t.recurrence for t in result.trials] == [1, 2, 3]
    # both in-flight trials profiled (neither had finished); the third reuses the first one's profile
    assert [t.profiled for t in result.trials] == [True, True, False]
    with pytest.raises(ValueError, match="in_flight"):
        sim.run(policy, 0, 3, in_flight=0)


def test_same_seed_same_simulation_different_seed_samples_other_runs(sim):
    policy = Scripted([(64, None)])
    a, b = sim.run(policy, 5, 20), sim.run(policy, 5, 20)
    assert [r.status for r in a.history] == [r.status for r in b.history]
    outcomes = {tuple(r.status for r in sim.run(policy, seed, 20).history) for seed in range(4)}
    assert len(outcomes) > 1
    statuses = {r.status for r in a.history}
    assert statuses <= {TrialStatus.REACHED, TrialStatus.NOT_REACHED}


def test_bad_inputs_name_what_is_wrong(sim, trace_files, tmp_path):
    with pytest.raises(ValueError, match="num_recurrences"):
        sim.run(Scripted([(16, None)]), 0, 0)
    with pytest.raises(ValueError, match=r"batch_sizes.*\[128\]"):
        Simulator(sim.spec.with_changes(batch_sizes=(16, 32, 128)), sim.trace)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"dataset": ["toy"]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="missing columns"):
        read_trace(bad, POWER_COLUMNS, "power")
    with pytest.raises(FileNotFoundError, match="power trace not found"):
        read_trace(tmp_path / "nope.csv", POWER_COLUMNS, "power")
    with pytest.raises(ValueError, match="no rows in the train trace"):
        load_workload_trace(
            read_trace(trace_files[0], TRAIN_COLUMNS, "train"),
            read_trace(trace_files[1], POWER_COLUMNS, "power"),
            dataset="toy",
            network="net",
            optimizer="adam",
            target_metric=0.5,
        )
