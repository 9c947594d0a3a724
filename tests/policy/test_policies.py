"""Policy-level contract: names, thresholds, determinism across processes, the default's own rules."""

from __future__ import annotations

import numpy as np
import pytest

from tests.policy.helpers import make_spec, record
from zeus_kfp.job import TrialStatus
from zeus_kfp.policy import POLICY_NAMES, get_policy
from zeus_kfp.policy.history import retry_charges
from zeus_kfp.policy.turning_walk import TurningWalkPolicy
from zeus_kfp.trials import Trial


def test_names_and_unknown_name_error():
    assert set(POLICY_NAMES) == {"turning-walk", "zeus-nsdi23"}  # named by algorithm
    assert {get_policy(n).name for n in POLICY_NAMES} == set(POLICY_NAMES)
    assert get_policy("default").name == "turning-walk"  # the alias users and schedules keep
    with pytest.raises(ValueError, match=r"policy='greedy'.*turning-walk, zeus-nsdi23, default \(= turning-walk\)"):
        get_policy("greedy")


def test_nsdi23_threshold_is_beta_times_lowest_reached_recurrence_spend():
    spec, policy = make_spec(beta_knob=2.0), get_policy("zeus-nsdi23")
    assert policy.decide(spec, [], 0).cost_threshold is None  # nothing finished yet
    history = [
        record(0, 0, 128, "not_reached", 30.0),
        record(0, 1, 64, "reached", 10.0),  # recurrence 0 spent 40
        record(1, 2, 32, "cost_exceeded", 5.0),  # recurrence 1 never reached: not a reference
        # The simulator's 0-epoch quirk: a penalty cost, but nothing spent.
        Trial(2, 3, 32, TrialStatus.COST_EXCEEDED, 1e6, time_s=0.0, energy_j=0.0),
        record(2, 4, 64, "reached", 18.0),  # recurrence 2 spent 18
    ]
    # Zeus's rule: beta x 18, exploring or not.
    assert policy.decide(spec, history, 0).cost_threshold == pytest.approx(36.0)
    assert policy.decide(spec.with_changes(beta_knob=None), history, 0).cost_threshold is None


def test_turning_walk_threshold_is_beta_times_the_cheapest_size_mean():
    """beta x the lowest mean cost over the sizes that reached (each mean over all its observations), so
    one short run cannot set it: with 64 at 10 and 18 the basis is 14, not 10 (nor 18, the lowest
    recurrence spend), and 32, which never reached, is no basis however little its trials cost."""
    spec, policy = make_spec(beta_knob=2.0), get_policy("turning-walk")
    assert policy.decide(spec, [], 0).cost_threshold is None  # nothing finished yet
    history = [
        record(0, 0, 128, "not_reached", 30.0),
        record(0, 1, 64, "reached", 10.0),
        record(1, 2, 32, "cost_exceeded", 5.0),
        record(2, 3, 64, "reached", 18.0),
    ]
    assert policy.decide(spec, history, 0).cost_threshold == pytest.approx(28.0)
    # A run cut short by the early stop counts at what it cost, a lower bound: the mean goes up, not down.
    history += [record(3, 4, 64, "cost_exceeded", 28.0)]
    assert policy.decide(spec, history, 0).cost_threshold == pytest.approx(2.0 * (10.0 + 18.0 + 28.0) / 3)
    # Many runs do not drag it to the luckiest one (Zeus's basis would fall to 2 x 4 = 8).
    history += [record(4 + i, 5 + i, 64, "reached", c) for i, c in enumerate([4.0, 16.0, 14.0, 15.0])]
    assert policy.decide(spec, history, 0).cost_threshold == pytest.approx(2.0 * 105.0 / 7)
    assert policy.decide(spec.with_changes(beta_knob=None), history, 0).cost_threshold is None


def exploit_history():
    """A finished one-pass exploration where 32 and 64 are close and 128 is clearly worse."""
    h = [
        record(0, 0, 128, "reached", 30.0),
        record(1, 1, 64, "reached", 10.4),
        record(2, 2, 32, "reached", 10.0),
        record(3, 3, 16, "cost_exceeded", 15.0),
        record(4, 4, 256, "not_reached", 40.0),
    ]
    h += [record(5 + i, 5 + i, 32 if i % 2 else 64, "reached", 10.0 + 0.3 * (i % 3)) for i in range(6)]
    h.append(record(11, 11, 128, "reached", 31.0))
    return h


def test_default_only_samples_contenders():
    spec, policy = make_spec(), get_policy("default")
    history = exploit_history()
    picks = {policy.decide(spec, history, seed).batch_size for seed in range(60)}
    assert picks == {32, 64}  # 128 costs 3x the best: never a contender
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    # 16 missed, and its recurrence has no retry on record: it is charged its 15.0 plus what a retry costs
    # at best, the cheapest mean reached cost: 32's (10.0 + 10.3 + 10.0 + 10.6) / 4 = 10.225.
    assert states[16].posterior_mean == pytest.approx(15.0 + 10.225)
    assert states[16].pruned and not states[32].pruned


