"""What the store keeps when two writes, or two copies, of one thing meet: every such rule, in one place.

Writes (the first exclusive create of an object decides; events.py, catalog.py and ledger.py do the
creating, and ask here what a later writer is told):
1. dispatched and finished events are the truth about a trial. The same content again (timestamps
   aside: `comparable_rows`) returns what is stored; different content is refused with
   EventConflictError naming the record and what differs (`settle_event`, `settle_dispatch`).
2. profiles and bandit snapshots are side tables: the first write of a trial wins and a later one
   is dropped unread (a bandit snapshot recomputed after other recurrences finished trials differs,
   and must not fail a retried feedback step; a corrupt old one must not block it).
3. A job's spec: the first stored wins; a later recurrence with a different spec is refused with
   JobSpecMismatchError naming the fields that changed (`settle_spec`).
4. Phases are events of their own (never conflict); the latest wins. Number claims: the first
   create of `seq/{kind}/{n}` wins and the loser takes n+1 (ledger.py).

Reads (`merge_cut`, the one merge of a stream, used by every read and so by compaction, which
commits a full read's cut):
5. A trial's record decides over any copy of it: a snapshot's or a bulk import's row for a trial
   whose record is read beside it is dropped. In a healthy store nothing is dropped (a reader
   fetches only the records its snapshot lacks, and imported trials have no records); the rule
   says what wins if it ever happens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from zeus.store.errors import EventConflictError, JobSpecMismatchError
from zeus.store.schemas import EVENT_COLUMN

if TYPE_CHECKING:
    from zeus.job import JobSpec
    from zeus.policy.base import Decision
    from zeus.store.events import Dispatch

# When an event was written, not what it says: ignored when deciding whether two writes are the same.
TIMESTAMP_COLUMNS = frozenset({"created_at", "started_at", "ended_at", "written_at", "at"})


def comparable_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as compared for "same event": without the timestamps of when they were written."""
    return [{k: v for k, v in row.items() if k not in TIMESTAMP_COLUMNS} for row in rows]


def differences(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    """What differs between two writes of one event, for the error a person reads."""
    old, new = comparable_rows(old), comparable_rows(new)
    if len(old) != len(new):
        return f"{len(old)} rows stored, {len(new)} given"
    changed = sorted({k for a, b in zip(old, new, strict=True) for k in a if a.get(k) != b.get(k)})
    first = next((a, b) for a, b in zip(old, new, strict=True) if any(a.get(k) != b.get(k) for k in changed))
    return "; ".join(f"{k}: {first[0].get(k)!r} -> {first[1].get(k)!r}" for k in changed)


def settle_event(key: str, stored: list[dict[str, Any]], given: list[dict[str, Any]]) -> None:
    """Rule 1 for a finished (or any truth) event: the same content is fine, different is refused."""
    if comparable_rows(stored) != comparable_rows(given):
        raise EventConflictError(key, differences(stored, given))


def settle_dispatch(stored: Dispatch, decision: Decision, kfp_run_id: str) -> None:
    """Rule 1 for a dispatch: the attempt was dispatched with this decision and run, or is refused."""
    if stored.decision != decision or stored.kfp_run_id != kfp_run_id:
        raise EventConflictError(
            stored.key,
            f"dispatched with {stored.decision} (kfp_run_id {stored.kfp_run_id!r}), "
            f"now {decision} (kfp_run_id {kfp_run_id!r})",
        )


def settle_spec(stored: JobSpec, given: JobSpec) -> JobSpec:
    """Rule 3: the stored spec, if `given` is the same; JobSpecMismatchError naming the changes else."""
    changes = stored.diff(given)
    if changes:
        raise JobSpecMismatchError(given.job_id, changes)
    return stored


def merge_cut(base: pa.Table | None, records: pa.Table) -> pa.Table:
    """Rule 5: `base` (a snapshot's rows, or a bulk import's), less the trials `records` has, then `records`.
    Both in the stream's snapshot schema (with EVENT_COLUMN, the trial's name)."""
    if base is None:
        return records
    if base.num_rows and records.num_rows:
        recorded = records.column(EVENT_COLUMN).combine_chunks()
        base = base.filter(pc.invert(pc.is_in(base.column(EVENT_COLUMN), value_set=recorded)))
    return pa.concat_tables([base, records]) if records.num_rows else base
