"""Reading the event streams back as the DataFrames people and policies use.

Vectorized on purpose: the bandit step reads the whole history of a job on every trial,
and at 10,000 trials that read plus the policy's decision must stay well under a second.
Where two events disagree about one trial (only possible after a race of different writes
on a server, or a retried step that changed its mind concurrently), one is kept by a
deterministic rule and the other is reported, so every reader sees the same history.
"""

from __future__ import annotations

import math

import pandas as pd

from zeus.job import TrialRecord, TrialStatus
from zeus.store import keys
from zeus.store.errors import ObjectProblem
from zeus.store.schemas import EVENT_COLUMN, SCHEMAS
from zeus.store.streams import StreamRead

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


def _keep_one(
    frame: pd.DataFrame, order: list[str], job_id: str, stream: str, problems: list[ObjectProblem]
) -> pd.DataFrame:
    """One row per trial key, the first by `order`; the rest are reported by event key."""
    frame = frame.sort_values(order, kind="stable")
    dropped = frame.duplicated(TRIAL_KEY, keep="first")
    for event in frame.loc[dropped, EVENT_COLUMN]:
        problems.append(
            ObjectProblem(
                keys.events_dir(job_id, stream) + event,
                f"a second {stream} event for a trial that has one (a race of different writes); kept the first",
            )
        )
    return frame.loc[~dropped]


def trials_frame(
    job_id: str, dispatched: StreamRead, finished: StreamRead, problems: list[ObjectProblem]
) -> pd.DataFrame:
    started = _keep_one(_frame(dispatched), ["trial", EVENT_COLUMN], job_id, "dispatched", problems)
    ended = _keep_one(_frame(finished), ["ended_at", EVENT_COLUMN], job_id, "finished", problems)
    ended = ended.drop(columns=["job_id", EVENT_COLUMN]).rename(columns={"batch_size": "finished_batch_size"})
    # Join on object-dtype ids: pandas 3 cannot merge empty Arrow-backed string keys (ArrowInvalid).
    started = started.drop(columns=[EVENT_COLUMN]).astype({"recurrence_id": object})
    ended = ended.astype({"recurrence_id": object})
    merged = started.merge(ended, on=TRIAL_KEY, how="outer", indicator=True)
    merged["recurrence_id"] = merged["recurrence_id"].astype("str")
    orphans = merged["_merge"] == "right_only"
    for rid, attempt in merged.loc[orphans, TRIAL_KEY].itertuples(index=False):
        where = keys.event_prefix(job_id, "finished", rid, int(attempt))
        problems.append(ObjectProblem(where + "*", "a finished event without a readable dispatched event"))
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


def history_records(trials: pd.DataFrame) -> list[TrialRecord]:
    """TrialRecords in trial order, built column-wise (a list comprehension over arrays, no iterrows)."""
    placed = trials[trials["trial"].notna()]
    columns = [
        placed["recurrence"].to_numpy(dtype="int64", na_value=0).tolist(),
        placed["trial"].to_numpy(dtype="int64").tolist(),
        placed["batch_size"].to_numpy(dtype="int64").tolist(),
        placed["status"].tolist(),
        placed["cost"].to_numpy(dtype="float64", na_value=math.nan).tolist(),
        placed["time_s"].to_numpy(dtype="float64", na_value=math.nan).tolist(),
        placed["energy_j"].to_numpy(dtype="float64", na_value=math.nan).tolist(),
    ]
    return [
        TrialRecord(
            recurrence=rec,
            trial=trial,
            batch_size=batch,
            status=STATUS_BY_VALUE[status],
            cost=None if cost != cost else cost,  # NaN != NaN: not finished yet
            time_s=None if time_s != time_s else time_s,
            energy_j=None if energy != energy else energy,
        )
        for rec, trial, batch, status, cost, time_s, energy in zip(*columns, strict=True)
    ]


def profiles_frame(job_id: str, read: StreamRead, problems: list[ObjectProblem]) -> pd.DataFrame:
    frame = _frame(read)
    # One profile event per trial; after a race of different ones keep the first by object name.
    first = frame.groupby(TRIAL_KEY, sort=False)[EVENT_COLUMN].transform("min")
    for event in sorted(set(frame.loc[frame[EVENT_COLUMN] != first, EVENT_COLUMN])):
        problems.append(
            ObjectProblem(
                keys.events_dir(job_id, "profiles") + event, "a second profile event for a trial; kept the first"
            )
        )
    frame = frame.loc[frame[EVENT_COLUMN] == first].drop(columns=[EVENT_COLUMN])
    order = ["trial", "recurrence_id", "attempt", "phase", "power_limit_w"]
    return frame.sort_values(order, ascending=[True, True, True, False, False], kind="stable").reset_index(drop=True)


def bandit_frame(read: StreamRead, latest_only: bool) -> pd.DataFrame:
    frame = _frame(read)
    if latest_only and not frame.empty:
        latest = frame.sort_values(["written_at", "trial", EVENT_COLUMN]).iloc[-1][EVENT_COLUMN]
        frame = frame[frame[EVENT_COLUMN] == latest]
    frame = frame.drop(columns=[EVENT_COLUMN])
    return frame.sort_values(["written_at", "trial", "batch_size"], kind="stable").reset_index(drop=True)


assert set(TRIAL_COLUMNS) <= set(SCHEMAS["dispatched"].names) | set(SCHEMAS["finished"].names) | {"finished"}