def test_default_gives_a_close_single_trial_a_second_look_when_trials_are_noisy():
    # Walk: 128 (10), 64 (13: worse right after the cheapest, go on), 32 (14: turn); up: 256 (12), the end.
    h = [record(k, k, b, "reached", c) for k, (b, c) in enumerate([(128, 10.0), (64, 13.0), (32, 14.0), (256, 12.0)])]
    h += [record(4 + k, 4 + k, 128, "reached", c) for k, c in enumerate([8.0, 12.0, 8.0, 12.0])]
    spec = make_spec()
    # Pooled noise: 128's trials after its first, var (ddof 1) 16/3 over mean 10 squared, 3 degrees of
    # freedom, shrunk toward 0.1 with weight 2: cv^2 = (2 * 0.01 + 3 * 0.05333) / 5 = 0.036, cv = 0.1897.
    # 256's one trial (12) is 20 % over 128's mean (10), outside the 1.1 contender band, but within one
    # noise level: 12 * (1 - 0.1897) = 9.72 <= 10. So it is tried again; 64 (13 * 0.81 = 10.5) is not.
    d = TurningWalkPolicy().decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (256, "exploitation") and "one observation" in d.reason
    # With 128's repeats all at 10 the pooled noise is the prior's, shrunk: cv^2 = 2 x 0.01 / 5, cv = 0.0632.
    # 256: 12 x (1 - 0.0632) = 11.24 > 10 and 12 > 11: not a contender; 128 alone is run, whatever the seed.
    h = h[:4] + [record(4 + k, 4 + k, 128, "reached", 10.0) for k in range(4)]
    assert {TurningWalkPolicy().decide(spec, h, seed).batch_size for seed in range(20)} == {128}


def test_zeus_policy_learns_from_exploration_misses_like_zeus():
    spec, policy = make_spec(num_pruning_rounds=1), get_policy("zeus-nsdi23")
    states = {a.batch_size: a for a in policy.arm_states(spec, exploit_history())}
    assert states[16].num_observations == 1 and states[16].posterior_mean == 15.0


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_the_order_the_history_comes_in_does_not_matter(policy_name):
    # In a new process too: tests/policy/test_properties.py decides generated histories in a subprocess.
    spec, policy = make_spec(), get_policy(policy_name)
    history = exploit_history() + exploit_history()[:6]
    history = [Trial(i, i, r.batch_size, r.status, r.cost, r.time_s, r.energy_j) for i, r in enumerate(history)]
    for seed in (1, 7):
        assert policy.decide(spec, list(reversed(history)), seed) == policy.decide(spec, history, seed)


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_randomness_comes_from_seed_and_history(policy_name):
    spec, policy = make_spec(num_pruning_rounds=1), get_policy(policy_name)
    history = exploit_history()
    picks = [policy.decide(spec, history, seed).batch_size for seed in range(40)]
    assert len(set(picks)) > 1  # close arms: different seeds sample differently
    assert picks == [policy.decide(spec, history, seed).batch_size for seed in range(40)]


def test_zeus_policy_window_keeps_only_recent_rewards():
    spec, policy = make_spec(num_pruning_rounds=1, window_size=1), get_policy("zeus-nsdi23")
    history = exploit_history()  # latest costs: 64 -> 10.3, 32 -> 10.6; with a window of one, 64 is surely best
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    assert states[64].num_observations == 1 and states[64].posterior_mean == pytest.approx(10.3)
    assert {policy.decide(spec, history, seed).batch_size for seed in range(10)} == {64}


def test_a_miss_is_charged_the_rest_of_its_recurrence_up_to_the_reach():
    # Trials in order; recurrences 1 and 2 interleave. Recurrence 1: 3 (miss), 4 (miss), 5 (reached);
    # recurrence 2: 6 (miss), then 7 still in flight (not finished: no spend); recurrence 3: 2 then 8 reached.
    recurrences = np.array([1, 2, 1, 1, 2, 3, 3])
    spend = np.array([3.0, 6.0, 4.0, 5.0, 7.0, 2.0, 8.0])
    finished = np.array([True, True, True, True, False, True, True])
    reached = np.array([False, False, False, True, False, False, True])
    charges = retry_charges(recurrences, spend, finished, reached, stand_in=100.0)
    # 3 -> 4 + 5; 4 -> 5; recurrence 2 has not reached: the stand-in; 2 -> 8; reaching trials keep the stand-in.
    assert charges.tolist() == [9.0, 100.0, 5.0, 100.0, 100.0, 8.0, 100.0]
