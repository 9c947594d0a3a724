"""Committed snapshots of a stream: which generation is current, loading it, committing the next.

A snapshot generation is written in two steps. The compactor writes the snapshot object under
a name of its own (`snapshots/{stream}/{g}.{token}.parquet`), then *commits* it by creating the
mark `marks/{stream}/.../{g}` exclusively; the mark names the object, its row count and its
checksum. Of two compactors that built generation g, exactly one mark is created: the loser
deletes its object. Marks are never deleted, so a generation number can never be committed
twice (an earlier design reused numbers freed by cleanup), and the newest mark always says
which snapshot is current: a committed snapshot that is missing, emptied or replaced is
detected (its mark says otherwise), never read as "no results".

A mark also says from which generation on the chain is unbroken (`since`): generation g+1 is
normally snapshot g with new rows appended (g's rows are a prefix of g+1's), which is what
lets a cursor name "the first n rows of generation g" (streams.py). A snapshot rebuilt from
the records (after a lost one) or written by bulk import starts a new chain.

Beside each snapshot its compactor writes the snapshot's event names alone (`{g}.{token}.names`,
framed: one JSON line naming the snapshot's row count and checksum, then the names one per line).
A cursor read over an unchanged snapshot only needs to know which of a few listed hints the snapshot
holds (streams.py); that object answers it for a fraction of decoding the snapshot's `_event`
column, which remains the way for a snapshot without one (written before it, or lost).

Retention, by the storage's clock (never a pod's): a superseded snapshot object is deleted
only once its successor's mark is GRACE_S old. A reader that listed the marks before the
successor existed therefore has GRACE_S to fetch the snapshot it chose; a compactor that
takes longer than COMMIT_WITHIN_S (GRACE_S / 2) before committing gives up instead (its base
may be gone).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from zeus.store import framing, keys
from zeus.store.backend import Backend, ObjectNotFound, create_or_confirm
from zeus.store.errors import CorruptObjectError
from zeus.store.ledger import top_number
from zeus.store.schemas import EVENT_COLUMN, decode, decode_json, decode_names, encode, encode_json, verified_checksum

GRACE_S = 120.0  # a superseded snapshot is kept this long after its successor's commit (storage clock)
COMMIT_WITHIN_S = 60.0  # GRACE_S / 2: a compactor slower than this does not commit (its base may be gone)


@dataclass(frozen=True)
class Mark:
    """A committed generation: its snapshot object, row count, checksum, and where its chain starts."""

    generation: int
    snapshot: str
    rows: int
    checksum: str
    since: int

    def record(self) -> dict:
        fields = ("generation", "snapshot", "rows", "checksum", "since")
        return {name: getattr(self, name) for name in fields}


def top_generation(backend: Backend, job_id: str, stream: str, at_least: int = 0) -> int:
    """The newest committed generation (`at_least`: one known committed, which saves a listing)."""
    return top_number(backend, keys.marks_dir(job_id, stream), at_least)


def read_mark(backend: Backend, job_id: str, stream: str, generation: int) -> Mark:
    key = keys.mark_key(job_id, stream, generation)
    record = decode_json(key, backend.get(key))
    try:
        mark = Mark(
            int(record["generation"]), str(record["snapshot"]), int(record["rows"]), str(record["checksum"]),
            int(record["since"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptObjectError(key, f"not a snapshot mark ({exc})") from None
    if mark.generation != generation or not mark.snapshot.startswith(keys.snapshots_dir(job_id, stream)):
        raise CorruptObjectError(key, f"names generation {mark.generation} at {mark.snapshot!r}")
    return mark


def latest_mark(backend: Backend, job_id: str, stream: str) -> Mark | None:
    generation = top_generation(backend, job_id, stream)
    return read_mark(backend, job_id, stream, generation) if generation else None


def load(backend: Backend, stream: str, mark: Mark) -> pa.Table:
    """The committed snapshot, checked against its mark. ObjectNotFound if the object is gone."""
    table = decode(mark.snapshot, backend.get(mark.snapshot), stream, snapshot=True)
    if table.num_rows != mark.rows or verified_checksum(table) != mark.checksum:
        raise CorruptObjectError(
            mark.snapshot, f"is not the snapshot its mark committed ({table.num_rows} rows, the mark says {mark.rows})"
        )
    return table


NAMES_KIND = b"names"
# `held` searches a names object's bytes once per candidate up to this many candidates, and splits it
# into a set beyond: at 10,000 names a search takes 30-100 us and the split about 0.6 ms.
SEARCH_AT_MOST = 4


@dataclass(frozen=True)
class SnapshotNames:
    """A snapshot's event names as its names object holds them: newline-separated, with one in front."""

    lines: bytes

    def holds(self, name: str) -> bool:
        return framing.has_line(self.lines, name)


def encode_names(table: pa.Table, checksum: str) -> bytes:
    """The names object of snapshot `table` (its checksum as the mark will name it)."""
    names = table.column(EVENT_COLUMN).to_pylist()
    lines = framing.as_lines(names)
    return framing.frame_headed(NAMES_KIND, {"rows": len(names), "checksum": checksum}, lines)


