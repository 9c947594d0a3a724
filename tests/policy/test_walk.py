"""The default policy's walk, worked by hand: where it turns, when it skips the up direction, and what
overlapping recurrences explore meanwhile."""

from __future__ import annotations

import pytest

from tests.policy.helpers import SIZES, make_spec, record
from zeus_kfp.policy import get_policy
from zeus_kfp.policy.walk import look_past, replay_walk


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


def test_a_miss_at_the_default_size_does_not_end_the_walk():
    """The default is where the walk starts, not a step in a direction: its one run missing (a noisy
    epoch count, a tight max_epochs) says nothing about the sizes below it, so the walk goes on down,
    then up (nothing beat a default that never reached). Zeus's walk ends the down direction there."""
    state = walk({128: None})
    assert state.expected == 64 and 128 not in state.ruled_out
    state = walk({128: None, 64: 10.0, 32: 16.0, 16: 30.0})
    assert state.expected == 256 and state.best_size == 64
    state = walk({128: None}, default_miss_ends=True)  # Zeus's rule, kept for benchmarks
    assert state.expected == 256 and {8, 16, 32, 64, 128} <= state.ruled_out


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


def look(costs: dict[int, float | None], pending: set[int], default: int = 128):
    first = {b: (1.0 if c is None else c, c is not None) for b, c in costs.items()}
    return look_past(SIZES, default, first, frozenset(pending))


def test_looking_past_in_flight_sizes_goes_on_after_the_steps_that_came_back():
    # 128 (the default) is in flight; 64 and 32 came back, falling: the down walker goes on to 16.
    ahead = look({64: 20.0, 32: 10.0}, {128})
    assert (ahead.down, ahead.down_open) == (16, True)
    # The up walker's first size is 256; it is not needed (128 has no result to compare with).
    assert (ahead.up, ahead.up_needed) == (256, False)


def test_looking_past_never_picks_a_size_right_behind_a_pending_one():
    ahead = look({128: 30.0, 64: 20.0}, {32})  # 32 in flight, nothing after it came back
    assert ahead.down is None and ahead.down_open  # waiting, not ended
    ahead = look({}, {128, 64})  # the first wave: nothing finished
    assert ahead.down is None and ahead.up == 256


def test_looking_past_keeps_the_walks_turns_and_misses():
    # 16 costs 5 x 32: a hard turn ends the down direction. Skipping the up direction needs 128's cost,
    # which is in flight: the up walker's first size, 256, stays open.
    ahead = look({64: 20.0, 32: 10.0, 16: 50.0}, {128})
    assert (ahead.down, ahead.up, ahead.down_open) == (None, 256, False)
    ahead = look({64: 20.0, 32: 10.0, 16: 50.0, 128: 30.0}, set())  # 32 beat 128 by far: up skipped
    assert (ahead.down, ahead.up, ahead.down_open) == (None, None, False)
    # 64 missed: the down direction is over; 256, the only size up, is in flight: nothing is left.
    ahead = look({128: 10.0, 64: None}, {256})
    assert (ahead.down, ahead.down_open, ahead.up) == (None, False, None)
    # 128 reached, 64 did not beat it by 5 %: the up direction will be walked.
    ahead = look({128: 10.0, 64: 9.8}, {32})
    assert ahead.up_needed and ahead.up == 256 and ahead.down is None


def history(*rows):
    return [record(rec, trial, b, status, cost) for trial, (rec, b, status, cost) in enumerate(rows)]


def test_default_does_not_run_past_an_in_flight_step_with_nothing_after_it():
    """128 (30) and 64 (20) came back, 32 is in flight. 16 would be a guess on 32's result: the
    concurrent recurrence runs the cheapest size so far, 64. (64 beat 128 by a third: no up walk.)"""
    spec, policy = make_spec(), get_policy("default")
    h = history((0, 128, "reached", 30.0), (1, 64, "reached", 20.0), (2, 32, "dispatched", None))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (64, "exploration-concurrent")


def test_default_goes_on_from_results_that_came_back_while_the_default_is_in_flight():
    """The first wave ran 128 (the default), 64 and 32; 64 (20) and 32 (10) finished first. Had 128
    come back, the walk would go 128, 64, 32, then 16: it explores 16. With 16 in flight too, the up
    walker may run, since 128 was outlasted (64, dispatched after it, finished first): 256."""
    spec, policy = make_spec(), get_policy("turning-walk")
    h = history((1, 128, "dispatched", None), (2, 64, "reached", 20.0), (3, 32, "reached", 10.0))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (16, "exploration")
    assert d.cost_threshold == 2.0 * 10.0  # beta x the cheapest recurrence: the early stop is back
    h.append(record(4, 3, 16, "dispatched"))
    assert policy.decide(spec, h, 0).batch_size == 256
    # With 256 in flight as well: the cheapest size that reached, 32 (mean 10), not the default.
    h.append(record(5, 4, 256, "dispatched"))
    d = policy.decide(spec, h, 0)
    assert (d.batch_size, d.stage) == (32, "exploration-concurrent")


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
    off = type(policy)(first_wave=())
    assert off.decide(spec, h, 0).batch_size == 128  # without the first wave: the default again


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


