"""Seeding a new job with a long history in one go (a simulated history, a migration, a benchmark).

Writing 10,000 trials one event at a time is ~40,000 requests; this writes what compaction
would have produced instead: one snapshot generation per stream, plus the top number claims so
that later trials and recurrences continue the numbering. The imported rows are also kept in
`imported/{stream}.parquet`, never deleted, because snapshots are only caches (a lost one is
rebuilt from the records, and imported trials have none). Imported recurrence ids are closed:
`begin_recurrence` refuses them, so no new trial can collide with an imported one.

Idempotent, and safe under lost answers: the manifest (`imported/manifest`, created first,
exclusively) names the import by a checksum of its content and fixes its timestamp, so a
second call with the same frame (after a crash, a timeout, or a create whose answer was lost
and that the server then refused as existing) writes the same objects and finishes the job;
a different frame is refused. Claims come before snapshots, so no new trial can ever take a
number an imported trial has.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime

import pandas as pd
import pyarrow as pa

from zeus.job import JobSpec, TrialStatus
from zeus.store import keys, ledger, snapshots
from zeus.store.backend import Backend
from zeus.store.catalog import now
from zeus.store.errors import StoreError, StoreInputError
from zeus.store.schemas import EVENT_COLUMN, SCHEMAS, decode, encode, table_checksum, to_arrow
from zeus.store.store import Store

REQUIRED = ("recurrence", "recurrence_id", "attempt", "batch_size", "status", "time_s", "energy_j", "num_epochs")
OPTIONAL = {"power_limit_w": None, "metric": None, "simulated": False}


def _check(trials: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in trials.columns]
    if missing:
        raise StoreInputError("trials", list(trials.columns), f"a DataFrame with columns {list(REQUIRED)}")
    bad = sorted(set(trials["status"]) - {s.value for s in TrialStatus if s.finished})
    if bad:
        raise StoreInputError("status", bad[0], "a finished TrialStatus value")
    frame = trials.reset_index(drop=True)
    if frame.duplicated(["recurrence_id", "attempt"]).any():
        raise StoreInputError("trials", "duplicate (recurrence_id, attempt)", "one row per recurrence_id and attempt")
    for rid in frame["recurrence_id"].astype(str):
        keys.check_recurrence_id(rid)
    return frame


def _tables(spec: JobSpec, frame: pd.DataFrame, at: datetime) -> dict[str, pa.Table]:
    job_id, count = spec.job_id, len(frame)
    names = [keys.event_name(str(r), int(a)) for r, a in zip(frame["recurrence_id"], frame["attempt"], strict=True)]
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
    energy, time_s = frame["energy_j"].astype(float), frame["time_s"].astype(float)
    optional = {c: frame[c] if c in frame else pd.Series([d] * count) for c, d in OPTIONAL.items()}
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
            "power_limit_w": optional["power_limit_w"].astype(float),
            "metric": optional["metric"].astype(float),
            "simulated": optional["simulated"].astype(bool),
            "reason": "",
            "ended_at": at,
            "source": frame.get("source", pd.Series(["imported"] * count)).astype(str),
            EVENT_COLUMN: names,
        }
    )
    return {
        stream: to_arrow(stream, pa.Table.from_pandas(table, preserve_index=False), snapshot=True)
        for stream, table in (("dispatched", dispatched), ("finished", finished))
    }


def _manifest(backend: Backend, job_id: str, digest: str, frame: pd.DataFrame) -> ledger.ImportManifest:
    """The import's manifest: ours (created now, or by an earlier try of this same import), else refused."""
    key = keys.import_key(job_id)
    existing = ledger.read_manifest(backend, job_id)
    if existing is None:
        if any(snapshots.top_generation(backend, job_id, s) for s in ("dispatched", "finished")) or any(
            backend.list(keys.events_dir(job_id, s)) for s in ("dispatched", "finished")
        ):
            raise StoreError(f"job {job_id!r} already has trials in {backend.location}; import only into a new job")
        ids = sorted(set(frame["recurrence_id"].astype(str)))
        backend.put_new(key, ledger.encode_manifest(digest, len(frame), now().isoformat(), ids))
        existing = ledger.read_manifest(backend, job_id)  # ours, a racing import's, or ours whose answer was lost
        assert existing is not None  # created, or the create was refused: it exists
    if existing.digest != digest:
        raise StoreError(f"job {job_id!r} already has trials (another imported history) in {backend.location}")
    return existing


def _put_same(backend: Backend, key: str, data: bytes, stream: str, checksum: str) -> None:
    """Create `key`, or find it already holding this content (an earlier try of this import)."""
    if backend.put_new(key, data):
        return
    if table_checksum(decode(key, backend.get(key), stream, snapshot=True)) != checksum:
        raise StoreError(f"{key} in {backend.location} holds another import; nothing more was written")


def import_trials(store: Store, spec: JobSpec, trials: pd.DataFrame) -> int:
    """Store finished trials for a job that has none yet; trial numbers follow the frame's order.

    `trials` needs the columns in REQUIRED (cost is recomputed with the job's cost function).
    Returns the number of trials written. Calling it again with the same frame is a no-op that
    finishes an interrupted import.
    """
    frame = _check(trials)
    store.ensure_job(spec)
    job_id, backend, count = spec.job_id, store.backend, len(frame)
    probe = _tables(spec, frame, datetime.fromtimestamp(0).astimezone())
    digest = table_checksum(probe["dispatched"].drop_columns(["started_at"]))
    digest += table_checksum(probe["finished"].drop_columns(["ended_at"]))
    manifest = _manifest(backend, job_id, digest, frame)
    tables = _tables(spec, frame, datetime.fromisoformat(manifest.at))
    if count:
        backend.put_new(keys.seq_key(job_id, "trial", count), b'{"imported": true}')  # claims first
    top_recurrence = int(frame["recurrence"].max()) if count else 0
    if top_recurrence:
        backend.put_new(keys.seq_key(job_id, "recurrence", top_recurrence), b'{"imported": true}')
    for stream, table in tables.items():
        checksum = table_checksum(table)
        data = encode(stream, table, snapshot=True)
        _put_same(backend, keys.import_table_key(job_id, stream), data, stream, checksum)
        if snapshots.top_generation(backend, job_id, stream) == 0:
            snapshots.commit(backend, job_id, stream, 1, table, 1, uuid.uuid4().hex[:16], time.monotonic())
        mark = snapshots.read_mark(backend, job_id, stream, 1)
        if mark.checksum != checksum:
            raise StoreError(f"job {job_id!r} has a {stream} snapshot that is not this import in {backend.location}")
    return count


assert set(REQUIRED) <= set(SCHEMAS["dispatched"].names) | set(SCHEMAS["finished"].names)
