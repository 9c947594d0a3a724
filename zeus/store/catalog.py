"""The jobs table: each job's spec (stored once, on first use), owner, and phase events.

The spec object is created exclusively: of two first recurrences that race with different
specs, one creates it and the other reads it back and gets JobSpecMismatchError. (An earlier
version let both write content-named objects and settled on the earliest created_at; a
thread race showed both callers could then believe they had won.) Phases are append-only
events; the latest wins.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zeus.job import JobSpec
from zeus.store import keys
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.errors import CorruptObjectError, JobSpecMismatchError, ObjectProblem, StoreInputError, UnknownJobError
from zeus.store.schemas import NewerSchemaError, decode, encode

if TYPE_CHECKING:  # pandas only where a frame is returned: a bandit step in a fresh process never needs it
    import pandas as pd

PHASES = ("running", "completed")
DEFAULT_PHASE = "running"


def now() -> datetime:
    return datetime.now(UTC)


def _spec_rows(
    backend: Backend, spec_keys: list[str], problems: list[ObjectProblem], fetched: dict | None = None
) -> list[dict]:
    rows = []
    for key, data in (fetched if fetched is not None else backend.get_many(spec_keys)).items():
        if data is None:
            continue
        try:
            row = decode(key, data, "jobs").to_pylist()[0]
            row["spec"] = JobSpec.from_dict(json.loads(row["spec_json"]))
        except NewerSchemaError:
            raise
        except CorruptObjectError as exc:
            problems.append(ObjectProblem(exc.key, exc.reason))
            continue
        except (ValueError, IndexError, TypeError) as exc:  # JSON or JobSpec validation
            problems.append(ObjectProblem(key, f"unreadable spec: {exc}"))
            continue
        row["key"] = key
        rows.append(row)
    return rows


def stored_job(backend: Backend, job_id: str, problems: list[ObjectProblem]) -> dict | None:
    """The job's spec row (with 'spec' as a JobSpec), or None if the job is new. A spec object
    that cannot be read is refused: guessing past it could let a different spec in."""
    key = keys.spec_key(job_id)
    try:
        data = backend.get(key)
    except ObjectNotFound:
        return None
    found: list[ObjectProblem] = []
    rows = _spec_rows(backend, [key], found, {key: data})
    if not rows:
        raise CorruptObjectError(key, found[0].reason if found else "unreadable spec")
    return rows[0]


def ensure_job(backend: Backend, spec: JobSpec, owner: str, problems: list[ObjectProblem]) -> JobSpec:
    if not isinstance(spec, JobSpec):
        raise StoreInputError("spec", type(spec).__name__, "a zeus.job.JobSpec")
    if not isinstance(owner, str):
        raise StoreInputError("owner", owner, "a string")
    existing = stored_job(backend, spec.job_id, problems)
    if existing is None:
        row = {"job_id": spec.job_id, "owner": owner, "created_at": now(), "spec_json": json.dumps(spec.to_dict())}
        if backend.put_new(keys.spec_key(spec.job_id), encode("jobs", [row])):
            return spec
        existing = stored_job(backend, spec.job_id, problems)  # another first recurrence created it
        assert existing is not None
    changes = existing["spec"].diff(spec)
    if changes:
        raise JobSpecMismatchError(spec.job_id, changes)
    return existing["spec"]


def get_job(backend: Backend, job_id: str, problems: list[ObjectProblem]) -> JobSpec:
    existing = stored_job(backend, keys.check_job_id(job_id), problems)
    if existing is None:
        raise UnknownJobError(f"no job {job_id!r} in {backend.location}")
    return existing["spec"]


def set_phase(backend: Backend, job_id: str, phase: str) -> None:
    if phase not in PHASES:
        raise StoreInputError("phase", phase, f"one of {list(PHASES)}")
    at = now()
    at_ns = int(at.timestamp() * 1_000_000) * 1000
    row = {"job_id": keys.check_job_id(job_id), "phase": phase, "at": at}
    backend.put_new(keys.phase_key(job_id, at_ns, phase, uuid.uuid4().hex[:8]), encode("phases", [row]))


def list_jobs(backend: Backend, phase: str | None, owner: str | None, problems: list[ObjectProblem]) -> pd.DataFrame:
    """One row per job: job_id, owner, created_at, phase, then the spec's fields."""
    import pandas as pd

    if phase is not None and phase not in PHASES:
        raise StoreInputError("phase", phase, f"one of {list(PHASES)} or None for all")
    by_job: dict[str, list[str]] = {}
    for key in backend.list(keys.SPECS_DIR):
        job_id = keys.job_id_of_spec_key(key)
        if job_id is not None:
            by_job.setdefault(job_id, []).append(key)
    latest_phase: dict[str, tuple[int, str, str]] = {}
    for key in backend.list(keys.PHASES_DIR):
        parsed = keys.parse_phase_key(key)
        if parsed is None:
            continue
        job_id, at_ns, job_phase = parsed
        latest_phase[job_id] = max(latest_phase.get(job_id, (-1, "", "")), (at_ns, key, job_phase))
    rows = sorted(_spec_rows(backend, [k for ks in by_job.values() for k in ks], problems), key=lambda r: r["job_id"])
    records = []
    for row in rows:
        job_phase = latest_phase.get(row["job_id"], (0, "", DEFAULT_PHASE))[2]
        records.append(
            {"job_id": row["job_id"], "owner": row["owner"], "created_at": row["created_at"], "phase": job_phase}
            | {k: v for k, v in row["spec"].to_dict().items() if k != "job_id"}
        )
    columns = ["job_id", "owner", "created_at", "phase"] + [f for f in JobSpec.__dataclass_fields__ if f != "job_id"]
    frame = pd.DataFrame.from_records(records, columns=columns)
    if phase is not None:
        frame = frame[frame["phase"] == phase]
    if owner is not None:
        frame = frame[frame["owner"] == owner]
    return frame.reset_index(drop=True)
