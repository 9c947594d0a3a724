"""Gaussian Thompson sampling: the conjugate posterior by hand, and how arms are picked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeus_kfp.policy.gts import Posterior, posterior, sample_means, thompson_pick


def test_flat_prior_posterior_is_sample_mean_with_precision_n_over_variance():
    p = posterior(np.array([-10.0, -12.0, -14.0]))
    # population variance 8/3 -> reward precision 3/8; posterior precision 3 * 3/8
    assert p.mean == pytest.approx(-12.0)
    assert p.precision == pytest.approx(9 / 8)
    assert p.num_observations == 3


def test_informative_prior_is_weighted_in():
    p = posterior(np.array([-10.0, -12.0, -14.0]), prior_mean=-5.0, prior_precision=1.0)
    assert p.precision == pytest.approx(1 + 9 / 8)
    assert p.mean == pytest.approx((1 * -5.0 + 3 / 8 * -36.0) / (1 + 9 / 8))


def test_identical_rewards_collapse_to_their_mean():
    p = posterior(np.array([-7.0, -7.0]))
    assert p.mean == -7.0 and math.isinf(p.precision)
    draws = sample_means([p, Posterior(-7.5, math.inf, 2)], np.random.default_rng(0))
    assert list(draws) == [-7.0, -7.5]


def test_no_rewards_leaves_the_prior():
    assert posterior(np.array([])) == Posterior(0.0, 0.0, 0)


def test_samples_spread_as_the_posterior_says():
    p = Posterior(-10.0, 4.0, 5)  # std 0.5
    draws = np.array([sample_means([p], np.random.default_rng(i))[0] for i in range(2000)])
    assert draws.mean() == pytest.approx(-10.0, abs=0.05)
    assert draws.std() == pytest.approx(0.5, rel=0.1)


def test_under_observed_arms_go_first_then_the_best_sample_wins():
    rng = np.random.default_rng(0)
    arm, why = thompson_pick([1, 2, 3], [Posterior(-1, 1, 2), Posterior(-1, 1, 1), Posterior(-1, 1, 2)], rng)
    assert arm == 2 and "fewer than 2" in why
    sure = [Posterior(-5, math.inf, 3), Posterior(-1, math.inf, 3), Posterior(-9, math.inf, 3)]
    assert thompson_pick([1, 2, 3], sure, rng)[0] == 2
