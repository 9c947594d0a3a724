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
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from zeus.job import JobSpec, TrialRecord, TrialStatus


class NoFeasibleBatchSizeError(ValueError):
    """Every candidate batch size ran out of memory: there is nothing left to try."""


@dataclass(frozen=True)
class HistoryView:
    """What a policy needs from the history, computed once per decision.

    Observations are finished trials the bandit learns from (not failed, not oom), in trial
    order, held as parallel numpy arrays so a 10,000-trial history costs milliseconds.
    """

    feasible: tuple[int, ...]  # candidate sizes still allowed (below the smallest oom)
    obs_sizes: np.ndarray  # int, batch size of each observation
    obs_trials: np.ndarray  # int, its trial number
    obs_costs: np.ndarray  # float, its cost as reported
    obs_reached: np.ndarray  # bool, whether it reached the target
    obs_charged: np.ndarray  # float, its cost plus, for a miss, the retry it forced (see `retry_charges`)
    dispatched: tuple[TrialRecord, ...]  # in flight
    best_spend: float | None  # lowest spend of a recurrence that reached the target
    best_reached_size: int | None  # batch size of the cheapest single reached trial
    num_records: int

    def threshold(self, spec: JobSpec) -> float | None:
        """Early-stop threshold: beta x the lowest recurrence spend; None without early stop or a finish."""
        if spec.beta_knob is None or self.best_spend is None:
            return None
        return spec.beta_knob * self.best_spend

    def observations(self) -> zip:
        """(batch_size, cost, reached) per observation, in trial order."""
        return zip(self.obs_sizes.tolist(), self.obs_costs.tolist(), self.obs_reached.tolist(), strict=True)

    def costs(self, batch_size: int, window_size: int = 0) -> np.ndarray:
        """This size's observed costs, oldest first; the last `window_size` of them when it is > 0."""
        costs = self.obs_costs[self.obs_sizes == batch_size]
        return costs[-window_size:] if window_size > 0 else costs

    def charged_costs(self, batch_size: int, window_size: int = 0) -> np.ndarray:
        """Like `costs`, but each miss charged what it cost its recurrence (see `retry_charges`)."""
        charged = self.obs_charged[self.obs_sizes == batch_size]
        return charged[-window_size:] if window_size > 0 else charged

    def has_reached(self, batch_size: int) -> bool:
        """Whether any observation at this size reached the target."""
        return bool(self.obs_reached[self.obs_sizes == batch_size].any())

    def best_reached_cost(self) -> float | None:
        """The cheapest single reached trial's cost."""
        reached = self.obs_costs[self.obs_reached]
        return float(reached.min()) if reached.size else None

    def in_flight(self, batch_size: int) -> bool:
        return any(r.batch_size == batch_size for r in self.dispatched)


