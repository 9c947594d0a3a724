"""Probes past a turn, on hand-worked histories: when one is due, what it is stopped at, and what its result
does to the walk (docs/DESIGN.md, "Policy": probes). The spec is tests.policy.helpers.make_spec (sizes 8 ..
256, default 128) unless a test says otherwise."""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as t_dist

from tests.policy.helpers import make_spec, record
from zeus_kfp.policy import get_policy
from zeus_kfp.policy.turning_walk import wrong_turn_chance


def t2_tail(t: float) -> float:
    """The upper tail of a Student t with 2 degrees of freedom, in closed form: 1/2 - t / (2 sqrt(2 + t^2))."""
    return 0.5 - t / (2.0 * math.sqrt(2.0 + t * t))


def test_the_chance_that_a_turn_is_noise_is_a_t_tail_over_both_runs_noise():
    # log(1.1) / sqrt(0.1^2 + 0.1^2) = 0.674; with the prior's 2 runs as degrees of freedom, a Student t tail.
    assert wrong_turn_chance(1.1, 0.1, 0.1, 2.0) == pytest.approx(t_dist.sf(0.0953102 / 0.1414214, 2), rel=1e-5)
    assert wrong_turn_chance(1.1, 0.1, 0.1, 2.0) == pytest.approx(0.2849, abs=1e-4)
    assert wrong_turn_chance(1.5, 0.1, 0.1, 2.0) == pytest.approx(t2_tail(0.405465 / 0.1414214), rel=1e-5)
    assert wrong_turn_chance(1.5, 0.1, 0.1, 2.0) < wrong_turn_chance(1.5, 0.2, 0.1, 2.0)  # the job's noise counts
    assert wrong_turn_chance(1.0, 0.1, 0.1, 2.0) == 0.5


def test_a_turn_is_not_ruled_out_by_a_size_whose_runs_never_vary():
    # The cheaper step's runs all cost the same (pooled noise near 0), but the turned size ran once and its
    # noise is unknown: a 1.7x turn is still noise with chance 0.017 (the prior's noise, t tails), where two
    # runs of the pooled noise would say 1e-100.
    assert wrong_turn_chance(1.7, 0.0105, 0.1, 2.0) == pytest.approx(t2_tail(0.530628 / 0.1005497), rel=1e-4)
    assert 0.01 < wrong_turn_chance(1.7, 0.0105, 0.1, 2.0) < 0.02


def test_a_skip_within_the_noise_is_probed_once_the_job_has_run_long_enough_to_pay_for_it():
    spec = make_spec(beta_knob=2.0)
    # 64 (10) beat the default 128 (11) by 9 %: the up direction is skipped on a ratio of 1.1; 32 (15.5) is
    # a hard turn, 1.55x the cheapest. No repeats yet: the pooled noise is the prior, 0.1. A skip on 1.1 is
    # noise with chance 0.285 (above), so the probe of 256 is due at 4 observations (4 x 0.285 >= 1); the
    # turn on 1.55 (chance t2_tail(ln 1.55 / 0.1414) = 0.045) not before 23.
    history = [record(1, 1, 128, "reached", 11.0), record(2, 2, 64, "reached", 10.0), record(3, 3, 32, "reached", 15.5)]
    policy = get_policy("default")
    assert policy.decide(spec, history, seed=3).stage == "exploitation"  # 3 x 0.285 < 1
    history += [record(4, 4, 64, "reached", 10.0), record(5, 5, 64, "reached", 10.0)]
    decision = policy.decide(spec, history, seed=5)
    assert decision.batch_size == 256 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(11.0)  # stopped past the default's cost (< beta x 10)


