"""Reading the event streams back as the DataFrames people use and the history policies take.

Vectorized on purpose: the bandit step reads the whole history of a job on every trial. The
policy's history is built from the Arrow tables directly (one join, one sort, a column per
field), without pandas; the trials DataFrame is for people and tools. Each trial has at most
one event per stream (its record decides, streams.py), so no duplicates need settling.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from zeus.job import TrialRecord, TrialStatus
from zeus.store import keys
from zeus.store.errors import ObjectProblem
from zeus.store.schemas import EVENT_COLUMN, SCHEMAS
from zeus.store.streams import StreamRead

if TYPE_CHECKING:  # pandas for the frames people read; the policy's history is built without it
    import pandas as pd

TRIAL_KEY = ["recurrence_id", "attempt"]
TRIAL_COLUMNS = [
    "job_id",
    "recurrence",
    "recurrence_id",
    "trial",
    "attempt",
    "batch_size",
    "power_limit_w",
    "status",
    "finished",
    "reached",
    "time_s",
    "energy_j",
    "cost",
    "num_epochs",
    "metric",
    "started_at",
    "ended_at",
    "kfp_run_id",
    "simulated",
    "source",
    "reason",
    "cost_threshold",
    "stage",
    "decision_reason",
]
STATUS_BY_VALUE = {status.value: status for status in TrialStatus}


def _frame(read: StreamRead) -> pd.DataFrame:
    return read.table.to_pandas()


def trials_frame(
    job_id: str, dispatched: StreamRead, finished: StreamRead, problems: list[ObjectProblem]
) -> pd.DataFrame:
    started = _frame(dispatched)
    ended = _frame(finished).drop(columns=["job_id", EVENT_COLUMN])
    ended = ended.rename(columns={"batch_size": "finished_batch_size"})
    # Join on object-dtype ids: pandas 3 cannot merge empty Arrow-backed string keys (ArrowInvalid).
    started = started.drop(columns=[EVENT_COLUMN]).astype({"recurrence_id": object})
    ended = ended.astype({"recurrence_id": object})
    merged = started.merge(ended, on=TRIAL_KEY, how="outer", indicator=True)
    merged["recurrence_id"] = merged["recurrence_id"].astype("str")
    orphans = merged["_merge"] == "right_only"
    for rid, attempt in merged.loc[orphans, TRIAL_KEY].itertuples(index=False):
        where = keys.event_key(job_id, "finished", rid, int(attempt))
        problems.append(ObjectProblem(where, "a finished event without a readable dispatched event"))
    merged["batch_size"] = merged["batch_size"].fillna(merged["finished_batch_size"])
    merged["status"] = merged["status"].fillna(TrialStatus.DISPATCHED.value)
    merged["finished"] = merged["_merge"] != "left_only"
    merged["reached"] = merged["reached"].fillna(False).astype(bool)
    merged["simulated"] = merged["simulated"].fillna(False).astype(bool)
    merged["reason"] = merged["reason"].fillna("")
    merged["source"] = merged["source"].fillna("")
    for column in ("recurrence", "trial", "batch_size", "num_epochs"):
        merged[column] = merged[column].astype("Int64")
    merged = merged.sort_values(["trial", "recurrence_id", "attempt"], kind="stable", na_position="last")
    return merged.loc[:, TRIAL_COLUMNS].reset_index(drop=True)


HISTORY_DISPATCHED = [EVENT_COLUMN, "recurrence", "trial", "batch_size", "recurrence_id", "attempt"]
HISTORY_FINISHED = [EVENT_COLUMN, "status", "cost", "time_s", "energy_j"]
STATUS_OF = STATUS_BY_VALUE | {None: TrialStatus.DISPATCHED}


def _join(dispatched: pa.Table, finished: pa.Table, columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """(dispatched `columns` in trial order, then recurrence id, attempt; each one's finished event's
    result columns, nulls where it has none)."""
    # A hash lookup of names and two takes, single-threaded: Acero's join spins up its thread pool,
    # which costs more than the whole lookup at 10,000 rows on a loaded machine.
    order = pc.sort_indices(
        dispatched, sort_keys=[("trial", "ascending"), ("recurrence_id", "ascending"), ("attempt", "ascending")]
    )
    started = dispatched.select(columns).take(order)
    where = pc.index_in(started.column(EVENT_COLUMN), value_set=finished.column(EVENT_COLUMN).combine_chunks())
    return started, finished.select(HISTORY_FINISHED).take(where)


def _results(ended: pa.Table) -> list[tuple]:
    """Per row: (status, cost, time_s, energy_j), DISPATCHED and Nones where there is no result yet."""
    # numpy's tolist() is several times faster than Arrow's to_pylist() for numbers; nulls become NaN.
    values = [pc.fill_null(ended.column(name), math.nan).to_numpy().tolist() for name in ("cost", "time_s", "energy_j")]
    statuses = [STATUS_OF[status] for status in ended.column("status").to_pylist()]
    return [
        (status, None if cost != cost else cost, None if time_s != time_s else time_s, None if e != e else e)
        for status, cost, time_s, e in zip(statuses, *values, strict=True)  # x != x: NaN, not finished yet
    ]


def _ints(column: pa.ChunkedArray) -> list[int]:
    return pc.fill_null(column, 0).to_numpy().tolist()


def history_from_tables(dispatched: pa.Table, finished: pa.Table) -> list[TrialRecord]:
    """TrialRecords in trial order (then recurrence id, attempt): dispatched trials, with their result if any."""
    started, ended = _join(dispatched, finished, HISTORY_DISPATCHED)
    columns = [_ints(started.column(name)) for name in ("recurrence", "trial", "batch_size")]
    return [  # positional: faster than keywords at 10,000 records (benchmarks/RESULTS.md)
        TrialRecord(rec, trial, batch, *result)
        for rec, trial, batch, result in zip(*columns, _results(ended), strict=True)
    ]


def fold_events(dispatched: pa.Table, finished: pa.Table) -> tuple[list[tuple], dict[str, tuple]]:
    """What an incremental fold takes from a cut's new events (zeus.policy.fold): per new dispatched
    trial (name, (trial, recurrence, recurrence_id, attempt), TrialRecord, started_at in microseconds since the epoch),
    with its result when it is in `finished`; and the results of the other finished events, by name."""
    started, ended = _join(dispatched, finished, [*HISTORY_DISPATCHED, "started_at"])
    names = started.column(EVENT_COLUMN).to_pylist()
    rec, trial, batch, attempt = (
        _ints(started.column(name)) for name in ("recurrence", "trial", "batch_size", "attempt")
    )
    rids = started.column("recurrence_id").to_pylist()
    at = _ints(started.column("started_at").cast(pa.int64()))  # microseconds since the epoch
    new = [
        (name, (t, r, rid, a), TrialRecord(r, t, b, *result), when)
        for name, t, r, rid, a, b, result, when in zip(
            names, trial, rec, rids, attempt, batch, _results(ended), at, strict=True
        )
    ]
    others = finished.filter(
        pc.invert(pc.is_in(finished.column(EVENT_COLUMN), value_set=started.column(EVENT_COLUMN).combine_chunks()))
    )
    results = dict(zip(others.column(EVENT_COLUMN).to_pylist(), _results(others), strict=True))
    return new, results


def profiles_frame(read: StreamRead) -> pd.DataFrame:
    # Sorted in Arrow (a stable sort), then one conversion: the bandit step reads this table for every
    # decision, and pandas' drop and sort cost more than the read itself on a small table.
    order = [("trial", "ascending"), ("recurrence_id", "ascending"), ("attempt", "ascending"),
             ("phase", "descending"), ("power_limit_w", "descending")]  # fmt: skip
    return read.table.drop_columns([EVENT_COLUMN]).sort_by(order).to_pandas()


def bandit_frame(read: StreamRead, latest_only: bool) -> pd.DataFrame:
    frame = _frame(read)
    if latest_only and not frame.empty:
        latest = frame.sort_values(["written_at", "trial", EVENT_COLUMN]).iloc[-1][EVENT_COLUMN]
        frame = frame[frame[EVENT_COLUMN] == latest]
    frame = frame.drop(columns=[EVENT_COLUMN])
    return frame.sort_values(["written_at", "trial", "batch_size"], kind="stable").reset_index(drop=True)


assert set(TRIAL_COLUMNS) <= set(SCHEMAS["dispatched"].names) | set(SCHEMAS["finished"].names) | {"finished"}
