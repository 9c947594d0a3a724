"""The jobs: each job's spec record (agreed once, in a register), owner, and phase events.

The spec record, the phases and deleting a job are docs/STORE.md, "The job's other objects". Why the spec
guard never fails open: the first spec proposed for a job is its first spec for good (a later one is compared
with the spec in force, which only a run's gated begin may replace, by the log's rule: zeus_kfp.store.gating),
and a spec that is gone, damaged or another job's is reported, never replaced, while the job's log exists: a new
spec over an old history would make the bandit learn across two jobs.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from zeus_kfp.job import JobSpec
from zeus_kfp.settings import is_int
from zeus_kfp.store import consensus, entries, keys
from zeus_kfp.store.backend import Backend
from zeus_kfp.store.errors import (
    CorruptObjectError,
    ObjectProblem,
    StoreInputError,
    UnknownJobError,
)

DEFAULT_PHASE = "running"
# The recurrence gate's settings, which a JobSpec held until they became run settings (zeus_kfp.run_settings): a
# spec record agreed before then still has them, and they never said what the job is, so its reader drops them.
# A fact about records already written: never extended, whatever RunSettings gains.
FORMER_SPEC_FIELDS = ("period_s", "max_running", "drift_detector", "drift_threshold", "drift_data")


LAST_US = 253_402_300_799_000_000  # 9999-12-31T23:59:59 in µs since the epoch: a created_at a datetime holds


def _int(value: Any) -> int:
    return value if is_int(value) else -1


def _decode(job_id: str, key: str, data: bytes) -> dict[str, Any]:
    try:
        record = json.loads(data)
        fields = {name: value for name, value in record["spec"].items() if name not in FORMER_SPEC_FIELDS}
        record["spec"] = JobSpec.from_dict(fields)
        if not isinstance(record.get("owner"), str) or not 0 <= _int(record.get("created_at")) < LAST_US:
            raise ValueError("owner or created_at (µs since the epoch, before the year 10000) missing or wrong")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:  # JSON, or JobSpec's checks
        raise CorruptObjectError(key, f"not a readable job spec ({str(exc)[:120]})") from None
    if record["spec"].job_id != job_id:
        raise CorruptObjectError(key, f"holds job {record['spec'].job_id!r}'s spec, not {job_id!r}'s")
    return record


def stored(backend: Backend, job_id: str) -> dict[str, Any] | None:
    """The job's spec record ('spec' a JobSpec, 'owner', 'created_at'), None for a new job; a record that
    is gone while the job's log is not, or cannot be read, is CorruptObjectError naming it."""
    directory = keys.spec_dir(job_id)
    data = consensus.propose(backend, directory, None)  # learns, completing a proposal left half-way
    if data is not None:
        return _decode(job_id, consensus.value_key(directory, data), data)
    if backend.list_dirs(keys.log_dir(job_id)):
        raise CorruptObjectError(directory, "the job's spec is gone but its log is not; refusing to guess a spec")
    return None


def register(backend: Backend, spec: JobSpec, owner: str) -> JobSpec:
    """The job's first spec: the one agreed in its spec register, proposing `spec` for a new job (of two first
    runs at once, one spec is agreed; the caller compares its own with the spec in force, zeus_kfp.store.Store)."""
    if not isinstance(spec, JobSpec):
        raise StoreInputError("spec", type(spec).__name__, "a zeus_kfp.job.JobSpec")
    if not isinstance(owner, str):
        raise StoreInputError("owner", owner, "a string")
    record = stored(backend, spec.job_id)
    if record is None:
        mine = {"job_id": spec.job_id, "owner": owner, "created_at": entries.now_us(), "spec": spec.to_dict()}
        directory = keys.spec_dir(spec.job_id)
        data = consensus.propose(backend, directory, entries.encode(mine))
        assert data is not None
        record = _decode(spec.job_id, consensus.value_key(directory, data), data)
    return record["spec"]


def get_job(backend: Backend, job_id: str) -> JobSpec:
    record = stored(backend, keys.check_job_id(job_id))
    if record is None:
        raise UnknownJobError(f"no job {job_id!r} in {backend.location}")
    return record["spec"]


def set_phase(backend: Backend, job_id: str, phase: str) -> None:
    if phase not in keys.PHASES:
        raise StoreInputError("phase", phase, f"one of {list(keys.PHASES)}")
    backend.put(keys.phase_key(job_id, time.time_ns(), phase, uuid.uuid4().hex[:8]), b"")


def phase_of(backend: Backend, job_id: str) -> str:
    phases = [p for p in map(keys.phase_of_key, backend.list(keys.phases_dir(job_id))) if p is not None]
    return phases[-1] if phases else DEFAULT_PHASE


def list_jobs(backend: Backend, phase: str | None, owner: str | None, problems: list[ObjectProblem]) -> pd.DataFrame:
    """One row per job: job_id, owner, created_at, phase, then the spec's fields."""
    if phase is not None and phase not in keys.PHASES:
        raise StoreInputError("phase", phase, f"one of {list(keys.PHASES)} or None for all")
    records = []
    for folder in backend.list_dirs(keys.JOBS_DIR):
        job_id = keys.job_of_dir(folder)
        if job_id is None:
            continue
        try:
            record = stored(backend, job_id)
        except CorruptObjectError as exc:
            problems.append(ObjectProblem(exc.key, exc.reason))
            continue
        if record is None:
            continue
        created = datetime.fromtimestamp(record["created_at"] / 1e6, UTC)
        records.append(
            {"job_id": job_id, "owner": record["owner"], "created_at": created, "phase": phase_of(backend, job_id)}
            | {k: v for k, v in record["spec"].to_dict().items() if k != "job_id"}
        )
    columns = ["job_id", "owner", "created_at", "phase"] + [f for f in JobSpec.__dataclass_fields__ if f != "job_id"]
    frame = pd.DataFrame.from_records(records, columns=columns)
    if phase is not None:
        frame = frame[frame["phase"] == phase]
    if owner is not None:
        frame = frame[frame["owner"] == owner]
    return frame.reset_index(drop=True)