def test_a_turn_read_off_a_lucky_first_run_of_the_cheapest_step_is_probed_once_its_runs_say_so():
    spec = make_spec(beta_knob=2.0)
    # 64's first run (7.0) makes 32 (12.0) a hard turn at 1.71x; the up direction is skipped on the default
    # 128 (20.0). If 64's next three runs cost 12.5, its mean is 44.5 / 4 = 11.125: the turn compared 32 with
    # a run 64 does not usually make. Pooled noise: three equal repeats, shrunk toward the prior 0.1 with
    # weight 2: 0.1 x sqrt(2 / 4) = 0.0707. Against the mean 32's ratio is 12.0 / 11.125 = 1.079: noise with
    # chance t2_tail(ln 1.079 / sqrt(0.0707^2 + 0.1^2)) = 0.300, so at 6 observations (6 x 0.300 >= 1) 16 is
    # probed, stopped past 32's cost. The skip on 20.0 / 11.125 = 1.8 (chance 0.020) waits. If instead 64's
    # repeats cost 7.0, its first run was typical and the turn stays at 1.71x (chance 0.024): no probe yet.
    first = [record(1, 1, 128, "reached", 20.0), record(2, 2, 64, "reached", 7.0), record(3, 3, 32, "reached", 12.0)]
    policy = get_policy("default")
    lucky = first + [record(t, t, 64, "reached", 12.5) for t in (4, 5, 6)]
    decision = policy.decide(spec, lucky, seed=6)
    assert decision.batch_size == 16 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(12.0)
    typical = first + [record(t, t, 64, "reached", 7.0) for t in (4, 5, 6)]
    assert policy.decide(spec, typical, seed=6).stage == "exploitation"


def test_a_turn_far_outside_the_noise_is_probed_only_once_the_job_has_run_long():
    spec = make_spec(beta_knob=2.0)
    # 16 at 5x the cheapest, and the up direction skipped on 3x. 32 runs again at 10 and 11: its mean is 10.498,
    # the pooled noise 0.048. The skip on 30 / 10.498 = 2.86 is noise with chance
    # t2_tail(ln 2.86 / sqrt(0.048^2 + 0.1^2)) = 0.0055 (a size run once may be a noisy one), so at 150
    # observations no probe is due (150 x 0.0055 < 1) and at 250 the probe of 256 is (1.38), stopped at the
    # early stop, 2 x 10.498 (below its cap, the default's 30). The turn on 5x (250 x 0.0025 = 0.63) waits.
    history = [
        record(1, 1, 128, "reached", 30.0),
        record(2, 2, 64, "reached", 20.0),
        record(3, 3, 32, "reached", 10.0),
        record(4, 4, 16, "reached", 50.0),
    ]
    policy = get_policy("default")
    early = history + [record(t, t, 32, "reached", 10.0 if t % 2 else 11.0) for t in range(5, 151)]
    decision = policy.decide(spec, early, seed=150)
    assert decision.stage == "exploitation" and decision.batch_size == 32
    late = history + [record(t, t, 32, "reached", 10.0 if t % 2 else 11.0) for t in range(5, 251)]
    decision = policy.decide(spec, late, seed=250)
    assert decision.batch_size == 256 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(2.0 * (10.0 + 123 * 10.0 + 123 * 11.0) / 247)


def test_a_turn_against_a_size_whose_runs_never_vary_is_still_probed():
    spec = make_spec(beta_knob=2.0, batch_sizes=(8, 16, 32, 64, 128))
    # 64's one run (17.0) is a hard turn at 1.7x the default's 10.0, whose runs all cost 10.0: the pooled noise
    # falls toward 0 (0.1 x sqrt(2 / (m + 1)) after m repeats), but 64's own noise is unknown. At 32
    # observations (pooled 0.025) the chance is 0.0179 (32 x 0.0179 = 0.57), at 82 (pooled 0.016) 0.0173 (1.42):
    # 32 is probed, stopped past 64's 17.0.
    history = [record(1, 1, 128, "reached", 10.0), record(2, 2, 64, "reached", 17.0)]
    policy = get_policy("default")
    assert policy.decide(spec, history + [record(t, t, 128, "reached", 10.0) for t in range(3, 33)], 32).stage == (
        "exploitation"
    )
    decision = policy.decide(spec, history + [record(t, t, 128, "reached", 10.0) for t in range(3, 83)], seed=82)
    assert decision.batch_size == 32 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(17.0)


