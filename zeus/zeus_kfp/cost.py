"""What a trial costs: Zeus's cost model as a value, and the one sum of what trials spent.

Why a value (as Zeus's `ZeusCost`): pricing needs eta, the GPUs' maximum power and their count,
nothing else of the job. A training child prices its trial from the three settings its environment
carries (zeus_kfp.train.env), the profiler ranks power limits with the same model, and the policy, the
report and the simulator price figures with it, so a cost computed anywhere is the same number.
`JobSpec.cost_model` is the job's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Protocol


class Spent(Protocol):
    """What a sum of figures reads of a trial (zeus_kfp.trials.Trial has it): named here, not imported, because
    zeus_kfp.job holds a CostModel and zeus_kfp.trials builds on zeus_kfp.job (tests/test_layering.py: no circles)."""

    @property
    def cost(self) -> float | None: ...

    @property
    def energy_j(self) -> float | None: ...

    @property
    def time_s(self) -> float | None: ...


def zeus_cost(energy_j: float, time_s: float, *, eta: float, max_power_w: float, num_gpus: int) -> float:
    """Zeus's cost (NSDI'23, eq. 2): a weighted sum of energy and time, time priced at full power.

    eta = 1 counts energy only; eta = 0 counts time only (in joules the GPUs could have drawn).
    """
    return eta * energy_j + (1.0 - eta) * max_power_w * num_gpus * time_s


@dataclass(frozen=True)
class CostModel:
    """Zeus's cost with its three parameters: `eta` (the job's eta_knob), a GPU's maximum power limit in
    watts and the number of GPUs a trial trains on (time is priced at all of them drawing full power)."""

    eta: float
    max_power_w: float
    num_gpus: int

    def cost(self, energy_j: float, time_s: float) -> float:
        """The cost of spending `energy_j` (all GPUs together) over `time_s`; elementwise on numpy or pandas
        figures too (the policy and the report price whole columns)."""
        return zeus_cost(energy_j, time_s, eta=self.eta, max_power_w=self.max_power_w, num_gpus=self.num_gpus)

    def rate(self, power_w: float, throughput: float) -> float:
        """The cost per unit of work at `power_w` (all GPUs together) and `throughput` units/s: the JIT
        profiler's objective. One unit takes 1/throughput s and power/throughput J, priced by `cost`
        itself, so this is the same formula, not a second one. Infinite when nothing was done."""
        if not throughput > 0:
            return math.inf
        return self.cost(power_w / throughput, 1.0 / throughput)


@dataclass(frozen=True)
class Figures:
    """What some trials spent together: cost, energy and time (a recurrence, a job, an expectation)."""

    cost: float
    energy_j: float
    time_s: float

    @classmethod
    def of(cls, trials: Iterable[Spent]) -> Figures:
        """The sum over `trials` of their figures; a trial without figures (dispatched, or failed without
        reporting) adds nothing. A recurrence's cost is this sum over its trials, failed attempts included:
        exploring a batch size that misses the target is part of what the recurrence cost (Zeus, NSDI'23)."""
        cost = energy = time = 0.0
        for trial in trials:
            cost += trial.cost or 0.0
            energy += trial.energy_j or 0.0
            time += trial.time_s or 0.0
        return cls(cost, energy, time)

    def times(self, n: int) -> Figures:
        return Figures(self.cost * n, self.energy_j * n, self.time_s * n)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)
