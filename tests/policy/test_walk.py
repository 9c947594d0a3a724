"""The default policy's walk, worked by hand: where it turns, when it skips the up direction, and what
overlapping recurrences explore meanwhile."""

from __future__ import annotations

import pytest

from tests.policy.helpers import SIZES, make_spec, record
from zeus.policy import get_policy
from zeus.policy.walk import replay_walk


def walk(costs: dict[int, float | None], default: int = 128, **margins):
    """Replay over SIZES with each size's first trial in the order given; None cost = a miss."""
    first = {b: (1.0 if c is None else c, c is not None) for b, c in costs.items()}
    return replay_walk(SIZES, default, first, **margins)


def test_down_while_cheaper_then_a_clear_turn_and_the_up_direction_is_skipped():
    # 16 costs 50 > 1.5 x 10 (the cheapest so far): the curve has turned. 32 beat 128 by far: skip up.
    state = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0})
    assert state.done and state.best_size == 32 and state.best_cost == 10.0
    assert state.survivors == (16, 32, 64, 128)
    assert state.ruled_out == {8, 256}


def test_a_worse_step_right_after_the_cheapest_is_given_one_more_step():
    # 64 is 30 % worse than 128, but 128 was the cheapest: maybe noise, go on. 32 is worse again: turn.
    state = walk({128: 10.0, 64: 13.0})
    assert state.expected == 32
    state = walk({128: 10.0, 64: 13.0, 32: 12.5})
    assert 8 in state.ruled_out and 16 in state.ruled_out
    # Nothing below 128 beat it: the up direction is walked.
    assert state.expected == 256 and not state.done


def test_a_bump_is_walked_through():
    # 64 is worse (a bump right after the cheapest), 32 is cheaper than everything: the walk goes on.
    state = walk({128: 10.0, 64: 12.5, 32: 8.0, 16: 8.5})
    assert state.expected == 8 and state.best_size == 32
    # 8 costs 20 > 1.5 x 8: turn; 32 beat 128 by 20 %: the up direction is skipped.
    state = walk({128: 10.0, 64: 12.5, 32: 8.0, 16: 8.5, 8: 20.0})
    assert state.done and state.ruled_out == {256}


def test_a_miss_ends_its_direction_and_rules_it_out():
    state = walk({128: 10.0, 64: None})
    assert state.expected == 256
    assert state.ruled_out == {8, 16, 32, 64}
    state = walk({128: 10.0, 64: None, 256: None})
    assert state.done and state.survivors == (128,) and state.ruled_out == {8, 16, 32, 64, 256}


def test_skip_margin_a_down_step_barely_cheaper_than_the_default_keeps_the_up_direction():
    # 64 is 2 % cheaper than 128 (within the 5 % margin), 32 is clearly worse: walk up too.
    state = walk({128: 10.0, 64: 9.8, 32: 16.0})
    assert state.expected == 256
    state = walk({128: 10.0, 64: 9.0, 32: 16.0})  # 10 % cheaper: the minimum is below 128
    assert state.done


def test_rules_can_be_turned_off_for_benchmarks():
    state = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0}, turn_margin=None, hard_turn=None, skip_margin=None)
    assert state.expected == 8  # Zeus's walk: only a miss ends a direction


def test_steps_are_judged_in_walk_order_whatever_order_they_finished_in():
    # 32 was run ahead and finished before 64. In walk order 64 (20) follows 128 (30), and 32 (10)
    # follows 64: falling all the way, so the walk goes on to 16. (In trial order 64 would be 2x 32.)
    state = replay_walk(SIZES, 128, {128: (30.0, True), 32: (10.0, True), 64: (20.0, True)})
    assert state.expected == 16 and state.best_size == 32
    assert state.ruled_out == {256}  # and 32 beat 128 by far: the up direction is skipped


def test_what_the_walk_offers_an_overlapping_recurrence():
    state = walk({128: 30.0, 64: 20.0})  # falling: 32 is next, 16 after it
    assert state.expected == 32 and state.ahead[0] == 16
    assert not state.other_needed  # 64 beat 128 clearly: the minimum is below, the up walker is not needed
    state = walk({128: 10.0, 64: 12.0})  # 64 did not beat 128: the up direction will be walked
    assert state.expected == 32 and state.ahead == () and state.other_needed and state.other[0] == 256


def history(*rows):
    return [record(rec, trial, b, status, cost) for trial, (rec, b, status, cost) in enumerate(rows)]


def test_default_explores_ahead_while_the_next_step_is_in_flight_and_costs_fall():
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "reached", 20.0), (2, 32, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (16, "exploration")
    h.append(record(3, 3, 16, "dispatched"))
    d = policy.decide(spec, h, 0)  # 32 and 16 in flight: run the cheapest explored size
    assert (d.batch_size, d.stage) == (64, "exploration-concurrent")


def test_default_walks_up_alongside_once_the_in_flight_step_is_outlasted():
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "dispatched", None))
    assert policy.decide(spec, h, 0).batch_size == 128  # no trend yet: the cheapest explored size
    h.append(record(2, 2, 128, "reached", 29.0))  # dispatched after 64, finished first: 64 is slow
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (256, "exploration")


def test_default_never_runs_ahead_without_an_early_stop():
    spec, policy = make_spec(beta_knob=None), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "reached", 20.0), (2, 32, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage, d.cost_threshold) == (64, "exploration-concurrent", None)


@pytest.mark.parametrize("overlap", [True, False])
def test_default_reports_what_the_walk_ruled_out_while_exploring(overlap):
    spec = make_spec()
    policy = type(get_policy("default"))(overlap=overlap)
    h = history((0, 128, "reached", 10.0), (1, 64, "not_reached", 12.0))
    states = {a.batch_size: a for a in policy.arm_states(spec, h)}
    assert [b for b, a in states.items() if a.pruned] == [8, 16, 32, 64]
    assert {a.stage for a in states.values()} == {"pruned", "exploration"}
    assert policy.decide(spec, h, 0).batch_size == 256


def test_the_first_wave_explores_two_sizes_down_then_one_up_while_nothing_has_finished():
    spec, policy = make_spec(), get_policy("turning-walk")
    h = history((0, 128, "dispatched", None))
    picks = []
    for recurrence in range(1, 5):  # four more recurrences start before any trial finishes
        d = policy.decide(spec, h, 0)
        picks.append((d.batch_size, d.stage))
        h.append(record(recurrence, recurrence, d.batch_size, "dispatched"))
    assert picks == [(64, "exploration"), (32, "exploration"), (256, "exploration"), (128, "exploration-concurrent")]
    assert policy.decide(spec, h[:1], 0).cost_threshold is None  # no recurrence has a cost to stop at yet
    off = type(policy)(first_wave_down=0, first_wave_up=0)
    assert off.decide(spec, h[:1], 0).batch_size == 128  # without the first wave: the default again


def test_a_concurrent_recurrence_never_runs_a_pruned_size():
    """The default missed, nothing reached, the walk's next size is in flight: the cheapest explored size
    would be the pruned default, so it runs the in-flight size again."""
    spec, policy = make_spec(batch_sizes=(8, 16), default_batch_size=8, beta_knob=None), get_policy("turning-walk")
    h = history((1, 8, "not_reached", 5.0), (2, 16, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (16, "exploration-concurrent")
    assert {a.batch_size: a.pruned for a in policy.arm_states(spec, h)} == {8: True, 16: False}
