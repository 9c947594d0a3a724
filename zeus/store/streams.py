"""Event streams: reading snapshot + newer events, and compaction. The store's one tricky part.

A stream (dispatched, finished, profiles, bandit) is a directory of event objects, one per
event, plus numbered snapshots. Snapshot generation g+1 is always built from generation g
plus the events listed after reading g, and is created with an exclusive create
(`put_new`), so of two compactors that started from g only one writes g+1; the loser
deletes nothing. Only the writer of g+1 deletes the events it merged, after g+1 exists and
after checking that no newer generation exists (its number might have been free only
because cleanup had removed an old snapshot it listed). The last KEEP_SNAPSHOTS generations
are kept for readers still on them. Nothing is deleted at all where the server turns out
(by probe) to ignore If-None-Match: reads stay exact, only not faster.

Why readers never see a row twice or lose one:
- A reader lists events *before* it lists snapshots. An event that is gone from its event
  listing was deleted by a compactor after that compactor's snapshot existed, so the
  snapshot the reader then finds (the latest) contains it.
- An event listed but gone by the time it is fetched, or a snapshot gone before it is read,
  means a compaction finished in between: the reader starts over (bounded).
- Rows are told apart by `_event` (the event object's name): events already in the
  snapshot are not fetched again, unless a loose copy with that name is still there, which
  is compared, so a late conflicting write is reported rather than silently shadowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from zeus.store import keys
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.errors import CorruptObjectError, ObjectProblem, StoreError
from zeus.store.schemas import EVENT_COLUMN, NewerSchemaError, comparable_rows, decode, encode, snapshot_schema

READ_ROUNDS = 8
KEEP_SNAPSHOTS = 3


@dataclass
class StreamRead:
    table: pa.Table  # snapshot schema: the stream's columns + `_event`
    generation: int  # snapshot generation read (0 = none)
    loose: int = 0  # events read on top of the snapshot (each one an object to fetch and decode)
    problems: list[ObjectProblem] = field(default_factory=list)


def _with_event(table: pa.Table, name: str) -> pa.Table:
    return table.append_column(EVENT_COLUMN, pa.array([name] * table.num_rows, pa.string()))


def _latest_snapshot(backend: Backend, job_id: str, stream: str) -> tuple[int, str | None, list[str]]:
    listed = [k for k in backend.list(keys.snapshots_dir(job_id, stream)) if keys.snapshot_generation(k) is not None]
    if not listed:
        return 0, None, []
    latest = max(listed, key=lambda k: keys.snapshot_generation(k) or 0)
    return keys.snapshot_generation(latest) or 0, latest, listed


def _late_conflicts(
    backend: Backend, stream: str, snapshot: pa.Table | None, covered_keys: list[str]
) -> tuple[list[str], list[ObjectProblem]] | None:
    """Loose events whose name a snapshot already holds: normally the moment between a compaction's
    snapshot and its delete (same content, safe to delete). One with *different* content was
    created after compaction had deleted the original (a conflicting retry that checked before
    the first write landed): the compacted event stays the truth and the late one is reported and
    kept for a person. Returns (keys safe to delete, problems), or None if one vanished meanwhile."""
    if not covered_keys or snapshot is None:
        return [], []
    fetched = backend.get_many(covered_keys)
    if any(data is None for data in fetched.values()):
        return None
    same, problems = [], []
    for key in covered_keys:
        name = keys.basename(key)
        try:
            late = comparable_rows(decode(key, fetched[key] or b"", stream).to_pylist())
        except CorruptObjectError as exc:
            problems.append(ObjectProblem(exc.key, exc.reason))
            continue
        kept = snapshot.filter(pc.equal(snapshot.column(EVENT_COLUMN), name)).drop_columns([EVENT_COLUMN])
        if late == comparable_rows(kept.to_pylist()):
            same.append(key)
        else:
            problems.append(ObjectProblem(key, "differs from the compacted event of the same name, which is kept"))
    return same, problems


def _read_once(backend: Backend, job_id: str, stream: str) -> StreamRead | None:
    """One attempt at a consistent read; None if a compaction raced it (the caller retries)."""
    event_keys = backend.list(keys.events_dir(job_id, stream))  # events first (see module doc)
    generation, snap_key, _ = _latest_snapshot(backend, job_id, stream)
    parts: list[pa.Table] = []
    covered: set[str] = set()
    snapshot = None
    if snap_key is not None:
        try:
            data = backend.get(snap_key)
        except ObjectNotFound:
            return None
        snapshot = decode(snap_key, data, stream, snapshot=True)  # a bad snapshot is refused, not skipped
        covered = set(snapshot.column(EVENT_COLUMN).to_pylist())
        parts.append(snapshot)
    todo = [k for k in event_keys if keys.basename(k) not in covered]
    fetched = backend.get_many(todo)
    late = _late_conflicts(backend, stream, snapshot, [k for k in event_keys if keys.basename(k) in covered])
    if late is None or any(data is None for data in fetched.values()):
        return None
    read = StreamRead(table=pa.table({}), generation=generation, loose=len(todo), problems=late[1])
    for key in todo:
        try:
            parts.append(_with_event(decode(key, fetched[key] or b"", stream), keys.basename(key)))
        except NewerSchemaError:
            raise
        except CorruptObjectError as exc:
            read.problems.append(ObjectProblem(exc.key, exc.reason))
    schema = snapshot_schema(stream)
    read.table = pa.concat_tables(parts) if parts else schema.empty_table()
    return read


def read_stream(backend: Backend, job_id: str, stream: str) -> StreamRead:
    """All rows of a stream: the latest snapshot plus the events it does not cover."""
    for _ in range(READ_ROUNDS):
        read = _read_once(backend, job_id, stream)
        if read is not None:
            return read
    raise StoreError(
        f"no stable read of {stream} for job {job_id!r} in {backend.location} after {READ_ROUNDS} rounds: "
        "objects kept disappearing (is something other than zeus-kfp compaction deleting them?)"
    )


@dataclass
class CompactResult:
    stream: str
    generation: int  # the snapshot generation now latest as far as this call knows
    merged: int  # events merged into a new snapshot by this call
    deleted: int  # event objects removed
    note: str = ""
    problems: list[ObjectProblem] = field(default_factory=list)  # bad events left in place


def compact_stream(backend: Backend, job_id: str, stream: str) -> CompactResult:
    """Merge the stream's events into snapshot g+1; delete them only once g+1 exists and only
    where the server honours exclusive creates (elsewhere two compactors could both "win")."""
    generation, snap_key, snapshots = _latest_snapshot(backend, job_id, stream)
    parts: list[pa.Table] = []
    covered: set[str] = set()
    snapshot = None
    if snap_key is not None:
        try:
            snapshot = decode(snap_key, backend.get(snap_key), stream, snapshot=True)
        except ObjectNotFound:
            return CompactResult(stream, generation, 0, 0, "another compaction is running")
        covered = set(snapshot.column(EVENT_COLUMN).to_pylist())
        parts.append(snapshot)
    event_keys = backend.list(keys.events_dir(job_id, stream))
    todo = [k for k in event_keys if keys.basename(k) not in covered]
    fetched = backend.get_many(todo)
    late = _late_conflicts(backend, stream, snapshot, [k for k in event_keys if keys.basename(k) in covered])
    if late is None or any(data is None for data in fetched.values()):
        return CompactResult(stream, generation, 0, 0, "another compaction is running")
    already, problems = late  # copies left by an interrupted delete: in the snapshot already
    merged: list[str] = []
    for key in todo:
        try:
            parts.append(_with_event(decode(key, fetched[key] or b"", stream), keys.basename(key)))
            merged.append(key)
        except NewerSchemaError:
            raise
        except CorruptObjectError as exc:  # left in place, reported by every read until someone removes it
            problems.append(ObjectProblem(exc.key, exc.reason))
    if merged:
        table = pa.concat_tables(parts)
        new_key = keys.snapshot_key(job_id, stream, generation + 1)
        if not backend.put_new(new_key, encode(stream, table, snapshot=True)):
            return CompactResult(stream, generation, 0, 0, "another compactor wrote this generation first", problems)
        generation += 1
        # Our generation number may have been free only because cleanup had deleted an old one
        # (we read a stale listing): then a newer generation exists, ours is not the latest, and
        # deleting what we merged would hide it. Remove our stray snapshot and stop.
        newest, _, _ = _latest_snapshot(backend, job_id, stream)
        if newest > generation:
            backend.delete([new_key])
            return CompactResult(stream, newest, 0, 0, "a newer snapshot exists; nothing deleted", problems)
    if not backend.conditional_writes_honoured():
        return CompactResult(stream, generation, len(merged), 0, "server ignores If-None-Match: events kept", problems)
    removable = merged + already
    old_snapshots = [k for k in snapshots if (keys.snapshot_generation(k) or 0) <= generation - KEEP_SNAPSHOTS]
    backend.delete(removable + old_snapshots)
    return CompactResult(stream, generation, len(merged), len(removable), problems=problems)


def find_trial_events(
    backend: Backend, job_id: str, stream: str, recurrence_id: str, attempt: int
) -> dict[str, list[dict]]:
    """One trial's events in a stream, {event name: rows}, whether still loose or already compacted.

    Loose events are looked for first (one listing). Only if there are none is the latest
    snapshot consulted: an event missing from the listing was either never written or deleted
    after a snapshot containing it existed (module doc), so that snapshot has it.
    """
    prefix = keys.event_prefix(job_id, stream, recurrence_id, attempt)
    for _ in range(READ_ROUNDS):
        listed = backend.list(prefix)
        if listed:
            fetched = backend.get_many(listed)
            if any(data is None for data in fetched.values()):
                continue  # compacted meanwhile: look again
            return {keys.basename(k): decode(k, fetched[k] or b"", stream).to_pylist() for k in listed}
        _, snap_key, _ = _latest_snapshot(backend, job_id, stream)
        if snap_key is None:
            return {}
        try:
            snapshot = decode(snap_key, backend.get(snap_key), stream, snapshot=True)
        except ObjectNotFound:
            continue
        mask = pc.and_(
            pc.equal(snapshot.column("recurrence_id"), recurrence_id), pc.equal(snapshot.column("attempt"), attempt)
        )
        found: dict[str, list[dict]] = {}
        for row in snapshot.filter(mask).to_pylist():
            found.setdefault(row.pop(EVENT_COLUMN), []).append(row)
        return found
    raise StoreError(f"no stable read of {prefix} in {backend.location} after {READ_ROUNDS} rounds")
