"""The policies' statistics of a job's history, computed over its columns (zeus_kfp.trial_history.TrialHistory).

Everything both policies derive a decision from is a statistic of the history, computed afresh for
every decision: per batch size its first observation (the walk's step), the count, sum, mean and
squared deviations of its costs (Zeus's Gaussian posterior), the same for its reached costs after the
first (the pooled noise of `turning-walk`), its reached count and sum (the retry stand-in,
`cheapest_reached_mean`, for a retry not known yet), the known charges and the pending misses of its misses
(zeus_kfp.policy.recurrences), and with a window the last `window_size` observations; the smallest size
that ran out of memory; the cheapest reached observation; the largest observed trial number; the
lowest spend of a recurrence that reached (the early-stop threshold); and Zeus's pruning walk.

Records are taken in trial order (then recurrence), the order they happened in; sums run in that
order. Nothing is kept between decisions: a history gives one tally, in any process.

Zeus's walk depends on which sizes are feasible, and an oom rules out every size from it up: only
the walk over the sizes that are still feasible matters, and it takes, in order, each observation of
the size it waits for (Zeus's `expecting` check), found by a search per step.

What is an observation, a miss, a spend: zeus_kfp.policy.history (the shared failure semantics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.policy import recurrences
from zeus_kfp.policy.pruning import PruningWalk, feasible_default
from zeus_kfp.trial_history import STATUS_CODE, TrialHistory
from zeus_kfp.trials import Trial

_NOT_LEARNED = [STATUS_CODE[TrialStatus.FAILED], STATUS_CODE[TrialStatus.OOM]]

# One observation in a window: (cost, reached, the retry charge of a miss: None while not known).
WindowEntry = tuple[float, bool, float | None]


@dataclass(frozen=True)
class Arm:
    """One batch size's statistics. first_cost is NaN before its first observation."""

    n: int  # observations (finished trials that were not failed or oom, with a cost)
    total: float  # their costs' sum, in trial order
    mean: float
    m2: float  # the sum of squared deviations from the mean
    first_cost: float
    first_reached: bool
    first_stopped: bool  # the early stop cut its first run short (cost_exceeded)
    reached_n: int
    reached_total: float
    rep_n: int  # reached observations after the size's first (which carries the profiling epoch)
    rep_mean: float
    rep_m2: float
    known: float  # the summed retry charges of its misses whose retry is known
    pending: int  # its misses whose retry is not known yet


def spend(spec: JobSpec, history: TrialHistory) -> np.ndarray:
    """What each finished trial cost its recurrence: from energy and time when both are known (the cost
    may be a penalty, not money spent: zeus_kfp.policy.history), its cost otherwise."""
    energy, time = history.energy_j, history.time_s
    parts = ~(np.isnan(energy) | np.isnan(time))
    priced = spec.cost_model.cost(np.nan_to_num(energy), np.nan_to_num(time))
    return np.where(parts, priced, np.nan_to_num(history.cost))


def _spread(values: np.ndarray) -> tuple[float, float]:
    """(mean, sum of squared deviations) of some costs; exactly (value, 0) when they are all equal (Zeus
    then collapses the posterior onto that value)."""
    if not len(values):
        return 0.0, 0.0
    if values.min() == values.max():
        return float(values[0]), 0.0
    mean = _in_order_sum(values) / len(values)
    return mean, float(((values - mean) ** 2).sum())


def _size_index(sizes: tuple[int, ...], batch_size: np.ndarray) -> np.ndarray:
    allowed = np.asarray(sizes, dtype=np.int64)
    order = np.argsort(allowed)
    where = np.clip(np.searchsorted(allowed[order], batch_size), 0, len(allowed) - 1)
    index = order[where]
    wrong = allowed[index] != batch_size
    if wrong.any():
        raise ValueError(
            f"invalid history: batch_size={int(batch_size[wrong][0])} is not one of the job's batch_sizes {list(sizes)}"
        )
    return index


