"""Gaussian Thompson sampling over batch sizes, as in Zeus's legacy `GaussianTS` (reward = -cost).

Each arm's reward is modelled as Gaussian with a known precision, estimated as 1 / (population
variance of its observed rewards); the arm's mean has a Gaussian prior (mean 0, precision 0 by
default, i.e. flat). Conjugate update over n rewards with reward precision p:

    posterior precision = prior precision + n * p
    posterior mean      = (prior precision * prior mean + p * sum(rewards)) / posterior precision

When the rewards have zero variance (p infinite) the posterior collapses onto their mean, and a
sample returns it exactly (Zeus does the same). Arms with too few observations are tried first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Posterior:
    """Posterior over an arm's mean reward. `precision` is inf when the rewards had no spread."""

    mean: float
    precision: float
    num_observations: int


def posterior(rewards: np.ndarray, prior_mean: float = 0.0, prior_precision: float = 0.0) -> Posterior:
    """Conjugate Gaussian update of the prior with `rewards` (reward precision = 1 / their variance)."""
    rewards = np.asarray(rewards, dtype=float)
    n = int(rewards.size)
    if n == 0:
        return Posterior(prior_mean, prior_precision, 0)
    return posterior_of(n, float(rewards.sum()), float(rewards.mean()), float(np.var(rewards)), prior_mean,
                        prior_precision)  # fmt: skip


def posterior_of(
    n: int, total: float, mean: float, variance: float, prior_mean: float = 0.0, prior_precision: float = 0.0
) -> Posterior:
    """The same update from the rewards' count, sum, mean and (population) variance: what a tally keeps
    (zeus_kfp.policy.tally) instead of the rewards themselves."""
    if n == 0:
        return Posterior(prior_mean, prior_precision, 0)
    if variance == 0.0:
        return Posterior(mean, float("inf"), n)
    reward_precision = 1.0 / variance
    precision = prior_precision + n * reward_precision
    return Posterior((prior_precision * prior_mean + reward_precision * total) / precision, precision, n)


def sample_means(posteriors: list[Posterior], rng: np.random.Generator) -> np.ndarray:
    """One draw of each arm's mean reward, in the order given (one normal draw per arm)."""
    means = np.array([p.mean for p in posteriors])
    precisions = np.array([p.precision for p in posteriors])
    with np.errstate(divide="ignore"):
        stds = np.sqrt(np.where(np.isinf(precisions), 0.0, 1.0 / precisions))
    return rng.normal(means, stds)


def thompson_pick(
    arms: list[int], posteriors: list[Posterior], rng: np.random.Generator, min_observations: int = 2
) -> tuple[int, str]:
    """Pick an arm: a random under-observed arm first, else the arm with the largest sampled mean reward."""
    cold = [arm for arm, p in zip(arms, posteriors, strict=True) if p.num_observations < min_observations]
    if cold:
        arm = int(cold[int(rng.integers(len(cold)))])
        return arm, f"batch size {arm} has fewer than {min_observations} observations"
    draws = sample_means(posteriors, rng)
    best = int(np.argmax(draws))
    return int(arms[best]), f"sampled mean cost {-draws[best]:.4g} is the lowest of {len(arms)} arms"
