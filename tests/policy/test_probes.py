"""Probes past a turn, on hand-worked histories: when one is due, what it is stopped at, and what its result
does to the walk (docs/DESIGN.md, "Policy": probes). The spec is tests.policy.helpers.make_spec (sizes 8 ..
256, default 128) unless a test says otherwise."""

from __future__ import annotations

import pytest
from scipy.stats import norm

from tests.policy.helpers import make_spec, record
from zeus_kfp.policy import get_policy
from zeus_kfp.policy.turning_walk import wrong_turn_chance


def test_the_chance_that_a_turn_is_noise_is_the_tail_of_two_runs_log_ratio():
    # log(1.1) / (sqrt(2) x 0.1) = 0.674 standard deviations: a quarter of equal pairs look that far apart.
    assert wrong_turn_chance(1.1, 0.1) == pytest.approx(norm.sf(0.0953102 / 0.1414214), rel=1e-5)
    assert wrong_turn_chance(1.1, 0.1) == pytest.approx(0.2502, abs=1e-4)
    assert wrong_turn_chance(1.5, 0.1) < 0.003 < 0.07 < wrong_turn_chance(1.5, 0.2)  # the job's noise decides
    assert wrong_turn_chance(1.0, 0.1) == 0.5


def test_a_skip_within_the_noise_is_probed_once_the_job_has_run_long_enough_to_pay_for_it():
    spec = make_spec(beta_knob=2.0)
    # 64 (10) beat the default 128 (11) by 9 %: the up direction is skipped on a ratio of 1.1; 32 (15.5) is
    # a hard turn, 1.55x the cheapest. No repeats yet: the pooled noise is the prior, 0.1. A skip on 1.1 is
    # noise with chance 0.250 (above), so the probe of 256 is due at 4 observations (4 x 0.250 >= 1); the
    # turn on 1.55 (chance 0.0010) not for about a thousand.
    history = [record(1, 1, 128, "reached", 11.0), record(2, 2, 64, "reached", 10.0), record(3, 3, 32, "reached", 15.5)]
    policy = get_policy("default")
    assert policy.decide(spec, history, seed=3).stage == "exploitation"  # 3 x 0.250 < 1
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
    # chance Phi(-ln 1.079 / (sqrt(2) x 0.0707)) = 0.224, so at 6 observations (6 x 0.224 >= 1) 16 is probed,
    # stopped past 32's cost. The skip on 20.0 / 11.125 = 1.8 waits. If instead 64's repeats cost 7.0, its
    # first run was typical and the turn stays at 1.71x (chance 3e-8): no probe.
    first = [record(1, 1, 128, "reached", 20.0), record(2, 2, 64, "reached", 7.0), record(3, 3, 32, "reached", 12.0)]
    policy = get_policy("default")
    lucky = first + [record(t, t, 64, "reached", 12.5) for t in (4, 5, 6)]
    decision = policy.decide(spec, lucky, seed=6)
    assert decision.batch_size == 16 and decision.stage == "exploration"
    assert decision.cost_threshold == pytest.approx(12.0)
    typical = first + [record(t, t, 64, "reached", 7.0) for t in (4, 5, 6)]
    assert policy.decide(spec, typical, seed=6).stage == "exploitation"


def test_a_turn_far_outside_the_noise_is_never_probed():
    spec = make_spec(beta_knob=2.0)
    # 16 at 5x the cheapest, and the up direction skipped on 3x: neither is a ratio noise makes.
    history = [
        record(1, 1, 128, "reached", 30.0),
        record(2, 2, 64, "reached", 20.0),
        record(3, 3, 32, "reached", 10.0),
        record(4, 4, 16, "reached", 50.0),
    ]
    history += [record(t, t, 32, "reached", 10.0 if t % 2 else 11.0) for t in range(5, 400)]
    decision = get_policy("default").decide(spec, history, seed=400)
    assert decision.stage == "exploitation" and decision.batch_size == 32


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
    # Phi(-ln 1.06 / (sqrt(2) x 0.1)) = 0.340: at 5 observations one rise would be due
    # (5 x 0.340 >= 1), two are not (5 x 0.116 < 1).
    history = [*skip_then_probe_of_256("cost_exceeded"), record(5, 5, 64, "reached", 10.0)]
    policy = get_policy("default")
    assert policy.decide(spec, history, seed=5).stage == "exploitation"
    # 20 more runs of 64 at 9 and 11 (mean 10, the pooled noise stays near 0.11): at 25 observations
    # 25 x 0.35^2 >= 1, and 512 is probed, stopped past 256's cap.
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
