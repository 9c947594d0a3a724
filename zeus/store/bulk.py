"""Seeding a new job with a long history in one go (a simulated history, a migration, a benchmark).

Writing 10,000 trials one event at a time is ~60,000 requests; this writes what compaction
would have produced instead: one snapshot per stream, plus the top number claims so that
later trials and recurrences continue the numbering. The result is read by the normal read
path (snapshot + newer events). Imported recurrences are closed: a `begin_recurrence` with
one of their ids later starts a new recurrence.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from zeus.job import JobSpec, TrialStatus
from zeus.store import keys
from zeus.store.catalog import now
from zeus.store.errors import StoreError, StoreInputError
from zeus.store.schemas import EVENT_COLUMN, SCHEMAS, encode
from zeus.store.store import Store

REQUIRED = ("recurrence", "recurrence_id", "attempt", "batch_size", "status", "time_s", "energy_j", "num_epochs")


def import_trials(store: Store, spec: JobSpec, trials: pd.DataFrame) -> int:
    """Store finished trials for a job that has none yet; trial numbers follow the frame's order.

    `trials` needs the columns in REQUIRED (cost is recomputed with the job's cost function).
    Returns the number of trials written.
    """
    missing = [c for c in REQUIRED if c not in trials.columns]
    if missing:
        raise StoreInputError("trials", list(trials.columns), f"a DataFrame with columns {list(REQUIRED)}")
    bad = sorted(set(trials["status"]) - {s.value for s in TrialStatus if s.finished})
    if bad:
        raise StoreInputError("status", bad[0], "a finished TrialStatus value")
    store.ensure_job(spec)
    job_id = spec.job_id
    if not store.trials(job_id).empty:
        raise StoreError(f"job {job_id!r} already has trials in {store.uri}; import only into a new job")
    frame = trials.reset_index(drop=True)
    count = len(frame)
    at = now()
    if frame.duplicated(["recurrence_id", "attempt"]).any():
        raise StoreInputError("trials", "duplicate (recurrence_id, attempt)", "one row per recurrence_id and attempt")
    names = [
        keys.basename(keys.event_key(job_id, "dispatched", rid, int(a)))
        for rid, a in zip(frame["recurrence_id"], frame["attempt"], strict=True)
    ]
    common = {"job_id": [job_id] * count, "recurrence_id": frame["recurrence_id"].astype(str).tolist()}
    common["attempt"] = frame["attempt"].astype("int64").tolist()
    dispatched = pd.DataFrame(
        common
        | {
            "recurrence": frame["recurrence"].astype("int64"),
            "trial": range(1, count + 1),
            "batch_size": frame["batch_size"].astype("int64"),
            "cost_threshold": None,
            "stage": "imported",
            "decision_reason": "imported",
            "kfp_run_id": "",
            "started_at": at,
            EVENT_COLUMN: names,
        }
    )
    energy = frame["energy_j"].astype(float)
    time_s = frame["time_s"].astype(float)
    finished = pd.DataFrame(
        common
        | {
            "batch_size": frame["batch_size"].astype("int64"),
            "status": frame["status"].astype(str),
            "reached": frame["status"] == TrialStatus.REACHED.value,
            "time_s": time_s,
            "energy_j": energy,
            "cost": [spec.cost(e, t) for e, t in zip(energy, time_s, strict=True)],
            "num_epochs": frame["num_epochs"].astype("int64"),
            "power_limit_w": frame.get("power_limit_w", pd.Series([None] * count)).astype(float),
            "metric": frame.get("metric", pd.Series([None] * count)).astype(float),
            "simulated": frame.get("simulated", pd.Series([False] * count)).astype(bool),
            "reason": "",
            "ended_at": at,
            "source": frame.get("source", pd.Series(["imported"] * count)).astype(str),
            EVENT_COLUMN: names,
        }
    )
    for stream, table in (("dispatched", dispatched), ("finished", finished)):
        arrow = pa.Table.from_pandas(table, preserve_index=False)
        if not store.backend.put_new(keys.snapshot_key(job_id, stream, 1), encode(stream, arrow, snapshot=True)):
            raise StoreError(f"job {job_id!r} already has a {stream} snapshot in {store.uri}")
    store.backend.put_new(keys.seq_key(job_id, "trial", count), b'{"imported": true}')
    top_recurrence = int(frame["recurrence"].max()) if count else 0
    if top_recurrence:
        store.backend.put_new(keys.seq_key(job_id, "recurrence", top_recurrence), b'{"imported": true}')
    return count


assert set(REQUIRED) <= set(SCHEMAS["dispatched"].names) | set(SCHEMAS["finished"].names)
