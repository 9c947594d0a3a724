"""The settled view of a job's log: numbers, trials, history and profiles, derived every time.

The rules (first slot wins, which begins open a recurrence, numbering, orphans) are docs/STORE.md, "The
settled view"; this module is their one implementation. Derived on every read, never kept: a read is a
prefix of the log, so nothing derived from it can go stale.

Vectorized over the one Arrow table of the log's rows: the bandit step derives the whole history
for every decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zeus_kfp.job import TrialStatus
from zeus_kfp.profiles import PROFILE_COLUMNS
from zeus_kfp.store import gating, keys
from zeus_kfp.store.entries import DECISION_FIELDS, GATE_FIELDS, KINDS, RESULT_FIELDS
from zeus_kfp.store.errors import ObjectProblem
from zeus_kfp.trial_history import STATUSES, TrialHistory
from zeus_kfp.trials import FRAME_COLUMNS, Trial, trial_columns

if TYPE_CHECKING:  # pandas only for the frames people read
    import pandas as pd


@dataclass(frozen=True)
class JobTrials:
    """One read of a job: its history as policies take it (trial order), the trials still out, and the
    recurrences drift opened (what the job's drift_reaction reacts to, zeus_kfp.policy.drift)."""

    history: TrialHistory  # columns; its rows are Trials
    unfinished: list[Trial]  # dispatched, no result yet (zeus_kfp.steps.abandoned decides whether it was lost)
    drifts: tuple[int, ...] = ()  # recurrence numbers the gate opened on drift, ascending


def _first(rows: np.ndarray, key: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """Of `rows` (row numbers, in slot order), those of the first entry per `key` (an entry is its slot: a
    profile has several rows). A key's first row holds its first slot. Integer keys and numpy, one thread:
    Arrow's group-by starts a thread pool that costs more than the whole read, and string keys cost more
    than the rest of the settling."""
    if not len(rows):
        return rows
    _, first, which = np.unique(key[rows], return_index=True, return_inverse=True)
    keep = slot[rows] == slot[rows[first]][which.reshape(-1)]
    return rows if keep.all() else rows[keep]


def _trial_key(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(
        table.column("recurrence_id"), pc.cast(table.column("attempt"), pa.string()), "."
    )


@dataclass(frozen=True)
class Settled:
    """The job's entries as the rules above settle them."""

    begins: pa.Table  # first begin per recurrence that opened one, in slot order: recurrence n is row n - 1
    dispatched: pa.Table  # first dispatch per trial, in trial order, with `recurrence`, `trial` and `epoch` columns
    finished: pa.Table  # first result per trial, aligned with `dispatched` (nulls where none)
    profiles: pa.Table  # the rows of each trial's first profile
    requests: pa.Table  # every first begin, opened or skipped, with `opened`, `why`, `recurrence`, `epoch` (gating.py)
    specs: tuple[str, ...] = ()  # the job's specs in the order they were in force (gating.Outcomes); the last: now

    def recurrence(self, recurrence_id: str) -> int | None:
        """The number of the recurrence `recurrence_id`, None if it never began."""
        found = pc.index(self.begins.column("recurrence_id"), recurrence_id).as_py()
        return None if found < 0 else found + 1

    @property
    def epoch(self) -> int:
        """The index of the spec in force in `specs`: 0 until a run replaced the first one."""
        return len(self.specs) - 1

    def epoch_of(self, recurrence_id: str) -> int | None:
        """The epoch recurrence `recurrence_id` opened under, None if it never began."""
        found = self.requests.filter(pc.equal(self.requests.column("recurrence_id"), recurrence_id))
        return None if found.num_rows == 0 else found.column("epoch")[0].as_py()

    def under(self, current: bool = True) -> Settled:
        """The trials (and their results and profiles) of the recurrences opened under the spec in force, or
        (`current` False) under the specs it replaced: the bandit's history, and every figure of the job, is only
        comparable under one spec (gating.py). Numbers stay as they are: a job's numbers never change."""
        epochs = pc.fill_null(self.dispatched.column("epoch"), -1)
        keep = pc.equal(epochs, self.epoch) if current else pc.less(epochs, self.epoch)
        dispatched, finished = self.dispatched.filter(keep), self.finished.filter(keep)
        kept = _trial_key(dispatched).combine_chunks()
        profiles = self.profiles.filter(pc.is_in(_trial_key(self.profiles), value_set=kept))
        return replace(self, dispatched=dispatched, finished=finished, profiles=profiles)


KIND_NAMES = pa.array(KINDS)
# The columns each kind's entries use: a table of only these is filtered, not every column of the log.
KIND_COLUMNS = {
    "begin": ["slot", "recurrence_id", "at", *GATE_FIELDS],
    "dispatched": ["slot", "recurrence_id", "attempt", "at", *DECISION_FIELDS],
    "finished": ["slot", "recurrence_id", "attempt", "at", *RESULT_FIELDS],
    "profile": ["slot", "recurrence_id", "attempt", *PROFILE_COLUMNS],
}


def settle(job_id: str, rows: pa.Table, problems: list[ObjectProblem], first_spec: str | None) -> Settled:
    """The settled view of the log's `rows`; `first_spec`: the spec register's (gating.spec_text), the spec in
    force until a run replaces it."""
    kind = pc.index_in(rows.column("kind"), value_set=KIND_NAMES).to_numpy(zero_copy_only=False)
    slot = rows.column("slot").to_numpy()
    recurrence_ids = pc.dictionary_encode(rows.column("recurrence_id").combine_chunks())
    rid = pc.fill_null(recurrence_ids.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    attempt = _ints(rows.column("attempt"))
    trial_key = rid * (int(attempt.max(initial=0)) + 1) + attempt  # one integer per (recurrence_id, attempt)

    def first(of_kind: str, key: np.ndarray) -> np.ndarray:
        return _first(np.flatnonzero(kind == KINDS.index(of_kind)), key, slot)

    begun, started = first("begin", rid), first("dispatched", trial_key)
    ended = first("finished", trial_key)
    outcomes = gating.gate_outcomes(rows, rid, slot, _ints(rows.column("at")), begun, ended, first_spec)
    opened = outcomes.opened
    number = np.zeros(len(recurrence_ids.dictionary) + 1, dtype=np.int64)  # by rid code; 0: never began
    number[rid[begun[opened]]] = np.arange(1, int(opened.sum()) + 1)
    epoch = np.full(len(recurrence_ids.dictionary) + 1, -1, dtype=np.int64)  # by rid code; -1: never began
    epoch[rid[begun[opened]]] = outcomes.epoch[opened]
    recurrence = number[rid[started]]
    for code in sorted(set(rid[started][recurrence == 0].tolist())):
        where = f"trials of recurrence {recurrence_ids.dictionary[code].as_py()!r}, which never began"
        problems.append(ObjectProblem(keys.log_dir(job_id), where))
    names = np.sort(trial_key[started])
    profiled = first("profile", trial_key)
    for name, found in (("finished", ended), ("profile", profiled)):
        for row in sorted({int(trial_key[r]): r for r in found[~_isin_sorted(trial_key[found], names)]}.values()):
            what = f"a {name} entry of {recurrence_ids[row].as_py()}.{attempt[row]}, never dispatched"
            problems.append(ObjectProblem(keys.log_dir(job_id), what))
    order = np.argsort(trial_key[ended], kind="stable")
    at = np.searchsorted(trial_key[ended][order], trial_key[started]).clip(max=max(len(ended) - 1, 0))
    has_result = (trial_key[ended][order][at] == trial_key[started]) if len(ended) else np.zeros(len(started), bool)
    result_rows = pa.array(ended[order][at] if len(ended) else np.zeros(len(started), np.int64), mask=~has_result)

    def table(of_kind: str, take: pa.Array | np.ndarray) -> pa.Table:
        return rows.select(KIND_COLUMNS[of_kind]).take(take)

    dispatched = table("dispatched", started)
    dispatched = dispatched.append_column("recurrence", pa.array(recurrence, pa.int64()))
    dispatched = dispatched.append_column("trial", pa.array(np.arange(1, len(started) + 1), pa.int64()))
    dispatched = dispatched.append_column("epoch", pa.array(epoch[rid[started]], pa.int64()))
    requests = gating.outcomes_table(table("begin", begun), outcomes)
    finished = table("finished", result_rows)
    begins = table("begin", begun[opened])
    return Settled(begins, dispatched, finished, table("profile", profiled), requests, outcomes.specs)


def _isin_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if not len(sorted_set):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(sorted_set, values).clip(max=len(sorted_set) - 1)
    return sorted_set[at] == values


def _numbers(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, math.nan).to_numpy(zero_copy_only=False)  # NaN: no result yet


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _status_codes(column: pa.ChunkedArray) -> np.ndarray:
    """The status column as zeus_kfp.trials' codes (a trial with no result yet is dispatched)."""
    names = pa.array([status.value for status in STATUSES])
    codes = pc.index_in(pc.fill_null(column, TrialStatus.DISPATCHED.value), value_set=names)
    if codes.null_count:
        unknown = pc.filter(column, pc.is_null(codes))[0].as_py()
        raise ValueError(f"invalid status={unknown!r}: allowed {[status.value for status in STATUSES]}")
    return codes.to_numpy(zero_copy_only=False).astype(np.int8)


def job_trials(settled: Settled) -> JobTrials:
    started, ended = settled.dispatched, settled.finished
    history = TrialHistory(
        *(_ints(started.column(c)) for c in ("recurrence", "trial", "batch_size")),
        _status_codes(ended.column("status")),
        *(_numbers(ended.column(c)) for c in ("cost", "time_s", "energy_j")),
    )
    out = np.flatnonzero(history.has(TrialStatus.DISPATCHED))
    rids = started.column("recurrence_id").take(out).to_pylist()
    attempt, at = _ints(started.column("attempt"))[out].tolist(), _ints(started.column("at"))[out].tolist()
    unfinished = [
        replace(
            history[int(row)],
            recurrence_id=rids[k],
            attempt=attempt[k],
            started_at=datetime.fromtimestamp(at[k] / 1e6, UTC),
        )
        for k, row in enumerate(out)
    ]
    return JobTrials(history, unfinished, drift_recurrences(settled))


def drift_recurrences(settled: Settled) -> tuple[int, ...]:
    """The numbers of the recurrences the gate opened on drift, ascending (zeus_kfp.store.gating)."""
    requests = settled.requests
    return tuple(requests.filter(pc.equal(requests.column("why"), "drift")).column("recurrence").to_pylist())


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
        "profiled": _profiled(settled),
    }
    frame = pa.table(columns).to_pandas()
    for column in trial_columns("recurrence", "trial", "batch_size", "num_epochs"):
        frame[column] = frame[column].astype("Int64")
    frame["profiled"] = frame["profiled"].astype("boolean")  # null while dispatched, whatever the rest hold
    return frame.loc[:, list(FRAME_COLUMNS)]


def _profiled(settled: Settled) -> pa.Array:
    """Per trial, whether it stored a power profile (False: it trained at a reused one); null while dispatched."""
    keys_with_profile = _trial_key(settled.profiles).combine_chunks()
    has = pc.is_in(_trial_key(settled.dispatched), value_set=keys_with_profile)
    return pc.if_else(pc.is_valid(settled.finished.column("status")), has, pa.scalar(None, pa.bool_()))


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
