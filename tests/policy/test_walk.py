"""The default policy's walk and what overlapping recurrences run meanwhile, on hand-worked histories: the size
decide() picks and the early stop it hands out (docs/DESIGN.md, "Policy": the walk, concurrency). The spec is
tests.policy.helpers.make_spec: sizes 8 .. 256, default 128, beta 2."""

from __future__ import annotations

from tests.policy.helpers import make_spec, record
from zeus_kfp.policy import get_policy


def decide(*rows, seed: int = 0, **spec_changes):
    """The default policy's decision after `rows` (batch size, status, cost), one recurrence and trial each."""
    h = [record(k, k, b, status, cost) for k, (b, status, cost) in enumerate(rows)]
    return get_policy("default").decide(make_spec(**spec_changes), h, seed)


def reached(*pairs: tuple[int, float]) -> list[tuple[int, str, float]]:
    return [(b, "reached", c) for b, c in pairs]


def test_the_walk_goes_down_while_cheaper_and_a_clear_rise_ends_it():
    # 64 (20) and 32 (10) fall; 16 (50) is more than 1.5 x the cheapest (10): the curve turned. 32 beat the
    # default (30) by far, so the minimum lies below it: no walk up. The walk is over, and of the sizes that
    # reached only 32 is a contender (64: 20 x (1 - 0.1) = 18 > 10), run again: its first run also profiled.
    d = decide(*reached((128, 30.0), (64, 20.0), (32, 10.0), (16, 50.0)))
    assert (d.batch_size, d.stage) == (32, "exploitation")
    assert d.cost_threshold == 2.0 * 10.0  # beta x the cheapest size's mean


def test_a_worse_step_right_after_the_cheapest_is_given_one_more_step():
    # 64 is 1.3x the default (10), but the default was the cheapest step: maybe noise or a bump. Go on to 32.
    d = decide(*reached((128, 10.0), (64, 13.0)))
    assert (d.batch_size, d.stage, d.cost_threshold) == (32, "exploration", 20.0)
    # 32 (12.5) is worse than 1.2 x 10 again, past the minimum: the turn. Nothing below 128 beat it: walk up.
    d = decide(*reached((128, 10.0), (64, 13.0), (32, 12.5)))
    assert (d.batch_size, d.stage) == (256, "exploration")


def test_a_bump_is_walked_through():
    # 64 (12.5) rises right after the cheapest; 32 (8) falls below everything, 16 (8.5) is within 1.2x of it.
    d = decide(*reached((128, 10.0), (64, 12.5), (32, 8.0), (16, 8.5)))
    assert (d.batch_size, d.stage, d.cost_threshold) == (8, "exploration", 16.0)


def test_a_miss_ends_its_direction_and_the_sizes_past_it_are_never_run():
    d = decide((128, "reached", 10.0), (64, "not_reached", 12.0))
    assert (d.batch_size, d.stage) == (256, "exploration")  # the down direction is over at 64's miss
    rows = [(128, "reached", 10.0), (64, "not_reached", 12.0), (256, "not_reached", 14.0)]
    # Only 128 reached the target: every decision after the walk runs it, whatever the seed.
    assert {decide(*rows, seed=s).batch_size for s in range(10)} == {128}
    assert decide(*rows).cost_threshold == 20.0


def test_a_miss_at_the_default_size_does_not_end_the_walk():
    """The default is where the walk starts, not a step in a direction: its one run missing (a noisy epoch
    count, a tight max_epochs) says nothing about the sizes below it."""
    d = decide((128, "not_reached", 10.0))
    assert (d.batch_size, d.stage, d.cost_threshold) == (64, "exploration", None)  # nothing reached: no stop
    # 64 (10), then 32 (16 > 1.5 x 10: a turn). The default never reached, so nothing below beat it: walk up.
    d = decide((128, "not_reached", 10.0), *reached((64, 10.0), (32, 16.0), (16, 30.0)))
    assert (d.batch_size, d.stage, d.cost_threshold) == (256, "exploration", 20.0)


def test_the_up_direction_is_walked_unless_a_smaller_size_beat_the_default_by_more_than_the_skip_margin():
    # 64 is 2 % cheaper than 128 (within 5 %), 32 a clear turn: the minimum may be above 128, walk up.
    assert decide(*reached((128, 10.0), (64, 9.8), (32, 16.0))).batch_size == 256
    # 64 is 20 % cheaper: the walk is over and 64, the one contender (128: 10 x 0.9 = 9 > 8), runs again.
    d = decide(*reached((128, 10.0), (64, 8.0), (32, 16.0)))
    assert (d.batch_size, d.stage) == (64, "exploitation")


def test_steps_are_judged_in_walk_order_whatever_order_they_finished_in():
    # 32 finished before 64. In walk order 128 (30), 64 (20), 32 (10) fall all the way: on to 16. (In trial
    # order 64 would come after 32 at 2x its cost: a turn.)
    d = decide(*reached((128, 30.0), (32, 10.0), (64, 20.0)))
    assert (d.batch_size, d.stage) == (16, "exploration")


def history(*rows):
    return [record(rec, trial, b, status, cost) for trial, (rec, b, status, cost) in enumerate(rows)]