class Tally:
    """The statistics of a job's history under `spec`."""

    def __init__(self, spec: JobSpec, history: TrialHistory) -> None:
        self.spec = spec
        self.sizes: tuple[int, ...] = spec.batch_sizes
        self._index = {b: i for i, b in enumerate(self.sizes)}
        h = history.in_trial_order()
        size = _size_index(self.sizes, h.batch_size)
        self.num_records = len(h)
        dispatched = h.has(TrialStatus.DISPATCHED)
        self.in_flight: list[Trial] = [h[i] for i in np.flatnonzero(dispatched)]
        finished = ~dispatched
        oom = h.has(TrialStatus.OOM)
        self.min_oom: int | None = int(h.batch_size[oom].min()) if oom.any() else None
        reached = h.has(TrialStatus.REACHED)
        observed = finished & ~np.isin(h.status, _NOT_LEARNED) & ~np.isnan(h.cost)
        charged = recurrences.charges(
            h.recurrence[finished], spend(self.spec, h)[finished], reached[finished], (observed & ~reached)[finished]
        )
        self.best_spend = charged.best_spend
        kept = observed[finished]
        self._size, self._cost, self._trial = size[observed], h.cost[observed], h.trial[observed]
        self._reached, self._charge = reached[observed], charged.charge[kept]
        self._stopped = h.has(TrialStatus.COST_EXCEEDED)[observed]
        self.max_trial: int | None = int(h.trial[observed].max()) if observed.any() else None
        self.arms = [self._arm(i) for i in range(len(self.sizes))]
        best = np.flatnonzero(self._reached)
        best = best[np.argmin(self._cost[best])] if len(best) else None  # the first of equals
        self.best_cost: float | None = None if best is None else float(self._cost[best])
        self.best_size: int | None = None if best is None else self.sizes[self._size[best]]

    def _arm(self, i: int) -> Arm:
        rows = np.flatnonzero(self._size == i)
        costs, reached = self._cost[rows], self._reached[rows]
        mean, m2 = _spread(costs)
        repeats = costs[1:][reached[1:]]
        rep_mean, rep_m2 = _spread(repeats)
        miss_charges = self._charge[rows][~reached]
        known = ~np.isnan(miss_charges)
        return Arm(
            n=len(rows),
            total=_in_order_sum(costs),
            mean=mean,
            m2=m2,
            first_cost=float(costs[0]) if len(rows) else math.nan,
            first_reached=bool(reached[0]) if len(rows) else False,
            first_stopped=bool(self._stopped[rows][0]) if len(rows) else False,
            reached_n=int(reached.sum()),
            reached_total=_in_order_sum(costs[reached]),
            rep_n=len(repeats),
            rep_mean=rep_mean,
            rep_m2=rep_m2,
            known=float(miss_charges[known].sum()),
            pending=int((~known).sum()),
        )

    # -- reading ---------------------------------------------------------------------------------

    def arm(self, batch_size: int) -> Arm:
        return self.arms[self._index[batch_size]]

    def window(self, batch_size: int) -> list[WindowEntry]:
        """The size's last `window_size` observations, oldest first."""
        rows = np.flatnonzero(self._size == self._index[batch_size])[-self.spec.window_size :]
        charges = [None if math.isnan(c) else float(c) for c in self._charge[rows]]
        return list(zip(self._cost[rows].tolist(), self._reached[rows].tolist(), charges, strict=True))

    def feasible(self) -> tuple[int, ...]:
        return tuple(b for b in self.sizes if self.min_oom is None or b < self.min_oom)

    def pruning_walk(self) -> PruningWalk | None:
        """Zeus's walk over the feasible sizes, fed every observation in trial order (None when no size is
        feasible). Only the size the walk waits for is taken, so each step is one search for that size's
        next observation."""
        feasible = self.feasible()
        if not feasible:
            return None
        default = feasible_default(feasible, self.spec.default_batch_size)
        walk = PruningWalk(feasible, default, self.spec.num_pruning_rounds)
        rows_of = {b: np.flatnonzero(self._size == self._index[b]) for b in feasible}
        after = -1
        while walk.expected is not None:
            rows = rows_of[walk.expected]
            k = int(np.searchsorted(rows, after, side="right"))
            if k == len(rows):
                break
            after = int(rows[k])
            walk.report(walk.expected, float(self._cost[after]), bool(self._reached[after]), int(self._trial[after]))
        return walk

    def cheapest_size_mean(self) -> float | None:
        """The cheapest size's mean cost: the lowest, over the sizes that have reached the target, of the mean
        of all the size's observations (a miss counted at what it cost, a lower bound of what the run would
        have); None while nothing has reached. What the best size costs per run: turning-walk's early stop is
        beta x this (docs/DESIGN.md, "Policy")."""
        means = [arm.mean for arm in self.arms if arm.reached_n]
        return min(means) if means else None

    def cheapest_reached_mean(self) -> float:
        """The lowest, over batch sizes, of the mean of the size's reached observations only (what a retry
        costs at best: it stands in for a miss's retry not known yet); 0 when nothing has reached."""
        means = [arm.reached_total / arm.reached_n for arm in self.arms if arm.reached_n]
        return min(means) if means else 0.0


def _in_order_sum(values: np.ndarray) -> float:
    """((0 + v1) + v2) + ...: the sum a running total gives (numpy's sum pairs terms up)."""
    return float(np.bincount(np.zeros(len(values), dtype=np.intp), weights=values, minlength=1)[0])
