"""Event streams: how a trial's event is kept, read back in a consistent cut, and compacted
(the compactor itself is compaction.py).

A stream (dispatched, finished, profiles, bandit) keeps each trial's event in three kinds of
object (keys.py):
- the **record** `records/{stream}/{rid}.{attempt}.parquet`: the event itself, created
  exclusively, never deleted. It alone decides what the store keeps for that trial.
- the **hint** `events/{stream}/{rid}.{attempt}`: an empty object a writer creates *before* the
  record. The hints are the short list of records a snapshot may not hold yet.
- **snapshots**: the records merged so far, committed generation by generation (snapshots.py).

Why every caller of one attempt is told what the store keeps. The arbiter is the exclusive
create of the record, and a record is never deleted, so its key can never be free again: the
first create wins for good, and every later writer (a retried or duplicated step, racing or
not, before or after any compaction) is refused and reads the winner back. An earlier layout
used the event object as arbiter and compaction deleted it, so a late duplicate could create
it again and two callers were told different trials.

Why a reader never fights compaction. The only objects compaction deletes are hints and
superseded snapshots; records are never deleted. A reader
1. lists the hints, then
2. finds the newest mark and loads its snapshot, then
3. fetches the records of the listed hints the snapshot does not hold.
A record in the store was hinted before it existed, and a hint is deleted only after a
committed snapshot holds its record, and each generation holds everything the one before it
held. So a record is either listed in step 1 or (its hint deleted before step 1) held by every
snapshot committed since, the one of step 2 included: nothing is missed. Step 3 cannot fail
(records stay), and step 2's snapshot is retired only GRACE_S after a newer generation was
committed, which happened after step 2's listing; a reader slower than that starts over,
quietly, and fails with one clear error after READ_ROUNDS such rounds or READ_BUDGET_S. A hint
whose record does not exist yet is a write in progress (or abandoned): not part of the cut;
compaction collects it once ORPHAN_HINT_AGE_S old (a writer puts the two objects back to back,
and puts its hint again if it was ever paused for half that long in between).

Why a read is one consistent cut. Store.trials() reads finished, then dispatched. A finished
record is written only after its dispatched record exists (finish checks it), whose hint came
first, so every finished trial in the cut has its dispatch in the cut: no "finished without
dispatched" from a race, only from a real problem.

One merge. A cut is its base (the snapshot's rows, or on a rebuild the bulk import's) merged with
the records read on top by conflicts.merge_cut, where a record decides for its trial; compaction
commits a whole read's table as the next generation, so reading and compacting cannot merge
differently.

Cursors. A read returns a Position: the generation read, how many of its rows, and the names
of the records read on top of it. Generation g+1 is g's rows with new ones appended (a mark
says from which generation that chain is unbroken), so "the events after a position" are the
rows of the newest snapshot past that many rows, plus loose records, minus the names the
position already had: exact, and only the new rows are returned. The snapshot's names are still
needed (a listed hint may name a record it already holds: a compactor has not deleted it yet, or
a duplicated writer put it again after). When the snapshot is the position's own, unchanged (the
common case between compactions), only that is needed: if every listed hint is one of the
position's loose records, nothing is new and nothing of the snapshot is fetched; else its names
object answers (snapshots.py), or for a snapshot without one its `_event` column alone, checked by
a checksum of its own (schemas.META_NAMES_CHECKSUM). Otherwise the snapshot is fetched and checked
whole. Where the chain was broken (a lost snapshot rebuilt from records) the read says `reset` and
returns every row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc

from zeus.store import keys, snapshots
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.conflicts import merge_cut
from zeus.store.errors import CorruptObjectError, ObjectProblem, StoreError, StoreInputError
from zeus.store.schemas import EVENT_COLUMN, NewerSchemaError, decode, snapshot_schema

READ_ROUNDS = 4
READ_BUDGET_S = snapshots.GRACE_S / 2
ORPHAN_HINT_AGE_S = 3600.0  # a hint whose record is still missing this long after was abandoned by its writer
TRIAL_STREAMS = ("dispatched", "finished")


@dataclass(frozen=True)
class Position:
    """Where a read of one stream ended: `rows` rows of snapshot `generation`, plus `loose` records.
    `snapshot` and `checksum`: that generation's snapshot object as its mark committed it ("" for none),
    so that a later read finding the generation unchanged needs no second look at the mark."""

    generation: int = 0
    rows: int = 0
    loose: frozenset[str] = frozenset()
    snapshot: str = ""
    checksum: str = ""


@dataclass
class StreamRead:
    table: pa.Table  # snapshot schema (the stream's columns + `_event`): the cut's rows new since `after`
    generation: int  # snapshot generation read (0 = none)
    loose: int = 0  # records fetched on top of the snapshot (each one an object to fetch and decode)
    problems: list[ObjectProblem] = field(default_factory=list)
    position: Position = Position()
    reset: bool = False  # the cut does not extend `after` (a rebuilt chain): `table` holds every row
    # What compaction needs besides: the snapshot as read, the fresh rows, and the hints listed.
    snapshot: pa.Table | None = None
    fresh: pa.Table | None = None
    hints: dict[str, str] = field(default_factory=dict)  # event name -> hint key
    rebuilt: bool = False  # no usable snapshot: the whole cut was read from the records
    whole: bool = True  # `table` is the whole cut (read without a cursor): what compaction may commit


def _with_event(table: pa.Table, name: str) -> pa.Table:
    return table.append_column(EVENT_COLUMN, pa.array([name] * table.num_rows, pa.string()))


def _concat(stream: str, parts: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(parts) if parts else snapshot_schema(stream).empty_table()


def _decode_record(key: str, data: bytes, stream: str, name: str) -> pa.Table:
    """A record, checked to be about the trial its name says (a copied or misplaced object is not)."""
    table = decode(key, data, stream)
    rid, attempt = keys.parse_event_name(name) or ("", 0)
    if table.num_rows and (
        set(table.column("recurrence_id").to_pylist()) != {rid} or set(table.column("attempt").to_pylist()) != {attempt}
    ):
        raise CorruptObjectError(key, f"holds an event of another trial than {name}")
    return _with_event(table, name)


def _fetch_records(
    backend: Backend, job_id: str, stream: str, names: list[str], problems: list[ObjectProblem]
) -> tuple[list[pa.Table], list[str], list[str]]:
    """(tables, names read, names with no record yet) for the given event names."""
    record_keys = {name: keys.record_key(job_id, stream, name) for name in names}
    fetched = backend.get_many(list(record_keys.values()))
    parts, read, missing = [], [], []
    for name, key in record_keys.items():
        data = fetched.get(key)
        if data is None:
            missing.append(name)
            continue
        try:
            if isinstance(data, CorruptObjectError):
                raise data
            parts.append(_decode_record(key, data, stream, name))
            read.append(name)
        except NewerSchemaError:
            raise
        except CorruptObjectError as exc:  # left in place, reported by every read until someone removes it
            problems.append(ObjectProblem(exc.key, exc.reason))
    return parts, read, missing


def _imported(backend: Backend, job_id: str, stream: str, problems: list[ObjectProblem]) -> pa.Table | None:
    """The rows bulk import stored for the stream (kept apart from snapshots, which are caches)."""
    key = keys.import_table_key(job_id, stream)
    try:
        return decode(key, backend.get(key), stream, snapshot=True)
    except ObjectNotFound:
        return None
    except CorruptObjectError as exc:
        if isinstance(exc, NewerSchemaError):
            raise
        problems.append(ObjectProblem(exc.key, exc.reason))
        return None


def _rebuild(backend: Backend, job_id: str, stream: str, problems: list[ObjectProblem]) -> StreamRead:
    """The whole stream from its records (slow, exact): what a read falls back to without a usable snapshot."""
    names = [keys.basename(k).removesuffix(".parquet") for k in backend.list(keys.records_dir(job_id, stream))]
    parts, read, _ = _fetch_records(backend, job_id, stream, [n for n in names if keys.parse_event_name(n)], problems)
    imported = _imported(backend, job_id, stream, problems)
    table = merge_cut(imported, _concat(stream, parts))
    if imported is not None:  # the imported trials (those without a record: rule 5) and the records
        recorded = set(read)
        read = [n for n in dict.fromkeys(imported.column(EVENT_COLUMN).to_pylist()) if n not in recorded] + read
    position = Position(0, 0, frozenset(read))
    return StreamRead(table, 0, len(read), problems, position, reset=True, fresh=table, rebuilt=True)


OLD_LAYOUT = (
    "written by zeus-kfp before its store layout 2 (one event object per trial, snapshots without marks), "
    "which this version does not read; move the job aside, or re-import its trials with zeus.store.bulk"
)


def _refuse_old_layout(backend: Backend, job_id: str, stream: str, hints: list[str]) -> None:
    """A job without any mark may be one an older zeus-kfp wrote: say so rather than read it as empty."""
    old = [k for k in hints if k.endswith(".parquet") and keys.parse_event_name(keys.basename(k)[: -len(".parquet")])]
    old += [k for k in backend.list(keys.snapshots_dir(job_id, stream)) if k.count(".") == 1]
    if old:
        raise StoreError(f"job {job_id!r} in {backend.location} was {OLD_LAYOUT} (found {old[0]})")


def _read_once(backend: Backend, job_id: str, stream: str, after: Position | None) -> StreamRead | None:
    """One attempt at a consistent cut; None if the chosen snapshot was retired meanwhile (read again)."""
    problems: list[ObjectProblem] = []
    listed = backend.list(keys.events_dir(job_id, stream))  # hints first (see module doc)
    if after is not None and after.snapshot:
        unchanged = _read_past_unchanged(backend, job_id, stream, after, listed, problems)
        if unchanged is not None:
            return unchanged
    try:
        mark = snapshots.latest_mark(backend, job_id, stream)
    except CorruptObjectError as exc:
        problems.append(ObjectProblem(exc.key, f"{exc.reason}; read the records instead"))
        return _rebuild(backend, job_id, stream, problems)
    try:
        snapshot = snapshots.load(backend, stream, mark) if mark is not None else None
    except ObjectNotFound:
        assert mark is not None
        if snapshots.top_generation(backend, job_id, stream) > mark.generation:
            return None  # retired by a newer generation while we read: start over
        problems.append(ObjectProblem(mark.snapshot, f"committed as generation {mark.generation} but missing"))
        return _rebuild(backend, job_id, stream, problems)
    except NewerSchemaError:
        raise
    except CorruptObjectError as exc:
        problems.append(ObjectProblem(exc.key, f"{exc.reason}; read the records instead"))
        return _rebuild(backend, job_id, stream, problems)
    if mark is None:
        _refuse_old_layout(backend, job_id, stream, listed)
    generation = mark.generation if mark is not None else 0
    if after is not None and (generation < after.generation or (mark is not None and after.rows > mark.rows)):
        raise StoreInputError("cursor", f"generation {after.generation}", "a cursor this store returned for this job")
    reset = after is not None and mark is not None and after.generation > 0 and mark.since > after.generation
    if reset:
        after = None
    had = after.loose if after is not None else frozenset()
    hints, covered, fresh, read = _records_on_top(backend, job_id, stream, listed, snapshot, had, problems)
    new = snapshot  # the snapshot's rows the caller has not had yet (after a cursor: those past it)
    if snapshot is not None and after is not None:
        new = snapshot.slice(after.rows)
        if had:
            new = new.filter(pc.invert(pc.is_in(new.column(EVENT_COLUMN), pa.array(sorted(had), pa.string()))))
    table = merge_cut(new, fresh)
    loose = frozenset(read) | frozenset(n for n in had if n not in covered)
    rows = snapshot.num_rows if snapshot is not None else 0
    position = Position(generation, rows, loose, mark.snapshot, mark.checksum) if mark else Position(0, 0, loose)
    whole = after is None
    return StreamRead(table, generation, len(read), problems, position, reset, snapshot, fresh, hints, whole=whole)


def _records_on_top(
    backend: Backend,
    job_id: str,
    stream: str,
    listed: list[str],
    snapshot: pa.Table | pa.Array | None,
    had: frozenset[str],
    problems: list[ObjectProblem],
    *,
    had_on_top: bool = False,
) -> tuple[dict[str, str], set[str], pa.Table, list[str]]:
    """What a read finds on top of its snapshot (the table, or only its names): the listed hints (event
    name -> key; a foreign object is reported and ignored), which of them and of `had` the snapshot
    holds, and the records of the others not `had` already, fetched (and the names read). `had_on_top`:
    `had` was read on top of this very snapshot, so it holds none of them (and is not asked)."""
    hints: dict[str, str] = {}
    for key in listed:
        name = keys.basename(key)
        if keys.parse_event_name(name) is None:
            problems.append(ObjectProblem(key, "not a zeus-kfp event hint (a foreign object); ignored"))
        else:
            hints[name] = key
    covered = snapshots.held(snapshot, set(hints) - had if had_on_top else set(hints) | had)
    todo = sorted(n for n in hints if n not in covered and n not in had)
    parts, read, _ = _fetch_records(backend, job_id, stream, todo, problems)
    return hints, covered, _concat(stream, parts), read


def _read_past_unchanged(
    backend: Backend, job_id: str, stream: str, after: Position, listed: list[str], problems: list[ObjectProblem]
) -> StreamRead | None:
    """A cursor read whose snapshot is still the newest: at most the snapshot's names are needed (which
    listed hints it holds; none of its rows is new), and the new events are the records of listed hints
    that neither the snapshot nor the cursor's loose records hold. The cursor's loose records stay loose
    (a committed snapshot never changes). None when the generation moved on, or the snapshot is lost,
    damaged or has no names checksum: then read the usual way (which reports what is wrong)."""
    if snapshots.top_generation(backend, job_id, stream, at_least=after.generation) != after.generation:
        return None
    names = None  # every listed hint is one of the cursor's loose records: nothing new, no names needed
    if any(keys.basename(key) not in after.loose for key in listed):
        try:
            names = snapshots.load_names(backend, stream, after.snapshot, after.rows, after.checksum)
        except NewerSchemaError:
            raise
        except CorruptObjectError as exc:  # the usual read reports a damaged snapshot; only it sees names objects
            if exc.key != after.snapshot:
                problems.append(ObjectProblem(exc.key, f"{exc.reason}; read the snapshot instead"))
            return None
        except ObjectNotFound:
            return None
        if names is None:
            return None
    hints, _, fresh, read = _records_on_top(
        backend, job_id, stream, listed, names, after.loose, problems, had_on_top=True
    )
    position = replace(after, loose=after.loose | frozenset(read))
    return StreamRead(merge_cut(None, fresh), after.generation, len(read), problems, position, hints=hints, whole=False)


def read_stream(backend: Backend, job_id: str, stream: str, after: Position | None = None) -> StreamRead:
    """The stream's cut: the newest snapshot plus the records it does not hold (only what is new since
    `after`, if given). Retries quietly while compaction retires snapshots under it, within bounds."""
    started = time.monotonic()
    rounds = 0
    while rounds < READ_ROUNDS:
        rounds += 1
        read = _read_once(backend, job_id, stream, after)
        if read is not None:
            return read
        if time.monotonic() - started > READ_BUDGET_S:
            break
    raise StoreError(
        f"no stable read of {stream} for job {job_id!r} in {backend.location}: {rounds} times the snapshot "
        f"chosen was retired (after {snapshots.GRACE_S:.0f} s) before it could be fetched. Is the store very slow?"
    )
