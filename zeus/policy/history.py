"""One pass over a job's trial history: the facts every policy derives its decision from.

Policies are stateless, so each decision starts from the raw history. This module turns it
into the few things they need, with the failure semantics both policies share:

- oom at batch size b rules out every size >= b for this job (memory only grows with b);
- failed trials are forgotten (the script broke for its own reasons; the user fixes it);
- not_reached and cost_exceeded are observations: a failed exploration, or a poor reward;
- dispatched trials (no result yet) are in flight, from this or a concurrent recurrence.

A recurrence's *spend* is the sum of its finished trials' energy-time cost. It is computed
from energy and time when the record has them, because `cost` is what the policy learns from
and may be a penalty rather than money spent (the simulator's 0-epoch quirk reports 100 x the
threshold for a trial that never ran). The early-stop threshold is beta x the lowest spend of
a recurrence that reached the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from zeus.job import JobSpec, TrialRecord, TrialStatus


class NoFeasibleBatchSizeError(ValueError):
    """Every candidate batch size ran out of memory: there is nothing left to try."""


@dataclass(frozen=True)
class Observation:
    """A finished trial the bandit learns from, in trial order."""

    trial: int
    recurrence: int
    batch_size: int
    cost: float
    reached: bool


@dataclass(frozen=True)
class HistoryView:
    """What a policy needs from the history, computed once per decision."""

    feasible: tuple[int, ...]  # candidate sizes still allowed (below the smallest oom)
    observations: tuple[Observation, ...]  # finished, not failed, not oom; trial order
    dispatched: tuple[TrialRecord, ...]  # in flight
    best_spend: float | None  # lowest spend of a recurrence that reached the target
    best_reached_size: int | None  # batch size of the cheapest single reached trial
    num_records: int
    arm_costs: dict[int, np.ndarray] = field(default_factory=dict)  # per size, costs in trial order

    def threshold(self, spec: JobSpec) -> float | None:
        """Early-stop threshold: beta x the lowest recurrence spend; None without early stop or a finish."""
        if spec.beta_knob is None or self.best_spend is None:
            return None
        return spec.beta_knob * self.best_spend

    def costs(self, batch_size: int, window_size: int = 0) -> np.ndarray:
        """This size's observed costs, oldest first; the last `window_size` of them when it is > 0."""
        costs = self.arm_costs.get(batch_size)
        if costs is None:
            return np.empty(0)
        return costs[-window_size:] if window_size > 0 else costs

    def in_flight(self, batch_size: int) -> bool:
        return any(r.batch_size == batch_size for r in self.dispatched)


def _spend(spec: JobSpec, record: TrialRecord) -> float:
    if record.energy_j is not None and record.time_s is not None:
        return spec.cost(record.energy_j, record.time_s)
    return record.cost if record.cost is not None else 0.0


def read_history(spec: JobSpec, history: Sequence[TrialRecord]) -> HistoryView:
    """Summarize `history` (any order; sorted here by trial id) under the shared failure semantics."""
    records = sorted(history, key=lambda r: (r.trial, r.recurrence))
    unknown = sorted({r.batch_size for r in records} - set(spec.batch_sizes))
    if unknown:
        raise ValueError(
            f"invalid history: batch_size={unknown[0]} is not one of the job's batch_sizes {list(spec.batch_sizes)}"
        )
    oom = [r.batch_size for r in records if r.status is TrialStatus.OOM]
    limit = min(oom) if oom else math.inf
    feasible = tuple(b for b in spec.batch_sizes if b < limit)
    if not feasible:
        raise NoFeasibleBatchSizeError(
            f"every batch size ran out of memory (smallest oom at {limit}); "
            f"allowed batch_sizes must include a size below {limit}"
        )

    observations: list[Observation] = []
    dispatched: list[TrialRecord] = []
    spend: dict[int, float] = {}
    reached_recurrences: set[int] = set()
    best_trial_cost, best_size = math.inf, None
    per_arm: dict[int, list[float]] = {}
    for r in records:
        status = r.status
        if status is TrialStatus.DISPATCHED:
            dispatched.append(r)
            continue
        spend[r.recurrence] = spend.get(r.recurrence, 0.0) + _spend(spec, r)
        if status is TrialStatus.FAILED or status is TrialStatus.OOM or r.cost is None:
            continue
        reached = status is TrialStatus.REACHED
        observations.append(Observation(r.trial, r.recurrence, r.batch_size, float(r.cost), reached))
        per_arm.setdefault(r.batch_size, []).append(float(r.cost))
        if reached:
            reached_recurrences.add(r.recurrence)
            if r.cost < best_trial_cost:
                best_trial_cost, best_size = float(r.cost), r.batch_size
    finished_spend = [spend[k] for k in reached_recurrences]
    return HistoryView(
        feasible=feasible,
        observations=tuple(observations),
        dispatched=tuple(dispatched),
        best_spend=min(finished_spend) if finished_spend else None,
        best_reached_size=best_size if best_size in feasible else None,
        num_records=len(records),
        arm_costs={b: np.asarray(c) for b, c in per_arm.items()},
    )


def decision_rng(seed: int, num_records: int) -> np.random.Generator:
    """The decision's randomness: a function of the seed and how much history there is, nothing else."""
    return np.random.default_rng([seed % 2**64, num_records])
