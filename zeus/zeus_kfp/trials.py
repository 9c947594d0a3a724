"""A trial, in one shape: `Trial`, the one row type (as optuna's FrozenTrial is).

The store builds it from what it holds (zeus_kfp.store.frames), the simulator builds it as it goes
(zeus_kfp.simulate.engine), and the policies, the report and the CLI read it. Every list of trial columns
derives from its fields (`trial_columns`), so a field added here reaches the store's frame, the tables
and the report. The same trials as columns, for the policies, are zeus_kfp.trial_history.TrialHistory;
this module imports no numpy, so `import zeus_kfp` and `zeus-kfp --help` do not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from zeus_kfp.job import TrialStatus

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
