"""The settled view of a job's log: numbers, trials, history and profiles, derived every time.

The rules, in one place (the log's slot order decides everything; log.py):
- a recurrence's number is the rank of its first `begin`; a trial's, the rank of its first
  `dispatched`. Numbers are dense and never change: a read is a prefix of the log, and a prefix
  only grows at its end.
- of several entries of one kind about one trial (twin steps, a retried feedback), the first
  slot's is the trial's; later ones were refused to their writers (store.py), or said the same.
- a `finished` or `profile` entry with no earlier `dispatched` for its trial is reported and left out.

Vectorized over the one Arrow table of the log's rows: the bandit step derives the whole history
for every decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from zeus.job import TrialRecord, TrialStatus
from zeus.profiles import PROFILE_COLUMNS
from zeus.store import keys
from zeus.store.entries import DECISION_FIELDS, RESULT_FIELDS
from zeus.store.errors import ObjectProblem

TRIAL_BY = ["recurrence_id", "attempt"]

if TYPE_CHECKING:  # pandas only for the frames people read
    import pandas as pd

TRIAL_COLUMNS = [
    "job_id", "recurrence", "recurrence_id", "trial", "attempt", "batch_size", "power_limit_w", "status",
    "finished", "reached", "time_s", "energy_j", "cost", "num_epochs", "metric", "started_at", "ended_at",
    "kfp_run_id", "simulated", "source", "reason", "cost_threshold", "stage", "decision_reason",
]  # fmt: skip
PROFILE_FRAME_COLUMNS = ["job_id", "recurrence_id", "attempt", "recurrence", "trial", "batch_size", *PROFILE_COLUMNS]
STATUS_OF = {status.value: status for status in TrialStatus} | {None: TrialStatus.DISPATCHED}


@dataclass(frozen=True)
class Unfinished:
    """A dispatched trial with no result yet (zeus.steps.abandoned decides whether it was lost)."""

    recurrence_id: str
    attempt: int
    recurrence: int
    trial: int
    batch_size: int
    started_at: datetime


@dataclass(frozen=True)
class JobTrials:
    """One read of a job: its history as policies take it (trial order) and the trials still out."""

    history: list[TrialRecord]
    unfinished: list[Unfinished]


def _first(rows: pa.Table, kinds: pa.ChunkedArray, kind: str, by: list[str]) -> pa.Table:
    """The rows of the first entry of `kind` per `by` (an entry is its slot: a profile has several rows).
    Rows come in slot order, so a key's first row holds its first slot. Hash kernels and numpy, one
    thread: Arrow's group-by starts a thread pool that costs more than the whole read."""
    import numpy as np

    of_kind = rows.filter(pc.equal(kinds, kind))
    if not of_kind.num_rows:
        return of_kind
    key = of_kind.column(by[0]) if len(by) == 1 else _trial_key(of_kind)
    ids = pc.index_in(key, value_set=pc.unique(key)).to_numpy(zero_copy_only=False)
    firsts = np.unique(ids, return_index=True)[1]  # per key (ids 0..k-1, in order), its first row
    slots = of_kind.column("slot").to_numpy()
    keep = slots == slots[firsts][ids]
    return of_kind if keep.all() else of_kind.filter(pa.array(keep))


def _trial_key(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(
        table.column("recurrence_id"), pc.cast(table.column("attempt"), pa.string()), "."
    )


@dataclass(frozen=True)
class Settled:
    """The job's entries as the rules above settle them."""

    begins: pa.Table  # first begin per recurrence, in slot order: recurrence n is row n - 1
    dispatched: pa.Table  # first dispatch per trial, in trial order, with `recurrence` and `trial` columns
    finished: pa.Table  # first result per trial, aligned with `dispatched` (nulls where none)
    profiles: pa.Table  # the rows of each trial's first profile

    def recurrence(self, recurrence_id: str) -> int | None:
        """The number of the recurrence `recurrence_id`, None if it never began."""
        found = pc.index(self.begins.column("recurrence_id"), recurrence_id).as_py()
        return None if found < 0 else found + 1


# The columns each kind's entries use: a table of only these is filtered, not every column of the log.
KIND_COLUMNS = {
    "begin": ["slot", "recurrence_id"],
    "dispatched": ["slot", "recurrence_id", "attempt", "at", *DECISION_FIELDS],
    "finished": ["slot", "recurrence_id", "attempt", "at", *RESULT_FIELDS],
    "profile": ["slot", "recurrence_id", "attempt", *PROFILE_COLUMNS],
}


def settle(job_id: str, rows: pa.Table, problems: list[ObjectProblem]) -> Settled:
    kinds = rows.column("kind")
    first = {
        kind: _first(rows.select(columns), kinds, kind, ["recurrence_id"] if kind == "begin" else TRIAL_BY)
        for kind, columns in KIND_COLUMNS.items()
    }
    begins, dispatched = first["begin"], first["dispatched"]
    number = pc.index_in(dispatched.column("recurrence_id"), value_set=begins.column("recurrence_id").combine_chunks())
    unbegun = pc.is_null(number)
    if pc.any(unbegun).as_py():
        for rid in sorted(set(dispatched.filter(unbegun).column("recurrence_id").to_pylist())):
            problems.append(ObjectProblem(keys.log_dir(job_id), f"trials of recurrence {rid!r}, which never began"))
    dispatched = dispatched.append_column("recurrence", pc.fill_null(pc.add(number, 1), 0).cast(pa.int64()))
    dispatched = dispatched.append_column("trial", pa.array(range(1, dispatched.num_rows + 1), pa.int64()))
    names = _trial_key(dispatched).combine_chunks()
    finished, profiles = first["finished"], first["profile"]
    for kind, table in (("finished", finished), ("profile", profiles)):
        stray = table.filter(pc.invert(pc.is_in(_trial_key(table), value_set=names)))
        for rid, attempt in set(
            zip(stray.column("recurrence_id").to_pylist(), stray.column("attempt").to_pylist(), strict=True)
        ):
            problems.append(ObjectProblem(keys.log_dir(job_id), f"a {kind} entry of {rid}.{attempt}, never dispatched"))
    aligned = finished.take(pc.index_in(names, value_set=_trial_key(finished).combine_chunks()))
    return Settled(begins, dispatched, aligned, profiles)


def _numbers(column: pa.ChunkedArray) -> list[float | None]:
    values = pc.fill_null(column, math.nan).to_numpy(zero_copy_only=False).tolist()
    return [None if value != value else value for value in values]  # NaN: no result yet


def _ints(column: pa.ChunkedArray) -> list[int]:
    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).tolist()


