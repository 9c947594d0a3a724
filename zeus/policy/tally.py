"""The policies' state as a fold over trial records: `Tally.add` takes one record at a time, in trial order.

Everything both policies derive a decision from is a running statistic of the history, so the history
never needs to be read again: per batch size its first observation (the `default` walk's step), the count,
sum and Welford mean and sum of squared deviations of its costs (Zeus's Gaussian posterior), the same for
its reached costs after the first (the pooled noise of `default`), its reached count and sum (the cheapest
mean, which stands in for a retry not known yet), the known charges and the pending misses of its misses
(zeus.policy.recurrences), and with a window the last `window_size` observations; the smallest size that
ran out of memory; the cheapest reached observation; the largest observed trial number; per recurrence
its spend (the early-stop threshold); and Zeus's pruning walk, folded observation by observation.

Zeus's walk depends on which sizes are feasible, and a later oom can shrink that set, which would replay
the walk over fewer sizes from the start. So one walk is kept per set the oom rule can leave (the
smallest k sizes, k = 1..n), each fed every observation; an oom drops the walks of larger sets. Each
accepts only the size it waits for and ends after a few rounds, so this costs little.

What is an observation, a miss, a spend: zeus.policy.history (the shared failure semantics). The fold is
the only way the policies read a history (`read_history` folds the records from an empty tally, on
every decision), so one history gives one decision, to the last bit, in any process.
"""

from __future__ import annotations

import math
import sys
from collections import deque

from zeus.job import JobSpec, TrialRecord, TrialStatus
from zeus.policy.pruning import PruningWalk, feasible_default
from zeus.policy.recurrences import Recurrences

# Per-size statistics (see _Arm).
ARM_FIELDS = ("n", "total", "mean", "m2", "first_cost", "first_reached", "reached_n", "reached_total", "rep_n",
              "rep_mean", "rep_m2", "known", "pending")  # fmt: skip
_NOT_LEARNED = (TrialStatus.FAILED, TrialStatus.OOM)


def _nan_to_num(value: float | None) -> float:
    """numpy's nan_to_num for one value: NaN (or None) -> 0, +-inf -> +-the largest float."""
    if value is None or value != value:
        return 0.0
    if math.isinf(value):
        return math.copysign(sys.float_info.max, value)
    return float(value)


def spend(spec: JobSpec, record: TrialRecord) -> float:
    """What a finished trial cost its recurrence: from energy and time when both are known (the cost may
    be a penalty, not money spent: zeus.policy.history), its cost otherwise."""
    energy, time = record.energy_j, record.time_s
    if energy is None or time is None or energy != energy or time != time:  # x != x: NaN
        return _nan_to_num(record.cost)
    return spec.cost(_nan_to_num(energy), _nan_to_num(time))


class _Arm:
    """One batch size's statistics (ARM_FIELDS). first_cost is NaN until its first observation."""

    __slots__ = ARM_FIELDS

    def __init__(self) -> None:
        defaults = (0, 0.0, 0.0, 0.0, math.nan, False, 0, 0.0, 0, 0.0, 0.0, 0.0, 0)
        for name, value in zip(ARM_FIELDS, defaults, strict=True):
            setattr(self, name, value)

    def observe(self, cost: float, reached: bool) -> None:
        if self.n == 0:
            self.first_cost, self.first_reached = cost, reached
        elif reached:  # a repeat that reached: the noise of a size's cost, without its first (profiling) trial
            self.rep_n += 1
            delta = cost - self.rep_mean
            self.rep_mean += delta / self.rep_n
            self.rep_m2 += delta * (cost - self.rep_mean)
        self.n += 1
        self.total += cost
        delta = cost - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (cost - self.mean)
        if reached:
            self.reached_n += 1
            self.reached_total += cost


# One observation in a window: (cost, reached, recurrence, trial, its recurrence's spend through it).
WindowEntry = tuple[float, bool, int, int, float]


class Tally:
    """The fold of a job's trial records (in trial order) under `spec`."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.sizes: tuple[int, ...] = spec.batch_sizes
        self._index = {b: i for i, b in enumerate(self.sizes)}
        self.arms = [_Arm() for _ in self.sizes]
        self.recurrences = Recurrences()
        self.num_records = 0
        self.min_oom: int | None = None
        self.best_cost: float | None = None  # the cheapest reached observation (the first of equals)
        self.best_size: int | None = None
        self.max_trial: int | None = None  # the largest trial number observed
        self.windows: list[deque[WindowEntry]] = [deque(maxlen=spec.window_size) for _ in self.sizes]
        self.walks: dict[int, PruningWalk] = {
            k: PruningWalk(self.sizes[:k], feasible_default(self.sizes[:k], spec.default_batch_size),
                           spec.num_pruning_rounds)
            for k in range(1, len(self.sizes) + 1)
        }  # fmt: skip
        self.in_flight: list[TrialRecord] = []  # dispatched records

    # -- folding ---------------------------------------------------------------------------------

    def add(self, record: TrialRecord) -> None:
        """Fold one record; records must come in trial order."""
        i = self._index.get(record.batch_size)
        if i is None:
            raise ValueError(
                f"invalid history: batch_size={record.batch_size} is not one of the job's batch_sizes "
                f"{list(self.sizes)}"
            )
        self.num_records += 1
        status = record.status
        if status is TrialStatus.DISPATCHED:
            self.in_flight.append(record)
            return
        if status is TrialStatus.OOM and (self.min_oom is None or record.batch_size < self.min_oom):
            self.min_oom = record.batch_size
            for k in [k for k in self.walks if k > i]:
                del self.walks[k]  # sets with the oom size in them can no longer be the feasible one
        cost = record.cost
        observed = status not in _NOT_LEARNED and cost is not None and cost == cost
        reached = status is TrialStatus.REACHED
        miss = record.batch_size if observed and not reached else None
        p_i, changed = self.recurrences.add(record.recurrence, record.trial, spend(self.spec, record), miss, reached)
        for b, (known, pending) in changed.items():
            arm = self.arms[self._index[b]]
            arm.known += known
            arm.pending += pending
        if observed:
            self._observe(i, record, float(cost), reached, p_i)

    def _observe(self, i: int, record: TrialRecord, cost: float, reached: bool, p_i: float) -> None:
        self.arms[i].observe(cost, reached)
        if reached and (self.best_cost is None or cost < self.best_cost):
            self.best_cost, self.best_size = cost, record.batch_size
        if self.max_trial is None or record.trial > self.max_trial:
            self.max_trial = record.trial
        if self.spec.window_size > 0:
            self.windows[i].append((cost, reached, record.recurrence, record.trial, p_i))
        for walk in self.walks.values():  # PruningWalk.offer, inlined: this runs per walk per observation
            if walk.expected == record.batch_size:
                walk.report(record.batch_size, cost, reached)

    # -- reading ---------------------------------------------------------------------------------

    def arm(self, batch_size: int) -> _Arm:
        return self.arms[self._index[batch_size]]

    def feasible(self) -> tuple[int, ...]:
        return tuple(b for b in self.sizes if self.min_oom is None or b < self.min_oom)

    def pruning_walk(self) -> PruningWalk | None:
        """Zeus's walk over the feasible sizes (None when none is feasible)."""
        return self.walks.get(len(self.feasible()))

    def cheapest_mean(self) -> float:
        """The lowest mean cost of reached observations over batch sizes; 0 when nothing has reached."""
        means = [arm.reached_total / arm.reached_n for arm in self.arms if arm.reached_n]
        return min(means) if means else 0.0