# -- resume: the sizes past a turn or a skip are probed later, not ruled out for good ----------------------


def test_with_resume_a_turn_defers_the_sizes_past_it_to_a_probe_capped_at_the_turn_step():
    # 16 costs 50 > 1.5 x 10: a turn. Without resume 8 is ruled out for good; with it, 8 is the probe.
    costs = {128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0}
    assert walk(costs).lazy == ()
    state = walk(costs, resume=True)
    assert state.done and 8 in state.ruled_out
    assert state.lazy[0] == (8, 50.0, ())  # a probe costing more than 16 did is a second rise
    assert (256, 30.0, ()) in state.lazy  # the skipped up direction too, against the default's cost
    assert state.probes == 0


def test_a_probe_cheaper_than_every_step_resumes_the_walk_from_it():
    state = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0, 8: 5.0}, resume=True)
    assert state.best_size == 8 and state.probes == 1
    assert 8 not in state.ruled_out
    # 8 is the smallest size: the down direction is over; the up direction (skipped) is still a probe.
    assert [b for b, _, _ in state.lazy] == [256]


def test_a_probe_that_rises_again_or_misses_ends_its_direction_for_good():
    rising = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0, 8: 60.0}, resume=True)
    assert 8 not in [b for b, _, _ in rising.lazy] and rising.best_size == 32
    missed = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0, 8: None}, resume=True)
    assert 8 in missed.ruled_out and 8 not in [b for b, _, _ in missed.lazy]
    # Falling but not below the cheapest (10): the direction stays open to the next probe.
    sizes = (4, 8, 16, 32, 64, 128)
    first = {128: (30.0, True), 64: (20.0, True), 32: (10.0, True), 16: (50.0, True), 8: (40.0, True)}
    state = replay_walk(sizes, 128, first, resume=True)
    assert (4, 40.0, ()) in state.lazy and state.probes == 1


def test_the_chance_that_a_turn_is_noise_is_the_tail_of_two_runs_log_ratio():
    from scipy.stats import norm

    from zeus_kfp.policy.turning_walk import wrong_turn_chance

    # log(1.1) / (sqrt(2) x 0.1) = 0.674 standard deviations: a quarter of equal pairs look that far apart.
    assert wrong_turn_chance(1.1, 0.1) == pytest.approx(norm.sf(0.0953102 / 0.1414214), rel=1e-5)
    assert wrong_turn_chance(1.1, 0.1) == pytest.approx(0.2502, abs=1e-4)
    assert wrong_turn_chance(1.5, 0.1) < 0.003 < 0.07 < wrong_turn_chance(1.5, 0.2)  # the job's noise decides
    assert wrong_turn_chance(1.0, 0.1) == 0.5


def test_a_skip_within_the_noise_is_probed_once_the_job_has_run_long_enough_to_pay_for_it():
    from zeus_kfp.policy.turning_walk import TurningWalkPolicy

    spec = make_spec(beta_knob=2.0)
    # 64 (10) beat the default 128 (11) by 9 %: the up direction is skipped on a ratio of 1.1; 32 (15.5) is
    # a hard turn, 1.55x the cheapest. No repeats yet: the pooled noise is the prior, 0.1. A skip on 1.1 is
    # noise with chance 0.250 (above), so the probe of 256 is due at 4 observations (4 x 0.250 >= 1); the
    # turn on 1.55 (chance 0.0010) not for about a thousand.
    history = [record(1, 1, 128, "reached", 11.0), record(2, 2, 64, "reached", 10.0), record(3, 3, 32, "reached", 15.5)]
    policy = TurningWalkPolicy(resume=True)
    assert policy.decide(spec, history, seed=3).stage == "exploitation"  # 3 x 0.250 < 1
    history += [record(4, 4, 64, "reached", 10.0), record(5, 5, 64, "reached", 10.0)]
    decision = policy.decide(spec, history, seed=5)
    assert decision.batch_size == 256 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(11.0)  # stopped past the default's cost (< beta x 10)
    assert TurningWalkPolicy(resume=False).decide(spec, history, seed=5).stage == "exploitation"  # rule 10 off


def test_a_turn_read_off_a_lucky_first_run_of_the_cheapest_step_is_probed_once_its_runs_say_so():
    from zeus_kfp.policy.turning_walk import TurningWalkPolicy

    spec = make_spec(beta_knob=2.0)
    # 64's first run (7.0) makes 32 (12.0) a hard turn at 1.71x; the up direction is skipped on the default
    # 128 (20.0). If 64's next three runs cost 12.5, its mean is 44.5 / 4 = 11.125: the turn compared 32 with
    # a run 64 does not usually make. Pooled noise: three equal repeats, shrunk toward the prior 0.1 with
    # weight 2: 0.1 x sqrt(2 / 4) = 0.0707. Against the mean 32's ratio is 12.0 / 11.125 = 1.079: noise with
    # chance Phi(-ln 1.079 / (sqrt(2) x 0.0707)) = 0.224, so at 6 observations (6 x 0.224 >= 1) 16 is probed,
    # stopped past 32's cost. The skip on 20.0 / 11.125 = 1.8 waits. If instead 64's repeats cost 7.0, its
    # first run was typical and the turn stays at 1.71x (chance 3e-8): no probe.
    first = [record(1, 1, 128, "reached", 20.0), record(2, 2, 64, "reached", 7.0), record(3, 3, 32, "reached", 12.0)]
    policy = TurningWalkPolicy()
    lucky = first + [record(t, t, 64, "reached", 12.5) for t in (4, 5, 6)]
    decision = policy.decide(spec, lucky, seed=6)
    assert decision.batch_size == 16 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(12.0)
    typical = first + [record(t, t, 64, "reached", 7.0) for t in (4, 5, 6)]
    assert policy.decide(spec, typical, seed=6).stage == "exploitation"


