"""Zeus's pruning walk, replayed from observations, and the failure semantics around it."""

from __future__ import annotations

import pytest

from tests.policy.helpers import SIZES, make_spec, record
from zeus_kfp.policy import NoFeasibleBatchSizeError, get_policy
from zeus_kfp.policy.pruning import replay_pruning

# The issue's vector: 8 fails in round 1; 16 and 256 fail in round 2; 32 is the cheapest.
COST = {8: 90.0, 16: 50.0, 32: 10.0, 64: 20.0, 128: 30.0, 256: 40.0}
FAILS = {1: {8}, 2: {16, 256}}
EXPECTED_ORDER = [128, 64, 32, 16, 8, 256, 32, 16, 64, 128, 256]


def drive(policy_name: str, spec, max_trials: int = 30):
    """Run the policy sequentially, each trial its own recurrence, until it leaves exploration."""
    policy = get_policy(policy_name)
    history, order = [], []
    for trial in range(max_trials):
        d = policy.decide(spec, history, seed=0)
        if d.stage != "exploration":
            return order, d, history
        order.append(d.batch_size)
        round_ = 1 if len(order) <= 6 else 2
        status = "not_reached" if d.batch_size in FAILS[round_] else "reached"
        history.append(record(trial, trial, d.batch_size, status, COST[d.batch_size]))
    raise AssertionError(f"still exploring after {max_trials} trials: {order}")


def test_issue_vector_order_and_survivors():
    spec = make_spec()
    order, decision, history = drive("zeus-nsdi23", spec)
    assert order == EXPECTED_ORDER
    states = {a.batch_size: a for a in get_policy("zeus-nsdi23").arm_states(spec, history)}
    assert [b for b, a in states.items() if not a.pruned] == [32, 64, 128]
    assert decision.stage == "exploitation" and decision.batch_size in (32, 64, 128)


def test_replay_directly_matches_the_vector():
    obs = [(b, COST[b], b not in (FAILS[1] if i < 6 else FAILS[2])) for i, b in enumerate(EXPECTED_ORDER)]
    state = replay_pruning(SIZES, 128, 2, obs)
    assert state.done and state.survivors == (32, 64, 128)
    assert [s.batch_size for s in state.steps] == EXPECTED_ORDER
    assert [s.round for s in state.steps] == [0] * 6 + [1] * 5


def test_replay_ignores_observations_the_walk_is_not_waiting_for():
    # A concurrent run at 128 finishing before the explored 64 must not advance the walk twice.
    state = replay_pruning(SIZES, 128, 2, [(128, 30.0, True), (128, 31.0, True), (64, 20.0, True)])
    assert state.expected == 32


def test_zero_rounds_skip_exploration_and_empty_rounds_fall_back():
    assert replay_pruning(SIZES, 128, 0, []).done
    state = replay_pruning(SIZES, 128, 2, [(128, 1.0, False), (256, 1.0, False)])
    assert state.done and state.survivors == SIZES  # nothing reached: keep candidates rather than crash


def test_default_policy_walks_once_and_stops_where_the_cost_turns():
    order, decision, _ = drive("default", make_spec())
    # 16 costs 50, over 1.5 x 10 (32): the curve has turned. 32 beat 128 by far: the minimum is below 128,
    # so the up direction (256) is skipped. Zeus's walk would also run 8 and 256, and a second round.
    assert order == [128, 64, 32, 16]
    assert decision.stage == "exploitation"


@pytest.mark.parametrize("policy_name", ["zeus-nsdi23", "default"])
def test_oom_rules_out_every_larger_size(policy_name):
    spec, policy = make_spec(), get_policy(policy_name)
    history = [record(0, 0, 128, "oom", 1.0)]
    d = policy.decide(spec, history, 0)
    assert d.batch_size == 64 and d.stage == "exploration"  # the walk restarts below the oom
    # Later: an oom at 32 removes 32..256 for good, whatever happens next.
    history += [record(0, 1, 64, "reached", 5.0), record(1, 2, 32, "oom", 1.0)]
    for n in range(12):
        d = policy.decide(spec, history, 0)
        assert d.batch_size < 32
        history.append(record(2 + n, 3 + n, d.batch_size, "reached", 5.0 + n))
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    assert all(states[b].stage == "oom" and states[b].pruned for b in (32, 64, 128, 256))


