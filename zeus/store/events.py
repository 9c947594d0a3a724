"""Writing trial events: dispatched, finished, profile and bandit-state, one record each.

Each trial has one record per stream, created exclusively after its hint (streams.py says why
that order, and why a record is never deleted). What a second write of the same trial gets is
decided in conflicts.py (rules 1 and 2): dispatched and finished refuse different content with
EventConflictError, whether the writer checked first or lost the race to create; profiles and
bandit snapshots keep the first write. A create whose answer was lost and was retried is refused
by its own object: the bytes read back are ours, and the write counts as done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zeus.job import TrialResult
from zeus.policy.base import ArmState, Decision
from zeus.profiles import PROFILE_COLUMNS, PROFILE_PHASES, PROFILE_SCHEMA
from zeus.store import conflicts, keys, ledger
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.catalog import now
from zeus.store.errors import StoreInputError, UnknownTrialError
from zeus.store.schemas import SCHEMAS, decode, encode
from zeus.store.streams import ORPHAN_HINT_AGE_S

if TYPE_CHECKING:  # pandas only for a profile, which the bandit step never writes
    import pandas as pd

DECISION_FIELDS = ("batch_size", "cost_threshold", "stage", "decision_reason", "kfp_run_id")


@dataclass(frozen=True)
class Dispatch:
    """A dispatched trial as stored: its numbers and the decision it was dispatched with."""

    key: str
    recurrence: int
    trial: int
    decision: Decision
    kfp_run_id: str


def create_record(backend: Backend, job_id: str, stream: str, recurrence_id: str, attempt: int, data: bytes) -> bytes:
    """Create the trial's record (hint first). Returns the bytes the store keeps: `data` if this call
    created it (or created it before a lost answer), else the winner's."""
    name = keys.event_name(recurrence_id, attempt)
    hint, key = keys.hint_key(job_id, stream, name), keys.record_key(job_id, stream, name)
    started = time.monotonic()
    backend.put_new(hint, b"")
    if backend.put_new(key, data):
        if time.monotonic() - started > ORPHAN_HINT_AGE_S / 2:  # paused so long that our hint may be collected
            backend.put_new(hint, b"")
        return data
    return backend.get(key)  # records are never deleted: it is there


def _stored_record(backend: Backend, job_id: str, stream: str, recurrence_id: str, attempt: int) -> list[dict] | None:
    key = keys.event_key(job_id, stream, recurrence_id, attempt)
    try:
        data = backend.get(key)
    except ObjectNotFound:
        return None
    return decode(key, data, stream).to_pylist()


def write_event(
    backend: Backend, job_id: str, stream: str, recurrence_id: str, attempt: int, rows: list[dict[str, Any]]
) -> str:
    """Write one event unless the same content is stored; refuse different content. Returns the key."""
    key = keys.event_key(job_id, stream, recurrence_id, attempt)
    data = encode(stream, rows)
    kept = create_record(backend, job_id, stream, recurrence_id, attempt, data)
    if kept != data:
        conflicts.settle_event(key, decode(key, kept, stream).to_pylist(), rows)
    return key


def write_side_event(
    backend: Backend, job_id: str, stream: str, recurrence_id: str, attempt: int, rows: list[dict[str, Any]]
) -> str:
    """A side-table event: the first write of the trial wins; a later one is dropped unread (conflicts.py, rule 2)."""
    name = keys.event_name(recurrence_id, attempt)
    key = keys.record_key(job_id, stream, name)
    backend.put_new(keys.hint_key(job_id, stream, name), b"")
    backend.put_new(key, encode(stream, rows))
    return key


def _dispatch_of(key: str, row: dict) -> Dispatch:
    decision = Decision(row["batch_size"], row["cost_threshold"], row["stage"], row["decision_reason"])
    return Dispatch(key, row["recurrence"], row["trial"], decision, row["kfp_run_id"])


def find_dispatch(backend: Backend, job_id: str, recurrence_id: str, attempt: int) -> Dispatch | None:
    """The attempt's dispatch as stored (one GET of its record), or None."""
    rows = _stored_record(backend, job_id, "dispatched", recurrence_id, attempt)
    return None if not rows else _dispatch_of(keys.event_key(job_id, "dispatched", recurrence_id, attempt), rows[0])


Known = dict[tuple[str, str, int], Dispatch]  # a Store's memory of dispatches it has seen (they never change)


def require_dispatch(backend: Backend, job_id: str, recurrence_id: str, attempt: int, known: Known) -> Dispatch:
    found = known.get((job_id, recurrence_id, attempt)) or find_dispatch(backend, job_id, recurrence_id, attempt)
    if found is None:
        raise UnknownTrialError(
            f"trial {recurrence_id!r} attempt {attempt} of job {job_id!r} was never dispatched: "
            "call dispatch_trial first"
        )
    known[(job_id, recurrence_id, attempt)] = found
    return found


