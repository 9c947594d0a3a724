"""The walk's confirmation (`confirm`, turning-walk rule 11), worked by hand: a turn or a skip whose first
runs are within the noise of each other waits for a second run of both sizes it compares, and then stands
while the first one's mean cost after its first run is above the other's.

With a relative noise of one run cv = 0.1, the band is exp(2 x sqrt(2) x 0.1) = 1.3269: a first-run
ratio below it is within the noise; 1.5 (the hard turn) is outside it."""

from __future__ import annotations

import math

from tests.policy.helpers import SIZES, make_spec, record
from zeus_kfp.policy.turning_walk import TurningWalkPolicy
from zeus_kfp.policy.walk import look_past, replay_walk

SOFT_TURN = {128: 10.0, 64: 13.0, 32: 12.5}  # 64 is worse right after the cheapest; 32 is 1.25 x 10 past it
SKIP = {128: 10.0, 64: 9.0, 32: None}  # 64 beat 128 by 10 % (ratio 1.111); 32 missed: the down walk is over


def walk(costs: dict[int, float | None], later: dict[int, float] | None = None, cv: float | None = 0.1):
    """Replay over SIZES from 128 with each size's first run in the order given (None cost = a miss), and
    `later` = {size: the mean of its second run(s)} for the sizes run twice."""
    first = {b: (1.0 if c is None else c, c is not None) for b, c in costs.items()}
    runs = {b: (1, math.nan) for b in costs} | {b: (2, m) for b, m in (later or {}).items()}
    return replay_walk(SIZES, 128, first, confirm=cv, runs=runs)


def test_the_band_is_two_standard_deviations_of_a_ratio_of_two_single_runs():
    assert math.isclose(math.exp(2 * math.sqrt(2) * 0.1), 1.3269, rel_tol=1e-4)


def test_a_soft_turn_within_the_noise_waits_for_second_runs_of_both_sizes():
    # 32 (12.5) is 1.25 x 128 (10), past the minimum: a turn, and 1.25 < 1.3269. Without confirm 8 and 16 are
    # ruled out and the walk goes up; with it 32 runs again, then 128 (the cheapest step, its reference).
    assert walk(SOFT_TURN, cv=None).expected == 256 and {8, 16} <= walk(SOFT_TURN, cv=None).ruled_out
    state = walk(SOFT_TURN)
    assert state.expected == 32 and not state.done and not {8, 16} & state.ruled_out
    assert walk(SOFT_TURN, {32: 11.0}).expected == 128


def test_a_confirmed_turn_stands_while_the_later_runs_show_the_rise():
    # Second runs 32: 11, 128: 10: 32 is still the costlier: the turn stands, the walk goes up.
    state = walk(SOFT_TURN, {32: 11.0, 128: 10.0})
    assert state.expected == 256 and {8, 16} <= state.ruled_out
    # 32: 9, 128: 10: the first runs were the noise; the walk goes on down to 16.
    state = walk(SOFT_TURN, {32: 9.0, 128: 10.0})
    assert state.expected == 16 and not {8, 16} & state.ruled_out


def test_a_turn_outside_the_noise_is_taken_on_first_runs():
    # 64 costs 1.6 x 128 > 1.5 (hard) and > 1.3269: the down direction ends at once, as without confirm.
    state = walk({128: 10.0, 64: 16.0})
    assert state.expected == 256 and {8, 16, 32} <= state.ruled_out
    # A wider noise (cv 0.2: band exp(0.5657) = 1.7607) puts 1.6 inside it: 64 is run again first.
    assert walk({128: 10.0, 64: 16.0}, cv=0.2).expected == 64


def test_a_skip_within_the_noise_waits_for_second_runs_of_the_default_and_the_step_that_beat_it():
    assert walk(SKIP, cv=None).ruled_out == {8, 16, 32, 256}  # without confirm: up skipped, the walk is over
    state = walk(SKIP)
    assert state.expected == 128 and 256 not in state.ruled_out
    assert walk(SKIP, {128: 9.5}).expected == 64
    # Second runs 128: 8.5, 64: 9: the default is the cheaper after all: the up direction is walked.
    assert walk(SKIP, {128: 8.5, 64: 9.0}).expected == 256
    # 128: 9.6, 64: 9: the skip stands, the walk is over.
    state = walk(SKIP, {128: 9.6, 64: 9.0})
    assert state.done and 256 in state.ruled_out


def test_a_skip_outside_the_noise_is_taken_on_first_runs():
    state = walk({128: 30.0, 64: 20.0, 32: 10.0, 16: 50.0})  # 16: 5 x 10, 128: 3 x 10
    assert state.done and state.ruled_out == {8, 256}


def test_looking_past_waits_for_a_confirmation_in_flight():
    first = {b: (c, True) for b, c in SOFT_TURN.items()}
    runs = {b: (1, math.nan) for b in first}
    ahead = look_past(SIZES, 128, first, frozenset({32}), confirm=0.1, runs=runs)
    assert ahead.down is None and ahead.down_open  # its turn waits on 32's second run: nothing past it yet
    ahead = look_past(SIZES, 128, first, frozenset(), confirm=0.1, runs=runs)
    assert ahead.down == 32  # not in flight: the confirmation is what the walker needs


def test_the_policy_runs_the_turning_size_again_under_the_early_stop():
    """turning-walk with confirm=True on a history of first runs 128: 10, 64: 13, 32: 12.5 (each its own
    recurrence): its next decision is 32 again, an exploration, with the early stop beta x the cheapest
    size's mean (2 x 10: make_spec's beta is Zeus's 2.0); without confirm it walks up to 256. A second run
    of 32 at 11 and one of 128 at 10 confirm the turn: then it walks up too."""
    spec = make_spec()
    h = [record(r, r, b, "reached", c) for r, (b, c) in enumerate(SOFT_TURN.items())]
    d = TurningWalkPolicy(confirm=True).decide(spec, h, 1)
    assert (d.batch_size, d.stage, d.cost_threshold) == (32, "exploration", 20.0)
    assert "confirming" in d.reason
    assert TurningWalkPolicy().decide(spec, h, 1).batch_size == 256
    h += [record(3, 3, 32, "reached", 11.0), record(4, 4, 128, "reached", 10.0)]
    assert TurningWalkPolicy(confirm=True).decide(spec, h, 1).batch_size == 256


def test_a_second_run_that_misses_confirms_the_turn():
    """32's second run is stopped by the early stop (cost_exceeded at 20): charged its cost plus the retry
    that reached (128 at 10), 30: the turn stands once 128 has run again."""
    spec = make_spec()
    h = [record(r, r, b, "reached", c) for r, (b, c) in enumerate(SOFT_TURN.items())]
    h += [record(3, 3, 32, "cost_exceeded", 20.0), record(3, 4, 128, "reached", 10.0)]
    assert TurningWalkPolicy(confirm=True).decide(spec, h, 1).batch_size == 256