def test_a_concurrent_recurrence_does_not_run_past_an_in_flight_step_with_nothing_after_it():
    """128 (30) and 64 (20) came back, 32 is in flight. 16 would be a guess on 32's result: the
    concurrent recurrence runs the cheapest size so far, 64. (64 beat 128 by a third: no up walk.)"""
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "reached", 20.0), (2, 32, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (64, "exploration-concurrent")


def test_a_concurrent_recurrence_goes_on_from_results_that_came_back_while_the_default_is_in_flight():
    """The first wave ran 128 (the default), 64 and 32; 64 (20) and 32 (10) finished first. Had 128
    come back, the walk would go 128, 64, 32, then 16: it explores 16. With 16 in flight too, the up
    walker may run, since 128 was outlasted (64, dispatched after it, finished first): 256."""
    spec, policy = make_spec(), get_policy("turning-walk")
    h = history((1, 128, "dispatched", None), (2, 64, "reached", 20.0), (3, 32, "reached", 10.0))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (16, "exploration")
    assert d.cost_threshold == 2.0 * 10.0  # beta x the cheapest size's mean (32's): the early stop is back
    h.append(record(4, 3, 16, "dispatched"))
    assert policy.decide(spec, h, 0).batch_size == 256
    # With 256 in flight as well: the cheapest size that reached, 32 (mean 10), not the default.
    h.append(record(5, 4, 256, "dispatched"))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (32, "exploration-concurrent")


def test_a_concurrent_recurrence_walks_up_alongside_once_the_in_flight_step_is_outlasted():
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "dispatched", None))
    assert policy.decide(spec, h, 0).batch_size == 128  # no trend yet: the cheapest explored size
    h.append(record(2, 2, 128, "reached", 29.0))  # dispatched after 64, finished first: 64 is slow
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (256, "exploration")


def test_a_concurrent_recurrence_never_runs_ahead_without_an_early_stop():
    spec, policy = make_spec(beta_knob=None), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "reached", 20.0), (2, 32, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage, d.cost_threshold) == (64, "exploration-concurrent", None)


def test_the_arms_show_what_the_walk_ruled_out_while_exploring():
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 10.0), (1, 64, "not_reached", 12.0))
    states = {a.batch_size: a for a in policy.arm_states(spec, h)}
    assert [b for b, a in states.items() if a.pruned] == [8, 16, 32, 64]
    # 64 missed: pruned; the sizes below it were never tried: skipped (nothing measured rules them out)
    assert {b: a.stage for b, a in states.items() if a.pruned} == {
        8: "skipped",
        16: "skipped",
        32: "skipped",
        64: "pruned",
    }
    assert {a.stage for a in states.values() if not a.pruned} == {"exploration"}
    assert policy.decide(spec, h, 0).batch_size == 256


def first_wave(spec, policy, n: int) -> list[tuple[int, str]]:
    """What `n` recurrences that start while the default's trial is in flight and nothing has finished run."""
    h = history((0, spec.default_batch_size, "dispatched", None))
    picks = []
    for recurrence in range(1, n + 1):
        d = policy.decide(spec, h, 0)
        picks.append((d.batch_size, d.stage))
        h.append(record(recurrence, recurrence, d.batch_size, "dispatched"))
    return picks


def test_the_first_wave_explores_one_down_one_up_then_two_up_or_two_down_while_nothing_has_finished():
    spec, policy = make_spec(), get_policy("turning-walk")
    # From 128 in (8 .. 256): one down 64, one up 256, two up (none), two down 32; then the default.
    assert first_wave(spec, policy, 4) == [
        (64, "exploration"), (256, "exploration"), (32, "exploration"), (128, "exploration-concurrent"),
    ]  # fmt: skip
    h = history((0, 128, "dispatched", None))
    assert policy.decide(spec, h, 0).cost_threshold is None  # no recurrence has a cost to stop at yet


def test_the_first_wave_takes_the_sizes_the_job_has():
    policy = get_policy("turning-walk")
    # Default 32 in (8 .. 256): one down 16, one up 64, two up 128 (three sizes: the wave is full).
    assert [b for b, _ in first_wave(make_spec(default_batch_size=32), policy, 3)] == [16, 64, 128]
    # Default 256, the largest: one down 128, two down 64, three down 32.
    assert [b for b, _ in first_wave(make_spec(default_batch_size=256), policy, 3)] == [128, 64, 32]


def test_a_concurrent_recurrence_never_reruns_a_size_that_only_missed():
    """The default missed, nothing reached, the walk's next size is in flight: the cheapest explored size
    would be the default, which only missed, so it runs the in-flight size again. The default is not
    pruned for its one miss (the walk goes on from it), but a miss is no reason to run it again."""
    spec, policy = make_spec(batch_sizes=(8, 16), default_batch_size=8, beta_knob=None), get_policy("turning-walk")
    h = history((1, 8, "not_reached", 5.0), (2, 16, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (16, "exploration-concurrent")
    assert {a.batch_size: a.pruned for a in policy.arm_states(spec, h)} == {8: False, 16: False}