def test_a_turn_far_outside_the_noise_is_never_probed():
    from zeus_kfp.policy.turning_walk import TurningWalkPolicy

    spec = make_spec(beta_knob=2.0)
    # 16 at 5x the cheapest, and the up direction skipped on 3x: neither is a ratio noise makes.
    history = [
        record(1, 1, 128, "reached", 30.0),
        record(2, 2, 64, "reached", 20.0),
        record(3, 3, 32, "reached", 10.0),
        record(4, 4, 16, "reached", 50.0),
    ]
    history += [record(t, t, 32, "reached", 10.0 if t % 2 else 11.0) for t in range(5, 400)]
    decision = TurningWalkPolicy(resume=True).decide(spec, history, seed=400)
    assert decision.stage == "exploitation" and decision.batch_size == 32


# -- rule 12 (compound_rises, on by default): a rise past a turn passes the probe on ---------------------


def test_with_compound_rises_a_rise_passes_the_probe_on_with_its_cap_kept_for_compounding():
    sizes = (4, 8, 16, 32, 64, 128)
    # 16 (50) turned on the cheapest 10; the probe of 8 came back at 60, a second rise.
    first = {128: (30.0, True), 64: (20.0, True), 32: (10.0, True), 16: (50.0, True), 8: (60.0, True)}
    assert 4 in replay_walk(sizes, 128, first, resume=True).ruled_out  # rule 10 alone: the direction ends
    rising = replay_walk(sizes, 128, first, resume=True, compound_rises=True)
    assert rising.lazy == ((4, 60.0, (50.0,)),)  # 4 next, capped at 8's 60, after the rise over 16's 50
    # 8 stopped at 45 near its cap (50): it rose, at a cost of at least the cap.
    cut = {**first, 8: (45.0, False, True)}
    assert replay_walk(sizes, 128, cut, resume=True, compound_rises=True).lazy == ((4, 50.0, (50.0,)),)
    # The same run out of max_epochs (not stopped) is a miss: the direction ends for good.
    missed = replay_walk(sizes, 128, {**first, 8: (45.0, False)}, resume=True, compound_rises=True)
    assert 4 in missed.ruled_out and missed.lazy == ()
    # Falling, but not below the cheapest: no rise to carry, as without rule 12.
    falling = replay_walk(sizes, 128, {**first, 8: (40.0, True)}, resume=True, compound_rises=True)
    assert falling.lazy == ((4, 40.0, ()),)


def test_a_probe_past_a_stopped_probe_waits_for_both_rises_to_be_noise():
    from zeus_kfp.policy.turning_walk import TurningWalkPolicy

    spec = make_spec(beta_knob=2.0, batch_sizes=(32, 64, 128, 256, 512))
    # 64 (10.0) beat the default 128 (10.6) by 6 %: the up direction is skipped on 1.06; 32 missed (the down
    # direction ends). The probe of 256 was stopped at 10.5, near its cap 10.6: a second rise. Under rule 12
    # the probe of 512 is due once n x chance(1.06)^2 >= 1. At the prior noise 0.1 a ratio of 1.06 is noise
    # with chance Phi(-ln 1.06 / (sqrt(2) x 0.1)) = 0.340: at 5 observations one rise would be due
    # (5 x 0.340 >= 1), two are not (5 x 0.116 < 1).
    history = [
        record(1, 1, 128, "reached", 10.6),
        record(2, 2, 64, "reached", 10.0),
        record(3, 3, 32, "not_reached", 8.0),
        record(4, 4, 256, "cost_exceeded", 10.5),
        record(5, 5, 64, "reached", 10.0),
    ]
    compound = TurningWalkPolicy()
    assert compound.decide(spec, history, seed=5).stage == "exploitation"
    # 20 more runs of 64 at 9 and 11 (mean 10, the pooled noise stays near 0.11): at 25 observations
    # 25 x 0.35^2 >= 1, and 512 is probed, stopped past 256's cap.
    history += [record(t, t, 64, "reached", 9.0 if t % 2 else 11.0) for t in range(6, 26)]
    decision = compound.decide(spec, history, seed=25)
    assert decision.batch_size == 512 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(10.6)
    off = TurningWalkPolicy(compound_rises=False)
    assert off.decide(spec, history, seed=25).stage == "exploitation"  # rule 12 off: 256's rise ended it
