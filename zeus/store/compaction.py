"""Compaction: merge a stream's loose records into its next snapshot generation, then delete the
hints that snapshot holds and retire the snapshots it supersedes.

Why this is safe while others read and write is argued in streams.py (a reader lists hints first;
a hint is deleted only after a committed snapshot holds its record). The commit itself is the
exclusive create of the generation's mark (snapshots.commit); a lease (leases.py) only keeps
concurrent compactors from all doing the same work.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from zeus.store import keys, leases, snapshots
from zeus.store.backend import Backend
from zeus.store.errors import ObjectProblem
from zeus.store.streams import ORPHAN_HINT_AGE_S, StreamRead, read_stream


@dataclass
class CompactResult:
    stream: str
    generation: int  # the snapshot generation now latest as far as this call knows
    merged: int  # records merged into a new snapshot by this call
    deleted: int  # hints and snapshot objects removed
    note: str = ""
    problems: list[ObjectProblem] = field(default_factory=list)  # bad records left in place


def compact_stream(
    backend: Backend, job_id: str, stream: str, *, repair: bool = False, read: StreamRead | None = None
) -> CompactResult:
    """Commit the stream's cut as the next generation; then delete the hints it holds and retire old
    snapshots, only where the server honours exclusive creates (elsewhere two compactors could both "win").
    Without hints there is nothing to merge and nothing is read, unless `repair` (a read found the
    snapshot lost or damaged: commit one rebuilt from the records). `read`: a full read just made (a
    reader that compacts after reading reuses it instead of reading again). A compactor that finds
    another one at work on the same generation leaves the stream to it (leases.py)."""
    started = time.monotonic()
    if read is not None and not read.whole:
        raise ValueError("compaction commits a whole cut: pass a read made without a cursor")
    if read is None and not repair and not backend.list(keys.events_dir(job_id, stream)):  # nothing newer
        return CompactResult(stream, snapshots.top_generation(backend, job_id, stream), 0, 0, "nothing to merge")
    top = snapshots.top_generation(backend, job_id, stream)
    if read is not None and not read.rebuilt and top != read.generation:
        return CompactResult(stream, read.generation, 0, 0, "another compactor is ahead", read.problems)
    lease = leases.take(backend, job_id, stream, top + 1)
    if lease is None:
        return CompactResult(stream, top, 0, 0, "another compactor is at it", read.problems if read else [])
    result = None
    try:
        if read is None:
            read = read_stream(backend, job_id, stream)
            if not read.rebuilt and read.generation != top:
                return CompactResult(stream, read.generation, 0, 0, "another compactor is ahead", read.problems)
        result = _commit_cut(backend, job_id, stream, read, started)
        return result
    finally:
        committed = result.generation if result is not None and result.generation > top else None
        leases.release(backend, job_id, stream, lease, committed)


def _commit_cut(backend: Backend, job_id: str, stream: str, read: StreamRead, started: float) -> CompactResult:
    """compact_stream's work, under the lease: commit `read`'s cut, delete the hints it holds, retire."""
    merged = read.fresh.num_rows if read.fresh is not None else 0
    generation = read.generation
    names = set(read.position.loose) | snapshots.held(read.snapshot, set(read.hints))
    committed = None
    if read.position.loose:  # records not in the snapshot (or, rebuilt, every record): commit the read's cut
        generation = (snapshots.top_generation(backend, job_id, stream) if read.rebuilt else generation) + 1
        mark = snapshots.latest_mark(backend, job_id, stream) if not read.rebuilt else None
        since = generation if read.rebuilt or mark is None else mark.since
        token = uuid.uuid4().hex[:16]
        committed, note = snapshots.commit(backend, job_id, stream, generation, read.table, since, token, started)
        if committed is None:
            return CompactResult(stream, read.generation, 0, 0, note, read.problems)
    if not backend.conditional_writes_honoured():
        return CompactResult(stream, generation, merged, 0, "server ignores If-None-Match: hints kept", read.problems)
    done = [key for name, key in read.hints.items() if name in names]
    backend.delete(done)
    deleted = len(done)
    if committed is not None:
        retired, now = snapshots.retire(backend, job_id, stream, committed)
        deleted += len(retired) + _drop_orphan_hints(backend, job_id, stream, read, names, now)
        collect = getattr(backend, "collect_temp", None)  # a local directory: temp files of killed writers
        if collect is not None:
            collect(keys.job_dir(job_id))
    return CompactResult(stream, generation, merged, deleted, problems=read.problems)


def _drop_orphan_hints(
    backend: Backend, job_id: str, stream: str, read: StreamRead, held: set[str], now: float | None
) -> int:
    """Hints whose record never appeared (their writer died between the two creates), once old."""
    waiting = [name for name in read.hints if name not in held]
    if not waiting or now is None:
        return 0
    times = backend.list_times(keys.events_dir(job_id, stream))
    old = [name for name in waiting if times.get(read.hints[name], now) + ORPHAN_HINT_AGE_S <= now]
    present = backend.get_many([keys.record_key(job_id, stream, name) for name in old]) if old else {}
    orphans = [read.hints[name] for name in old if present.get(keys.record_key(job_id, stream, name)) is None]
    backend.delete(orphans)
    return len(orphans)