def job_trials(settled: Settled) -> JobTrials:
    started, ended = settled.dispatched, settled.finished
    recurrence, trial, batch, attempt = (
        _ints(started.column(c)) for c in ("recurrence", "trial", "batch_size", "attempt")
    )
    statuses = [STATUS_OF[s] for s in ended.column("status").to_pylist()]
    cost, time_s, energy = (_numbers(ended.column(c)) for c in ("cost", "time_s", "energy_j"))
    history = [  # positional: faster than keywords at 10,000 records
        TrialRecord(*fields) for fields in zip(recurrence, trial, batch, statuses, cost, time_s, energy, strict=True)
    ]
    out = [i for i, status in enumerate(statuses) if status is TrialStatus.DISPATCHED]
    rids, at = started.column("recurrence_id").to_pylist(), _ints(started.column("at"))
    unfinished = [
        Unfinished(rids[i], attempt[i], recurrence[i], trial[i], batch[i], datetime.fromtimestamp(at[i] / 1e6, UTC))
        for i in out
    ]
    return JobTrials(history, unfinished)


def _timestamps(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.cast(column, pa.timestamp("us", tz="UTC"))


def trials_frame(job_id: str, settled: Settled) -> pd.DataFrame:
    """Every trial of the job for people and tools, dispatched-but-unfinished ones included."""
    started, ended = settled.dispatched, settled.finished
    reached = pc.equal(ended.column("status"), TrialStatus.REACHED.value)
    columns = {
        "job_id": pa.array([job_id] * started.num_rows, pa.string()),
        "recurrence": started.column("recurrence"),
        "recurrence_id": started.column("recurrence_id"),
        "trial": started.column("trial"),
        "attempt": started.column("attempt"),
        "batch_size": started.column("batch_size"),
        "power_limit_w": ended.column("power_limit_w"),
        "status": pc.fill_null(ended.column("status"), TrialStatus.DISPATCHED.value),
        "finished": pc.is_valid(ended.column("status")),
        "reached": pc.fill_null(reached, False),
        "time_s": ended.column("time_s"),
        "energy_j": ended.column("energy_j"),
        "cost": ended.column("cost"),
        "num_epochs": ended.column("num_epochs"),
        "metric": ended.column("metric"),
        "started_at": _timestamps(started.column("at")),
        "ended_at": _timestamps(ended.column("at")),
        "kfp_run_id": started.column("kfp_run_id"),
        "simulated": pc.fill_null(ended.column("simulated"), False),
        "source": pc.fill_null(ended.column("source"), ""),
        "reason": pc.fill_null(ended.column("reason"), ""),
        "cost_threshold": started.column("cost_threshold"),
        "stage": started.column("stage"),
        "decision_reason": started.column("decision_reason"),
    }
    frame = pa.table(columns).to_pandas()
    for column in ("recurrence", "trial", "batch_size", "num_epochs"):
        frame[column] = frame[column].astype("Int64")
    return frame.loc[:, TRIAL_COLUMNS]


def profiles_frame(job_id: str, settled: Settled) -> pd.DataFrame:
    """Each trial's first profile, one row per (phase, power limit), in trial order."""
    started = settled.dispatched
    rows = settled.profiles
    where = pc.index_in(_trial_key(rows), value_set=_trial_key(started).combine_chunks())
    known = pc.is_valid(where)
    rows, where = rows.filter(known), pc.filter(where, known)
    table = pa.table(
        {
            "job_id": pa.array([job_id] * rows.num_rows, pa.string()),
            "recurrence_id": rows.column("recurrence_id"),
            "attempt": rows.column("attempt"),
            "recurrence": started.column("recurrence").take(where),
            "trial": started.column("trial").take(where),
            "batch_size": started.column("batch_size").take(where),
            **{name: rows.column(name) for name in PROFILE_COLUMNS},
        }
    )
    order = [("trial", "ascending"), ("phase", "descending"), ("power_limit_w", "descending")]
    return table.sort_by(order).to_pandas()
