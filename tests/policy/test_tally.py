"""The history as columns (zeus_kfp.trials) and the statistics computed over them (zeus_kfp.policy.tally).

The expected figures here come from plain Python loops over the records, written in the test, or
from hand: never from the code under test."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tests.policy.helpers import make_spec, record
from zeus_kfp.job import TrialStatus
from zeus_kfp.policy import POLICY_NAMES, get_policy
from zeus_kfp.policy.history import read_history, tally_history
from zeus_kfp.policy.recurrences import running_spend
from zeus_kfp.trial_history import TrialHistory
from zeus_kfp.trials import Trial


def test_a_history_as_columns_gives_back_its_records():
    records = [
        record(1, 1, 64, "reached", 12.5),
        record(2, 2, 32, "dispatched"),
        Trial(2, 3, 16, TrialStatus.FAILED),  # a result with no figures
        record(3, 4, 128, "oom", 3.0),
    ]
    history = TrialHistory.of(records)
    assert list(history) == records and history == records and len(history) == 4
    assert history[1].cost is None and history[2].time_s is None  # None travels as NaN and back
    assert history[1:3] == records[1:3] and history[-1] == records[-1]
    assert TrialHistory.of(history) is history
    assert TrialHistory.of([]) == [] and history != records[:3]


def test_records_are_taken_in_trial_order_then_recurrence():
    records = [record(2, 5, 64, "reached", 1.0), record(1, 5, 32, "reached", 2.0), record(1, 3, 16, "reached", 3.0)]
    ordered = TrialHistory.of(records).in_trial_order()
    assert [(r.trial, r.recurrence) for r in ordered] == [(3, 1), (5, 1), (5, 2)]


def test_a_recurrences_running_spend_is_its_sum_in_trial_order_to_the_last_bit():
    rng = random.Random(3)
    groups = [rng.randrange(40) for _ in range(2000)]
    # Magnitudes far apart, so that a different order of additions gives different bits.
    spend = [rng.choice([0.1, 1e-7, 3.3e5, 7.77e11]) * rng.random() for _ in groups]
    expected, totals = [], {}
    for g, s in zip(groups, spend, strict=True):
        totals[g] = totals.get(g, 0.0) + s
        expected.append(totals[g])
    got = running_spend(np.array(groups), np.array(spend))
    assert got.tolist() == expected


def test_a_miss_charged_in_a_window_carries_its_retry_and_a_miss_still_open_carries_none():
    spec = make_spec(window_size=3, batch_sizes=(32, 64), default_batch_size=64)
    history = [
        record(1, 1, 64, "not_reached", 10.0),  # its recurrence then reached at 32 for 4.0: charge 4.0
        record(1, 2, 32, "reached", 4.0),
        record(2, 3, 64, "cost_exceeded", 7.0),  # recurrence 2 has not reached: charge unknown
        record(3, 4, 64, "reached", 9.0),
        record(4, 5, 64, "reached", 8.0),
    ]
    tally = tally_history(spec, history)
    assert tally.window(64) == [(7.0, False, None), (9.0, True, None), (8.0, True, None)]  # the last three
    assert tally.window(32) == [(4.0, True, None)]
    whole = tally_history(spec.with_changes(window_size=0), history).arm(64)
    assert (whole.n, whole.pending) == (4, 1) and whole.known == pytest.approx(4.0)
    assert (whole.reached_n, whole.reached_total, whole.rep_n) == (2, 17.0, 2)
    # Recurrences that reached spent 10 + 4, 9 and 8; the cheapest single reach is 32's.
    assert tally.best_spend == pytest.approx(8.0) and tally.best_cost == 4.0 and tally.best_size == 32
    assert tally.max_trial == 5 and tally.min_oom is None


def test_equal_costs_have_no_spread_exactly():
    spec = make_spec(batch_sizes=(64,), default_batch_size=64)
    arm = tally_history(spec, [record(r, r, 64, "reached", 0.1) for r in range(1, 8)]).arm(64)
    assert arm.m2 == 0.0 and arm.mean == 0.1 and arm.rep_m2 == 0.0


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_columns_records_and_any_order_decide_alike(policy_name):
    rng = random.Random(11)
    spec = make_spec(beta_knob=2.0)
    statuses = ["reached", "reached", "not_reached", "cost_exceeded", "failed", "dispatched"]
    for case in range(30):
        records = [
            record(rng.randrange(1, 12), trial, rng.choice(spec.batch_sizes), rng.choice(statuses), rng.uniform(1, 99))
            for trial in range(1, rng.randrange(2, 40))
        ]
        shuffled = rng.sample(records, len(records))
        policy = get_policy(policy_name)
        decisions = {repr(policy.decide(spec, h, case)) for h in (records, shuffled, TrialHistory.of(shuffled))}
        assert len(decisions) == 1
        states = {repr(policy.arm_states(spec, h)) for h in (records, TrialHistory.of(shuffled))}
        assert len(states) == 1


def test_an_oom_replays_the_walk_over_the_sizes_left():
    # Zeus's walk from 32 over (8, 16, 32, 64): 32 reached, 16 reached, 8 missed; then 64 ran out of memory.
    # Over the sizes left (8, 16, 32) round 1 is over, and round 2 starts at its cheapest size, 16.
    spec = make_spec(batch_sizes=(8, 16, 32, 64), default_batch_size=32)
    history = [
        record(1, 1, 32, "reached", 10.0),
        record(2, 2, 16, "reached", 8.0),
        record(3, 3, 8, "not_reached", 12.0),
        record(4, 4, 64, "oom", 1.0),
    ]
    view = read_history(spec, history)
    assert view.feasible == (8, 16, 32)
    decision = get_policy("zeus-nsdi23").decide(spec, history, 0)
    assert (decision.stage, decision.batch_size) == ("exploration", 16)
    assert "round 2" in decision.reason
