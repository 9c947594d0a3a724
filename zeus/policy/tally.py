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
exact: it is the only way the policies read a history (`read_history` folds the records from an empty
tally), so a tally kept between decisions and one rebuilt from scratch are the same computation, in the
same order, with the same floating-point results.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from typing import Any

import numpy as np

from zeus.job import JobSpec, TrialRecord, TrialStatus
from zeus.policy.pruning import PruningWalk, feasible_default
from zeus.policy.recurrences import Recurrences

TALLY_VERSION = 1  # bump when what a tally holds, or how a record folds, changes: stored tallies are then rebuilt
# Per-size statistics, stored as arrays of one entry per batch size (see _Arm).
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

    def __init__(self, values: tuple | None = None) -> None:
        defaults = (0, 0.0, 0.0, 0.0, math.nan, False, 0, 0.0, 0, 0.0, 0.0, 0.0, 0)
        for name, value in zip(ARM_FIELDS, values or defaults, strict=True):
            setattr(self, name, value)

    def values(self) -> tuple:
        return tuple(getattr(self, name) for name in ARM_FIELDS)

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
        self.in_flight: list[TrialRecord] = []  # dispatched records (a stored tally holds none)

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

    def copy(self) -> Tally:
        """An independent copy (to fold records into without changing this one)."""
        twin = Tally.__new__(Tally)
        twin.__dict__.update(self.__dict__)
        twin.arms = [_Arm(arm.values()) for arm in self.arms]
        twin.recurrences = self.recurrences.copy()
        twin.windows = [deque(w, maxlen=w.maxlen) for w in self.windows]
        twin.walks = {k: PruningWalk.restore(walk.state()) for k, walk in self.walks.items()}
        twin.in_flight = list(self.in_flight)
        return twin

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

    # -- storing ---------------------------------------------------------------------------------

    def fingerprint(self) -> dict[str, Any]:
        """The spec fields a tally depends on: a stored tally is used only under the same ones."""
        spec = self.spec
        return {
            "version": TALLY_VERSION, "batch_sizes": list(spec.batch_sizes),
            "default_batch_size": spec.default_batch_size, "num_pruning_rounds": spec.num_pruning_rounds,
            "window_size": spec.window_size, "eta_knob": spec.eta_knob, "max_power_w": spec.max_power_w,
            "num_gpus": spec.num_gpus,
        }  # fmt: skip

    def to_parts(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able fields, numpy arrays): what `from_parts` rebuilds the tally from."""
        if self.in_flight:
            raise ValueError("a tally with dispatched records is not stored (they change when they finish)")
        meta = {
            "fingerprint": self.fingerprint(), "num_records": self.num_records, "min_oom": self.min_oom,
            "best_cost": self.best_cost, "best_size": self.best_size, "max_trial": self.max_trial,
            "windows": [list(w) for w in self.windows],
            "walks": {str(k): walk.state() for k, walk in self.walks.items()},
        }  # fmt: skip
        columns = list(zip(*(arm.values() for arm in self.arms), strict=True))
        arrays = {f"arm_{name}": np.asarray(values) for name, values in zip(ARM_FIELDS, columns, strict=True)}
        return meta, arrays | self.recurrences.arrays()

    @classmethod
    def from_parts(cls, spec: JobSpec, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Tally:
        """The tally `to_parts` described; ValueError if it was made under other spec fields or is malformed."""
        tally = cls(spec)
        if meta.get("fingerprint") != tally.fingerprint():
            raise ValueError("stored under another spec or tally version")
        columns = [arrays[f"arm_{name}"].tolist() for name in ARM_FIELDS]
        if any(len(column) != len(tally.sizes) for column in columns):
            raise ValueError("per-size arrays of the wrong length")
        tally.arms = [_Arm(values) for values in zip(*columns, strict=True)]
        tally.recurrences = Recurrences({name: arrays[name] for name in tally.recurrences.arrays()})
        tally.num_records, tally.min_oom, tally.max_trial = meta["num_records"], meta["min_oom"], meta["max_trial"]
        tally.best_cost, tally.best_size = meta["best_cost"], meta["best_size"]
        tally.windows = [deque((tuple(entry) for entry in w), maxlen=spec.window_size) for w in meta["windows"]]  # type: ignore[misc]
        tally.walks = {int(k): PruningWalk.restore(state) for k, state in meta["walks"].items()}
        return tally