def decode_names_object(key: str, data: bytes) -> tuple[int, str, SnapshotNames]:
    """(rows, snapshot checksum, names) from a names object; CorruptObjectError naming the key."""
    try:
        record, lines = framing.unframe_lines(NAMES_KIND, data, "rows")
        return int(record["rows"]), str(record["checksum"]), SnapshotNames(lines)
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptObjectError(key, f"not a snapshot's names object ({str(exc)[:80]})") from None


def load_names(
    backend: Backend, stream: str, snapshot: str, rows: int, checksum: str
) -> SnapshotNames | pa.Array | None:
    """Only the event names of committed snapshot `snapshot`, checked against what its mark said (rows,
    checksum): from its names object, else from the snapshot's `_event` column (decoded and checked
    alone); None when neither can be had that way (load the snapshot whole). ObjectNotFound if the
    snapshot is gone. What a cursor read of an unchanged snapshot needs."""
    names_key = keys.snapshot_names_key(snapshot)
    try:
        stored_rows, stored_sum, names = decode_names_object(names_key, backend.get(names_key))
    except ObjectNotFound:  # a snapshot written before names objects, or its names object lost
        pass
    else:
        if stored_rows != rows or stored_sum != checksum:
            raise CorruptObjectError(names_key, f"names {stored_rows} rows of another snapshot than its mark's")
        return names
    found = decode_names(snapshot, backend.get(snapshot), stream)
    if found is None:
        return None
    column, stored = found
    if len(column) != rows or stored != checksum:
        raise CorruptObjectError(
            snapshot, f"is not the snapshot its mark committed ({len(column)} rows, the mark says {rows})"
        )
    return column


def commit(
    backend: Backend, job_id: str, stream: str, generation: int, table: pa.Table, since: int, token: str, started: float
) -> tuple[Mark | None, str]:
    """Write `table` as generation `generation` and commit it. (None, why) if this compactor must not:
    another one committed that generation first, or this one took too long (its base may be retired)."""
    snapshot_key = keys.snapshot_key(job_id, stream, generation, token)
    data = encode(stream, table, snapshot=True)
    stored = decode(snapshot_key, data, stream, snapshot=True)  # what readers will get back
    mark = Mark(generation, snapshot_key, stored.num_rows, verified_checksum(stored) or "", since)
    written = [snapshot_key, keys.snapshot_names_key(snapshot_key)]
    for key, content in zip(written, (data, encode_names(stored, mark.checksum)), strict=True):
        if not create_or_confirm(backend, key, content):
            raise CorruptObjectError(key, "a snapshot name chosen with a fresh random token already exists")
    if time.monotonic() - started > COMMIT_WITHIN_S:
        backend.delete(written)
        return None, f"compaction took over {COMMIT_WITHIN_S:.0f} s; not committed"
    mark_data = encode_json(mark.record())
    mark_key = keys.mark_key(job_id, stream, generation)
    if create_or_confirm(backend, mark_key, mark_data):
        return mark, ""
    backend.delete(written)
    return None, "another compactor committed this generation first"


def retire(backend: Backend, job_id: str, stream: str, committed: Mark) -> tuple[list[str], float | None]:
    """Delete snapshot objects superseded for GRACE_S (storage clock) and strays as old. Returns them,
    and the storage's time of `committed`'s mark (a fresh "now" by the storage clock, None if unknown)."""
    mark_times: dict[int, float] = {}
    folders = {keys.mark_key(job_id, stream, g).rsplit("/", 1)[0] + "/" for g in (committed.generation,)}
    files = backend.list_times(keys.snapshots_dir(job_id, stream))
    generations = {keys.snapshot_generation(k) for k in files} - {None}
    folders |= {keys.mark_key(job_id, stream, g + 1).rsplit("/", 1)[0] + "/" for g in generations if g is not None}
    for folder in folders:
        for key, at in backend.list_times(folder).items():
            number = keys.seq_number(key)
            if number is not None:
                mark_times[number] = at
    now = mark_times.get(committed.generation)
    if now is None:
        return [], None
    old = []
    for key, at in files.items():
        generation = keys.snapshot_generation(key)
        if generation is None or generation >= committed.generation or key == committed.snapshot:
            continue
        successor = mark_times.get(generation + 1)
        if successor is not None and successor + GRACE_S <= now and at + GRACE_S <= now:
            old.append(key)
    backend.delete(old)
    return old, now


def held(snapshot: pa.Table | pa.Array | SnapshotNames | None, candidates: set[str]) -> set[str]:
    """Which of a few names the snapshot (or its names, `load_names`) holds, without turning all its
    names into Python strings."""
    if snapshot is None or not candidates:
        return set()
    if isinstance(snapshot, SnapshotNames):
        if len(candidates) <= SEARCH_AT_MOST:
            return {name for name in candidates if snapshot.holds(name)}
        return candidates & set(snapshot.lines.decode().split("\n"))
    names = snapshot.column(EVENT_COLUMN).combine_chunks() if isinstance(snapshot, pa.Table) else snapshot
    asked = pa.array(sorted(candidates), pa.string())
    found = pc.is_in(asked, value_set=names)
    return set(asked.filter(found).to_pylist())
