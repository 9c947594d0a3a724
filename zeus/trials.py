"""A trial, in one shape, and a job's trials as columns.

`Trial` is the one row type (as optuna's FrozenTrial is): the store builds it from what it holds
(zeus.store.frames), the simulator builds it as it goes (zeus.simulate.engine), and the policies,
the report and the CLI read it. Every list of trial columns derives from its fields
(`trial_columns`), so a field added here reaches the store's frame, the tables and the report.

Why columns too: a bandit step reads the job's whole history and the policy derives every statistic
from it on every decision (zeus.policy.tally). At 100,000 trials, one Python object per trial costs
more than the read and the decision together, while the statistics are a few passes of numpy over
columns. So the store builds a TrialHistory straight from its Arrow table, and the simulator and
tests from their Trials (`TrialHistory.of`). Indexing or iterating a TrialHistory gives Trials (with
the seven fields the policies use), so code that reads a few trials reads rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from zeus.job import TrialStatus

if TYPE_CHECKING:  # pandas only where a frame is read
    import pandas as pd


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial of a job, finished or only dispatched.

    The first seven fields are what the policies decide from; `recurrence` orders recurrences and
    `trial` orders trials within the job. The figures (cost, time, energy, ...) are None while the
    trial is only dispatched. The rest is the bandit's decision (stage, cost_threshold,
    decision_reason), where the trial ran (recurrence_id, attempt, kfp_run_id) and its result's
    details (TrialResult's fields); `profiled` says whether it measured a power profile (False: it
    trained at a reused one; None: not known yet).
    """

    recurrence: int
    trial: int
    batch_size: int
    status: TrialStatus
    cost: float | None = None
    time_s: float | None = None
    energy_j: float | None = None
    job_id: str = ""
    recurrence_id: str = ""
    attempt: int = 0
    stage: str = ""
    cost_threshold: float | None = None
    decision_reason: str = ""
    kfp_run_id: str = ""
    started_at: datetime | None = None
    power_limit_w: float | None = None
    num_epochs: int | None = None
    metric: float | None = None
    simulated: bool = False
    source: str = ""
    reason: str = ""
    ended_at: datetime | None = None
    profiled: bool | None = None

    @property
    def finished(self) -> bool:
        return TrialStatus(self.status).finished

    @property
    def reached(self) -> bool:
        return self.status == TrialStatus.REACHED


TRIAL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Trial))
DERIVED: tuple[str, ...] = ("finished", "reached")  # properties of Trial, columns of the store's frame
# The store's trials frame (Store.trials_frame): every field, in an order people read, and the derived flags.
FRAME_COLUMNS: tuple[str, ...] = (
    "job_id", "recurrence", "recurrence_id", "trial", "attempt", "batch_size", "power_limit_w", "status",
    *DERIVED, "time_s", "energy_j", "cost", "num_epochs", "metric", "started_at", "ended_at", "kfp_run_id",
    "simulated", "source", "reason", "cost_threshold", "stage", "decision_reason", "profiled",
)  # fmt: skip
assert sorted(FRAME_COLUMNS) == sorted((*TRIAL_FIELDS, *DERIVED)), "FRAME_COLUMNS must name every Trial field"


def trial_columns(*names: str) -> list[str]:
    """`names` as a list of trial columns, each checked to be a Trial field or a derived flag: how a table
    or a report names the columns it shows, so a renamed field fails where it is named, not where it is read."""
    unknown = [name for name in names if name not in FRAME_COLUMNS]
    if unknown:
        raise ValueError(f"not trial columns: {unknown}; allowed {list(FRAME_COLUMNS)}")
    return list(names)


def _datetime(value: Any) -> datetime:
    return value.to_pydatetime() if hasattr(value, "to_pydatetime") else value


# How a frame cell becomes each field, by the field's annotation; a missing cell (NaN, NA, NaT) is the
# field's default.
_FROM_CELL = {
    "int": int,
    "int | None": int,
    "float | None": float,
    "str": str,
    "bool": bool,
    "bool | None": bool,
    "datetime | None": _datetime,
    "TrialStatus": TrialStatus,
}
_DEFAULTS = {f.name: f.default for f in fields(Trial)}


def trials_of(frame: pd.DataFrame) -> list[Trial]:
    """The rows of a store trials frame (FRAME_COLUMNS) as Trials, in the frame's order."""
    present = [f for f in fields(Trial) if f.name in frame.columns]
    cells = frame.loc[:, [f.name for f in present]].astype(object)
    cells = cells.where(cells.notna(), None)
    convert = [(f.name, _FROM_CELL[f.type], _DEFAULTS[f.name]) for f in present]
    return [
        Trial(
            **{
                name: default if cell is None else to(cell)
                for (name, to, default), cell in zip(convert, row, strict=True)
            }
        )
        for row in cells.itertuples(index=False, name=None)
    ]


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
