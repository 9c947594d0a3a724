"""How a power limit is chosen from a power profile (zeus_kfp.profiles.PowerProfile): the optimum selectors.

Every choice of a limit goes through `choose_limit`: the live JIT profiler (zeus_kfp.power.profiler), a
trial that reuses a stored profile (zeus_kfp.power.reuse), the trace-backed trial (zeus_kfp.simulate.trace_trial)
and the report. It picks among the *valid* training rows only (PowerProfile.train_rows): a row whose power or
throughput is zero or not finite is a void window (the meter did not tick), which profiles stored
before zeus-kfp waited for the meter may still contain.

What "optimum" means is an `OptimumSelector`, after ml-energy/zeus `optimizer/power_limit.py`:
`ZeusCost` (the job's cost per unit of work, zeus_kfp.cost.CostModel.rate: what zeus-kfp uses, because the bandit
prices trials with the same cost), `Energy`, `Time` and `MaxSlowdown`. Ties go to the higher limit
(same figure, faster). On a noisy meter the figures are first fitted so that a lower limit is never faster
(OptimumSelector.pooled), which makes limits the noise cannot tell apart ties that the lower power wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from zeus_kfp.profiles import PowerProfile

# (power in W over all the job's GPUs, throughput in units/s) -> cost per unit of work: zeus_kfp.cost.CostModel.rate
CostRate = Callable[[float, float], float]


class OptimumSelector:
    """Chooses a power limit from the measured ones: `select` gets the limits with their average power
    (W, all GPUs) and throughput (units of work per second), valid rows only and pooled per limit (a limit
    measured in more than one window counts as their mean), at least one.

    Most selectors minimise a figure per limit (`figure`): the exact minimum, ties to the higher limit
    (same figure, faster), as Zeus chooses. On a noisy meter the live profiler sets two things from how
    precisely its windows measure (ProfileParams.rel_error): `monotone` (see `pooled`: limits the noise
    cannot tell apart share one throughput, and the lower power among them wins), and `tolerance`, how far
    apart (relatively) two figures must be for the search over limits (zeus_kfp.power.search) to call them
    different. Zeus's recorded profiles are exact: neither applies."""

    tolerance: float = 0.0
    monotone: bool = False

    def choose(self, profile: PowerProfile) -> float:
        limits, power, throughput = self.pooled(profile)
        return float(self.select(limits, power, throughput))

    def pooled(self, profile: PowerProfile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(limits, power, throughput) of the valid train rows, one entry per limit (means).

        `monotone`: a lower limit never makes a GPU faster, nor draw more. On a noisy meter the figures are
        fitted under that constraint (isotonic regression, weighted by windows), which pools neighbouring
        limits that noise alone ranks apart: where the throughput is truly flat (every limit above the
        point where it starts to bind) those limits' windows average together, and the lowest of a pooled
        run wins on power alone. Zeus's exact profiles are taken as they are."""
        rows = np.flatnonzero(profile.train_rows())
        if rows.size == 0:
            raise ValueError("profile has no valid train rows to choose a power limit from")
        columns = ("power_limit_w", "average_power_w", "throughput")
        limits, power, throughput = (profile.rows[c].to_numpy(dtype=float)[rows] for c in columns)
        if len(np.unique(limits)) == len(limits) and not self.monotone:
            return limits, power, throughput
        unique, which = np.unique(limits, return_inverse=True)  # ascending limits
        counts = np.bincount(which)
        power, throughput = np.bincount(which, power) / counts, np.bincount(which, throughput) / counts
        if self.monotone and len(unique) > 1:
            # scipy.optimize loads in ~0.4 s, paid by every pipeline step that imports this module: only a
            # noisy meter's profile, at the limit's choice, needs it.
            from scipy.optimize import isotonic_regression

            power = isotonic_regression(power, weights=counts.astype(float)).x
            throughput = isotonic_regression(throughput, weights=counts.astype(float)).x
        return unique, power, throughput

    def figure(self, power: np.ndarray, throughput: np.ndarray) -> np.ndarray | None:
        """The figure minimised per limit (None: the selector is not a minimum of a figure)."""
        return None

    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float:
        figure = self.figure(power, throughput)
        assert figure is not None, f"{type(self).__name__} overrides select"
        return _least(figure, limits)

    def differ(self, profile: PowerProfile, limit: float, other: float) -> bool:
        """Whether the figures of two measured limits are more than `tolerance` apart (True for a selector
        without a figure: it cannot say they are the same)."""
        limits, power, throughput = self.pooled(profile)
        figure = self.figure(power, throughput)
        if figure is None:
            return True
        one, two = (float(figure[limits == at][0]) for at in (limit, other))
        return abs(one - two) > max(one, two) * max(self.tolerance, 1e-9)

    def clearly_worse(self, profile: PowerProfile, limit: float) -> bool:
        """Whether `limit`'s figure is more than `tolerance` above the least measured one (False for a
        selector without a figure: nothing is clearly worse)."""
        limits, power, throughput = self.pooled(profile)
        figure = self.figure(power, throughput)
        if figure is None or limit not in limits:
            return False
        return bool(figure[limits == limit][0] > figure.min() * (1.0 + self.tolerance))


def _least(figure: np.ndarray, limits: np.ndarray) -> float:
    """The limit of the least figure; ties to the higher limit."""
    return float(limits[min(range(len(figure)), key=lambda i: (figure[i], -limits[i]))])


@dataclass(frozen=True)
class ZeusCost(OptimumSelector):
    """Least cost per unit of work, `cost_rate(power, throughput)`: the job's Zeus cost (NSDI'23)."""

    cost_rate: CostRate
    tolerance: float = 0.0
    monotone: bool = False

    def figure(self, power: np.ndarray, throughput: np.ndarray) -> np.ndarray:
        return np.array([self.cost_rate(float(p), float(t)) for p, t in zip(power, throughput, strict=True)])


class Energy(OptimumSelector):
    """Least energy per unit of work."""

    def figure(self, power: np.ndarray, throughput: np.ndarray) -> np.ndarray:
        return power / throughput


class Time(OptimumSelector):
    """Least time per unit of work (the highest throughput)."""

    def figure(self, power: np.ndarray, throughput: np.ndarray) -> np.ndarray:
        return 1.0 / throughput


@dataclass(frozen=True)
class MaxSlowdown(OptimumSelector):
    """The lowest limit whose throughput is at least 1/factor of the highest measured limit's."""

    factor: float

    def __post_init__(self) -> None:
        if not self.factor >= 1.0:
            raise ValueError(f"invalid factor={self.factor!r}: allowed a number >= 1")

    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float:
        fastest = throughput[int(np.argmax(limits))]
        return float(limits[throughput * self.factor >= fastest].min())


def as_selector(how: OptimumSelector | CostRate) -> OptimumSelector:
    """A selector as given, or a job's cost rate (CostModel.rate (JobSpec.cost_model)) as its ZeusCost selector."""
    return how if isinstance(how, OptimumSelector) else ZeusCost(how)


def choose_limit(profile: PowerProfile, how: OptimumSelector | CostRate) -> float:
    """The train-phase limit `how` chooses (a selector, or the job's cost rate for ZeusCost)."""
    return as_selector(how).choose(profile)