def skip_then_probe_of_256(status: str) -> list:
    """Sizes 32 .. 512: 64 (10.0) beat the default 128 (10.6) by 6 %, 32 missed, and the probe of 256 came
    back `status` at 10.5, near its cap 10.6 (the default's cost)."""
    return [
        record(1, 1, 128, "reached", 10.6),
        record(2, 2, 64, "reached", 10.0),
        record(3, 3, 32, "not_reached", 8.0),
        record(4, 4, 256, status, 10.5),
    ]


def test_a_probe_past_a_stopped_probe_waits_for_both_rises_to_be_noise():
    spec = make_spec(beta_knob=2.0, batch_sizes=(32, 64, 128, 256, 512))
    # 64 (10.0) beat the default 128 (10.6) by 6 %: the up direction is skipped on 1.06; 32 missed (the down
    # direction ends). The probe of 256 was stopped at 10.5, near its cap 10.6: a second rise. The probe of
    # 512 is due once n x chance(1.06)^2 >= 1. At the prior noise 0.1 a ratio of 1.06 is noise with chance
    # t2_tail(ln 1.06 / sqrt(0.1^2 + 0.1^2)) = 0.360: at 5 observations one rise would be due
    # (5 x 0.360 >= 1), two are not (5 x 0.130 < 1).
    history = [*skip_then_probe_of_256("cost_exceeded"), record(5, 5, 64, "reached", 10.0)]
    policy = get_policy("default")
    assert policy.decide(spec, history, seed=5).stage == "exploitation"
    # 20 more runs of 64 at 9 and 11 (mean 10, the pooled noise stays 0.1): at 25 observations
    # 25 x 0.36^2 >= 1, and 512 is probed, stopped past 256's cap.
    history += [record(t, t, 64, "reached", 9.0 if t % 2 else 11.0) for t in range(6, 26)]
    decision = policy.decide(spec, history, seed=25)
    assert decision.batch_size == 512 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(10.6)


def test_a_probe_cheaper_than_every_step_resumes_the_walk_from_it():
    # As in the skip within the noise: the skip of the up direction on 1.1 is probed at 5 observations, 256
    # stopped past 11.0.
    spec, policy = make_spec(beta_knob=2.0), get_policy("default")
    history = [record(1, 1, 128, "reached", 11.0), record(2, 2, 64, "reached", 10.0), record(3, 3, 32, "reached", 15.5)]
    history += [record(4, 4, 64, "reached", 10.0), record(5, 5, 64, "reached", 10.0), record(6, 6, 256, "reached", 8.0)]
    # 256 came back at 8, below every step: the turn was noise. The walk resumes there (256 is the largest
    # size, so it is over) and 256 is the one contender (64: mean 10 > 1.1 x 8, and outside one standard
    # error: the pooled noise from 64's two equal repeats is 0.1 x sqrt(2 / 3) = 0.082, 10 x (1 - 0.082 /
    # sqrt(3)) = 9.53 > 8), run again. The early stop follows: beta x 256's mean.
    d = policy.decide(spec, history, seed=6)
    assert (d.batch_size, d.stage, d.cost_threshold) == (256, "exploitation", 16.0)


def test_a_probe_that_misses_without_being_stopped_ends_its_direction_for_good():
    spec, policy = make_spec(beta_knob=2.0, batch_sizes=(32, 64, 128, 256, 512)), get_policy("default")
    # The history of the stopped probe's test, but 256 ran out of max_epochs (not_reached, not stopped): unlike a rise,
    # a miss ends the direction, and 512 is never probed however long the job runs.
    history = skip_then_probe_of_256("not_reached")
    history += [record(t, t, 64, "reached", 9.0 if t % 2 else 11.0) for t in range(5, 200)]
    assert {policy.decide(spec, history, seed=s).batch_size for s in range(5)} <= {64, 128}