@pytest.mark.parametrize("policy_name", ["zeus-nsdi23", "default"])
def test_every_size_oom_is_a_clear_error(policy_name):
    with pytest.raises(NoFeasibleBatchSizeError, match="every batch size ran out of memory"):
        get_policy(policy_name).decide(make_spec(), [record(0, 0, 8, "oom", 1.0)], 0)


@pytest.mark.parametrize("policy_name", ["zeus-nsdi23", "default"])
def test_failed_trials_are_forgotten(policy_name):
    spec, policy = make_spec(), get_policy(policy_name)
    history = [record(0, 0, 128, "reached", 30.0), record(1, 1, 64, "failed", 1e9)]
    d = policy.decide(spec, history, 0)
    assert d.batch_size == 64 and d.stage == "exploration"  # 64 is explored again, not pruned
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    assert states[64].num_observations == 0 and not states[64].pruned


@pytest.mark.parametrize("status", ["not_reached", "cost_exceeded"])
def test_not_reached_and_cost_exceeded_end_a_direction(status):
    spec, policy = make_spec(), get_policy("zeus-nsdi23")
    history = [record(0, 0, 128, "reached", 30.0), record(1, 1, 64, status, 60.0)]
    assert policy.decide(spec, history, 0).batch_size == 256  # down ended at 64; go up
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    assert states[64].num_observations == 1 and states[64].posterior_mean == 60.0


def test_concurrent_dispatch_during_exploration_gets_cheapest_converged_size():
    # zeus-nsdi23's rule (Zeus's); default has its own (tests/policy/test_walk.py).
    spec, policy = make_spec(), get_policy("zeus-nsdi23")
    history = [record(0, 0, 128, "reached", 30.0), record(1, 1, 64, "reached", 20.0), record(2, 2, 32, "dispatched")]
    d = policy.decide(spec, history, 0)
    assert (d.batch_size, d.stage) == (64, "exploration-concurrent")
    # The concurrent 64 finishes first: the walk still waits for 32, so a third recurrence gets 64 again.
    history.append(record(3, 3, 64, "reached", 21.0))
    assert policy.decide(spec, history, 0).batch_size == 64
    # 32 comes back: the walk moves on to 16.
    history[2] = record(2, 2, 32, "reached", 10.0)
    d = policy.decide(spec, history, 0)
    assert (d.batch_size, d.stage) == (16, "exploration")


def test_an_unreported_concurrent_trial_does_not_hold_back_the_exploration_of_its_size():
    # As in Zeus's server, where a concurrent trial has its own type (tests/policy/test_zeus_server_scenario.py).
    spec, policy = make_spec(), get_policy("zeus-nsdi23")
    history = [
        record(0, 0, 128, "reached", 30.0),
        record(1, 1, 128, "dispatched"),  # concurrent with 128's exploration; never reported
        record(2, 2, 64, "reached", 20.0),
        record(3, 3, 32, "not_reached", 25.0),
        record(4, 4, 256, "not_reached", 40.0),  # round 1 over: 64 and 128 survive
        record(5, 5, 64, "reached", 21.0),  # round 2 from 64; next, 128 again
    ]
    d = policy.decide(spec, history, 0)
    assert (d.batch_size, d.stage) == (128, "exploration")
    # Round 2's 128 is out now: a further recurrence is the concurrent one.
    history.append(record(6, 6, 128, "dispatched"))
    d = policy.decide(spec, history, 0)
    assert (d.batch_size, d.stage) == (64, "exploration-concurrent")
    # Its result moves the walk on, the unreported trial 1 notwithstanding: pruning is over.
    history[6] = record(6, 6, 128, "reached", 31.0)
    assert policy.decide(spec, history, 0).stage == "exploitation"


def test_concurrent_dispatch_before_anything_converged_gets_b0():
    spec = make_spec()
    d = get_policy("zeus-nsdi23").decide(spec, [record(0, 0, 128, "dispatched")], 0)
    assert (d.batch_size, d.stage) == (128, "exploration-concurrent")


def test_history_with_unknown_batch_size_is_rejected():
    with pytest.raises(ValueError, match="batch_size=48"):
        get_policy("default").decide(make_spec(), [record(0, 0, 48, "reached", 1.0)], 0)
