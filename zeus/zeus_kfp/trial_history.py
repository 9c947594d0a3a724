"""A job's trial history as columns: what the policies decide from, built once per read.

Why columns: a bandit step reads the job's whole history and the policy derives every statistic from
it on every decision (zeus_kfp.policy.tally). At 100,000 trials, one Python object per trial costs more
than the read and the decision together, while the statistics are a few passes of numpy over columns.
So the store builds a TrialHistory straight from its Arrow table (zeus_kfp.store.frames), and the
simulator and tests from their Trials (`TrialHistory.of`). Indexing or iterating a TrialHistory gives
zeus_kfp.trials.Trial rows (with the seven fields the policies use), so code that reads a few trials reads rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from zeus_kfp.job import TrialStatus
from zeus_kfp.trials import Trial

STATUSES: tuple[TrialStatus, ...] = tuple(TrialStatus)  # a status column holds indices into this
STATUS_CODE: dict[TrialStatus, int] = {status: code for code, status in enumerate(STATUSES)}


def _optional(value: float) -> float | None:
    return None if value != value else float(value)  # NaN: no figure (a dispatched trial's cost)


def _floats(values: Iterable[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


@dataclass(frozen=True, eq=False)
class TrialHistory(Sequence[Trial]):
    """Trials as equal-length numpy columns; NaN where a record has None (cost, time, energy)."""

    recurrence: np.ndarray  # int64
    trial: np.ndarray  # int64
    batch_size: np.ndarray  # int64
    status: np.ndarray  # int8, indices into STATUSES
    cost: np.ndarray  # float64
    time_s: np.ndarray  # float64
    energy_j: np.ndarray  # float64

    @classmethod
    def of(cls, history: TrialHistory | Iterable[Trial]) -> TrialHistory:
        """`history` as columns (itself if it already is)."""
        if isinstance(history, TrialHistory):
            return history
        records = list(history)
        if not records:
            return cls.empty()

        def column(name: str) -> list:
            return [getattr(record, name) for record in records]

        return cls(
            *(np.array(column(name), dtype=np.int64) for name in ("recurrence", "trial", "batch_size")),
            np.array([STATUS_CODE[TrialStatus(s)] for s in column("status")], dtype=np.int8),
            *(_floats(column(name)) for name in ("cost", "time_s", "energy_j")),
        )

    @classmethod
    def empty(cls) -> TrialHistory:
        ints, floats = np.empty(0, dtype=np.int64), np.empty(0, dtype=float)
        return cls(ints, ints, ints, np.empty(0, dtype=np.int8), floats, floats, floats)

    def __len__(self) -> int:
        return len(self.trial)

    @overload
    def __getitem__(self, index: int) -> Trial: ...
    @overload
    def __getitem__(self, index: slice) -> TrialHistory: ...
    def __getitem__(self, index: int | slice) -> Trial | TrialHistory:
        if isinstance(index, slice):
            return self.take(np.arange(len(self))[index])
        return Trial(
            int(self.recurrence[index]),
            int(self.trial[index]),
            int(self.batch_size[index]),
            STATUSES[self.status[index]],
            _optional(self.cost[index]),
            _optional(self.time_s[index]),
            _optional(self.energy_j[index]),
        )

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same records in the same order (a list of Trials, say)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside

    def take(self, rows: np.ndarray) -> TrialHistory:
        """The records at `rows` (indices, or a boolean mask), in that order."""
        return TrialHistory(*(column[rows] for column in self._columns()))

    def in_trial_order(self) -> TrialHistory:
        """The records sorted by trial number, then recurrence (stable): the order they happened in."""
        trial = self.trial
        if len(trial) < 2 or bool(np.all(trial[1:] > trial[:-1])):
            return self
        return self.take(np.lexsort((self.recurrence, trial)))

    def has(self, status: TrialStatus) -> np.ndarray:
        """A mask of the records with this status."""
        return self.status == STATUS_CODE[status]

    def _columns(self) -> tuple[np.ndarray, ...]:
        return (self.recurrence, self.trial, self.batch_size, self.status, self.cost, self.time_s, self.energy_j)