def _column(records: list[TrialRecord], name: str) -> np.ndarray:
    values = [getattr(r, name) for r in records]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def read_history(spec: JobSpec, history: Sequence[TrialRecord]) -> HistoryView:
    """Summarize `history` (any order; sorted here by trial id) under the shared failure semantics."""
    records = sorted(history, key=attrgetter("trial", "recurrence"))
    sizes = np.fromiter((r.batch_size for r in records), dtype=np.int64, count=len(records))
    unknown = sorted(set(np.unique(sizes).tolist()) - set(spec.batch_sizes))
    if unknown:
        raise ValueError(
            f"invalid history: batch_size={unknown[0]} is not one of the job's batch_sizes {list(spec.batch_sizes)}"
        )
    statuses = [r.status for r in records]
    oom = np.array([s is TrialStatus.OOM for s in statuses], dtype=bool)
    limit = int(sizes[oom].min()) if oom.any() else math.inf
    feasible = tuple(b for b in spec.batch_sizes if b < limit)
    if not feasible:
        raise NoFeasibleBatchSizeError(
            f"every batch size ran out of memory (smallest oom at {limit}); "
            f"allowed batch_sizes must include a size below {limit}"
        )
    dispatched = np.array([s is TrialStatus.DISPATCHED for s in statuses], dtype=bool)
    failed = np.array([s is TrialStatus.FAILED for s in statuses], dtype=bool)
    reached = np.array([s is TrialStatus.REACHED for s in statuses], dtype=bool)
    costs, energy, time = _column(records, "cost"), _column(records, "energy_j"), _column(records, "time_s")
    recurrences = np.fromiter((r.recurrence for r in records), dtype=np.int64, count=len(records))
    trials = np.fromiter((r.trial for r in records), dtype=np.int64, count=len(records))

    # Spend: recomputed from energy and time where known (cost may be a penalty, see module doc).
    measured = ~np.isnan(energy) & ~np.isnan(time)
    spend = np.where(measured, spec.cost(np.nan_to_num(energy), np.nan_to_num(time)), np.nan_to_num(costs))
    finished = ~dispatched
    best_spend = None
    if reached.any():
        keys, inverse = np.unique(recurrences[finished], return_inverse=True)
        per_recurrence = np.bincount(inverse, weights=spend[finished], minlength=keys.size)
        done = np.isin(keys, recurrences[reached & finished])
        best_spend = float(per_recurrence[done].min())

    learn = finished & ~failed & ~oom & ~np.isnan(costs)
    obs_sizes, obs_costs, obs_reached = sizes[learn], costs[learn], reached[learn]
    charges = retry_charges(
        recurrences, spend, finished, reached, fallback=_cheapest_mean(obs_sizes, obs_costs, obs_reached)
    )
    best_size = None
    if obs_reached.any():
        k = int(np.argmin(np.where(obs_reached, obs_costs, np.inf)))
        best_size = int(obs_sizes[k]) if int(obs_sizes[k]) in feasible else None
    return HistoryView(
        feasible=feasible,
        obs_sizes=obs_sizes,
        obs_trials=trials[learn],
        obs_costs=obs_costs,
        obs_reached=obs_reached,
        obs_charged=obs_costs + np.where(obs_reached, 0.0, charges[learn]),
        dispatched=tuple(r for r, d in zip(records, dispatched.tolist(), strict=True) if d),
        best_spend=best_spend,
        best_reached_size=best_size,
        num_records=len(records),
    )


def _cheapest_mean(sizes: np.ndarray, costs: np.ndarray, reached: np.ndarray) -> float:
    """The lowest mean cost of reached trials over batch sizes; 0 when nothing has reached yet."""
    if not reached.any():
        return 0.0
    _, inverse = np.unique(sizes[reached], return_inverse=True)
    means = np.bincount(inverse, weights=costs[reached]) / np.bincount(inverse)
    return float(means.min())


def retry_charges(
    recurrences: np.ndarray, spend: np.ndarray, finished: np.ndarray, reached: np.ndarray, *, fallback: float
) -> np.ndarray:
    """Per record (in trial order): what the rest of its recurrence spent to reach the target.

    Why: a trial that misses the target does not end its recurrence; the recurrence pays for the retry
    too. Charging a miss only its own cost makes it look cheap (it was cut off at max_epochs or the
    threshold), and a bandit that compares costs then prefers the size that never finishes the job. So
    a miss is charged its own cost plus the spend of the later trials of its recurrence up to the one
    that reached, when that is known; while it is not (the retry is still running, or the recurrence
    ran out of attempts), the cheapest mean cost of a reached size stands in: what a retry costs at
    best. Nothing has reached yet: 0 (exploration compares misses among themselves).
    """
    n = recurrences.size
    charges = np.full(n, fallback, dtype=float)
    if n == 0:
        return charges
    order = np.lexsort((np.arange(n), recurrences))  # by recurrence, then trial order
    rec = recurrences[order]
    paid = np.concatenate(([0.0], np.cumsum(np.where(finished[order], spend[order], 0.0))))
    group = np.cumsum(np.r_[True, rec[1:] != rec[:-1]]) - 1
    last = np.full(group[-1] + 1, -1)  # per recurrence, position of its last reached trial (-1: none)
    hits = np.flatnonzero(finished[order] & reached[order])
    np.maximum.at(last, group[hits], hits)
    reach = last[group]
    pos = np.arange(n)
    known = pos < reach  # the trials before the one that reached: their retries are known
    # The spend of the trials after each one, up to and including the one that reached.
    charges[order[known]] = paid[reach[known] + 1] - paid[pos[known] + 1]
    return charges


def decision_rng(seed: int, num_records: int) -> np.random.Generator:
    """The decision's randomness: a function of the seed and how much history there is, nothing else."""
    return np.random.default_rng([seed % 2**64, num_records])