def dispatch(
    backend: Backend,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    decision: Decision,
    kfp_run_id: str,
    known: Known,
    recurrence: int,
    looked_up: bool = False,
    seen_trial: int = 0,
) -> int:
    """Record the dispatch (claiming a trial number) unless this attempt already has one.
    `looked_up`: the caller just found no dispatch (the record's exclusive create still settles a race);
    `seen_trial`: a trial number the caller has read (the claim lists only the claims after it)."""
    if not isinstance(decision, Decision):
        raise StoreInputError("decision", type(decision).__name__, "a zeus.policy.base.Decision")
    existing = known.get((job_id, recurrence_id, attempt))
    if existing is None and not looked_up:
        existing = find_dispatch(backend, job_id, recurrence_id, attempt)
    if existing is None:
        owner = {"recurrence_id": recurrence_id, "attempt": attempt}
        trial = ledger.claim_number(backend, job_id, "trial", owner, claimed=seen_trial)
        row = {
            "job_id": job_id,
            "recurrence_id": recurrence_id,
            "attempt": attempt,
            "recurrence": recurrence,
            "trial": trial,
            "batch_size": decision.batch_size,
            "cost_threshold": decision.cost_threshold,
            "stage": decision.stage,
            "decision_reason": decision.reason,
            "kfp_run_id": kfp_run_id,
            "started_at": now(),
        }
        key = keys.event_key(job_id, "dispatched", recurrence_id, attempt)
        # A simultaneous dispatch of this attempt may win the record: then ours is refused, we are
        # told its trial, and our claimed number stays a gap.
        data = encode("dispatched", [row])
        kept = create_record(backend, job_id, "dispatched", recurrence_id, attempt, data)
        existing = _dispatch_of(key, row if kept == data else decode(key, kept, "dispatched").to_pylist()[0])
    known[(job_id, recurrence_id, attempt)] = existing
    conflicts.settle_dispatch(existing, decision, kfp_run_id)
    return existing.trial


def finish(backend: Backend, job_id: str, recurrence_id: str, attempt: int, result: TrialResult, known: Known) -> None:
    if not isinstance(result, TrialResult):
        raise StoreInputError("result", type(result).__name__, "a zeus.job.TrialResult")
    found = require_dispatch(backend, job_id, recurrence_id, attempt, known)
    if result.batch_size != found.decision.batch_size:
        raise StoreInputError(
            "batch_size", result.batch_size, f"{found.decision.batch_size}, the batch size trial {found.trial} ran with"
        )
    row = {"job_id": job_id, "recurrence_id": recurrence_id, "attempt": attempt, **result.to_dict(), "ended_at": now()}
    write_event(backend, job_id, "finished", recurrence_id, attempt, [row])


def _check_profile(profile: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    if not isinstance(profile, pd.DataFrame):
        raise StoreInputError("profile", type(profile).__name__, f"a pandas DataFrame with columns {PROFILE_COLUMNS}")
    missing = [c for c in PROFILE_COLUMNS if c not in profile.columns]
    if missing:
        raise StoreInputError("profile", list(profile.columns), f"columns {list(PROFILE_COLUMNS)} (missing {missing})")
    bad = sorted(set(profile["phase"].astype(str)) - set(PROFILE_PHASES))
    if bad:
        raise StoreInputError("phase", bad[0], f"one of {list(PROFILE_PHASES)}")
    out = profile.loc[:, list(PROFILE_COLUMNS)].copy()
    for column, kind in PROFILE_SCHEMA:
        if kind == "float64":
            try:
                out[column] = pd.to_numeric(out[column], errors="raise").astype(float)
            except (ValueError, TypeError):
                raise StoreInputError(column, profile[column].tolist()[:3], "numbers") from None
        else:  # a label or a flag: stored as pyarrow reads the schema (zeus.profiles)
            out[column] = out[column].astype({"string": str, "bool": bool}[kind])
    return out


def write_profile(
    backend: Backend, job_id: str, recurrence_id: str, attempt: int, profile: pd.DataFrame, known: Known
) -> None:
    clean = _check_profile(profile)
    found = require_dispatch(backend, job_id, recurrence_id, attempt, known)
    base = {
        "job_id": job_id,
        "recurrence_id": recurrence_id,
        "attempt": attempt,
        "recurrence": found.recurrence,
        "trial": found.trial,
        "batch_size": found.decision.batch_size,
    }
    rows = [base | record for record in clean.to_dict("records")]
    write_side_event(backend, job_id, "profiles", recurrence_id, attempt, rows)


def write_bandit_state(
    backend: Backend,
    job_id: str,
    recurrence_id: str,
    attempt: int,
    arms: list[ArmState],
    lowest_cost: float | None,
    known: Known,
) -> None:
    if not all(isinstance(arm, ArmState) for arm in arms):
        raise StoreInputError("arms", [type(a).__name__ for a in arms][:3], "a list of zeus.policy.base.ArmState")
    found = require_dispatch(backend, job_id, recurrence_id, attempt, known)
    written_at = now()
    rows = [
        {
            "job_id": job_id,
            "recurrence_id": recurrence_id,
            "attempt": attempt,
            "recurrence": found.recurrence,
            "trial": found.trial,
            "written_at": written_at,
            "batch_size": arm.batch_size,
            "stage": arm.stage,
            "num_observations": arm.num_observations,
            "posterior_mean": arm.posterior_mean,
            "posterior_precision": arm.posterior_precision,
            "pruned": arm.pruned,
            "lowest_cost": lowest_cost,
        }
        for arm in arms
    ]
    write_side_event(backend, job_id, "bandit", recurrence_id, attempt, rows)


assert set(SCHEMAS["dispatched"].names) >= set(DECISION_FIELDS)
