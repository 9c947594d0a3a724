"""How a power limit is chosen from a power profile (zeus_kfp.profiles.PowerProfile): the optimum selectors.

Every choice of a limit goes through `choose_limit`: the live JIT profiler (zeus_kfp.power.profiler), a
trial that reuses a stored profile (zeus_kfp.power.reuse), the trace-backed trial (zeus_kfp.simulate.trial)
and the report. It picks among the *valid* training rows only (PowerProfile.train_rows): a row whose power or
throughput is zero or not finite is a void window (the meter did not tick), which profiles stored
before zeus-kfp waited for the meter may still contain.

What "optimum" means is an `OptimumSelector`, after ml-energy/zeus `optimizer/power_limit.py`:
`ZeusCost` (the job's cost per unit of work, zeus_kfp.cost.CostModel.rate: what zeus-kfp uses, because the bandit
prices trials with the same cost), `Energy`, `Time` and `MaxSlowdown`. Ties go to the higher limit
(same figure, faster).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from zeus_kfp.profiles import PowerProfile

# (power in W over all the job's GPUs, throughput in units/s) -> cost per unit of work: zeus_kfp.cost.CostModel.rate
CostRate = Callable[[float, float], float]


class OptimumSelector(ABC):
    """Chooses a power limit from the measured ones: `select` gets the limits with their average power
    (W, all GPUs) and throughput (units of work per second), valid rows only, at least one."""

    def choose(self, profile: PowerProfile) -> float:
        rows = np.flatnonzero(profile.train_rows())
        if rows.size == 0:
            raise ValueError("profile has no valid train rows to choose a power limit from")
        columns = ("power_limit_w", "average_power_w", "throughput")
        limits, power, throughput = (profile.rows[c].to_numpy(dtype=float)[rows] for c in columns)
        return float(self.select(limits, power, throughput))

    @abstractmethod
    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float: ...


def _least(figure: list[float], limits: np.ndarray) -> float:
    """The limit of the least figure; ties to the higher limit."""
    return float(limits[min(range(len(figure)), key=lambda i: (figure[i], -limits[i]))])


@dataclass(frozen=True)
class ZeusCost(OptimumSelector):
    """Least cost per unit of work, `cost_rate(power, throughput)`: the job's Zeus cost (NSDI'23)."""

    cost_rate: CostRate

    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float:
        return _least([self.cost_rate(float(p), float(t)) for p, t in zip(power, throughput, strict=True)], limits)


class Energy(OptimumSelector):
    """Least energy per unit of work."""

    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float:
        return _least(list(power / throughput), limits)


class Time(OptimumSelector):
    """Least time per unit of work (the highest throughput)."""

    def select(self, limits: np.ndarray, power: np.ndarray, throughput: np.ndarray) -> float:
        return _least(list(1.0 / throughput), limits)


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
