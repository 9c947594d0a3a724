"""A job's log: numbered slots, one agreed entry each (consensus.py), read as a snapshot plus the rest.

Appending, reading, holes and the prefix property are docs/STORE.md, "The log". Why one log: the slot order is
the order of events, so every number (a recurrence's, a trial's) follows from one agreement, "what is in slot
n", and nothing must be atomic on the server. Why reads are all or nothing per slot: a Store used again after
an error must not have passed slots without their rows, so the position moves only once the rows it passed are
built. Why a read lists the spec first: a prefix is a fact only of the job it was read from, so a kept prefix
of a job deleted and made again since is dropped, and what a read wrote into a job deleted under it (a hole it
closed) is undone (strays.py).
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from zeus_kfp.store import consensus, entries, keys, snapshot, strays
from zeus_kfp.store.backend import Backend, ObjectNotFound, get_many
from zeus_kfp.store.errors import CorruptObjectError, JobDeletedError, ObjectProblem, StoreAccessError, StoreError

HOLE_WAITS_S = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16)  # a live proposer decides in ms; then the reader closes it
NOOP = entries.encode({"kind": "noop"})
MAX_SLOTS_TRIED = 10_000


@dataclass
class LogRead:
    """Slots 1..upto of a job's log, as row tables, with what the read had to skip or repair."""

    job_id: str
    upto: int = 0
    tables: list[pa.Table] = field(default_factory=list)
    by_slot: dict[int, dict[str, Any]] = field(default_factory=dict)  # the entries read after the snapshot
    snapshot_upto: int = 0
    seen: int = 0  # the highest slot the last listing showed anything in (appends in flight included)
    mine: dict[int, dict[str, Any]] = field(default_factory=dict)  # entries this process got decided, by slot
    problems: list[ObjectProblem] = field(default_factory=list)
    made: str | None = None  # the job's incarnation (strays.incarnation) when the read began

    def table(self) -> pa.Table:
        """All rows read, as one table in one chunk (Arrow's kernels pay per chunk, and a Store's reads
        add a chunk each)."""
        if not self.tables:
            return entries.table([])
        if len(self.tables) > 1:
            self.tables = [pa.concat_tables(self.tables).combine_chunks()]
        return self.tables[0]


def read(backend: Backend, job_id: str, base: LogRead | None = None, until: int | None = None) -> LogRead:
    """The log's decided prefix (from `base` on, if given: what was read before never changes), up to
    slot `until` at most. JobDeletedError if the job was deleted (or deleted and made again) while it was read."""
    made = strays.incarnation(backend, job_id)
    from_snapshot = False
    if base is not None and base.made == made:
        base.problems = []  # what this read finds: the prefix's own problems were reported when it was read
    else:
        # Said only where the Store had read a making: a read before the job was made (none listed) is no news
        dropped, base = base is not None and base.made is not None, LogRead(job_id, made=made)
        if dropped:
            base.problems.append(ObjectProblem(keys.spec_dir(job_id), DROPPED))
        found = snapshot.read_snapshot(backend, job_id, base.problems, made)
        if found is not None:
            base.snapshot_upto, table = found
            base.upto = base.snapshot_upto
            base.tables.append(table)
            from_snapshot = True
    listed = backend.list(keys.log_dir(job_id), start_after=keys.after_slot(job_id, base.upto))
    by_slot: dict[int, list[str]] = {}
    for key in listed:
        slot = keys.slot_of(key)
        if slot is not None and slot > base.upto and (until is None or slot <= until):
            by_slot.setdefault(slot, []).append(key)
    registers = {slot: consensus.parse(keys.slot_dir(job_id, slot), found) for slot, found in by_slot.items()}
    base.seen = max([base.seen, base.upto, *by_slot])
    decided = [slot for slot, register in registers.items() if register.values or slot in base.mine]
    last = max(decided, default=base.upto)
    values = get_many(
        backend,
        [
            registers[s].values[0]
            for s in range(base.upto + 1, last + 1)
            if s in registers and registers[s].values and s not in base.mine
        ],
    )
    # What this read writes (holes it closes, copies it puts back), and whether it may: not into a job with no
    # spec listed, whose log it cannot tell apart from one deleted and made again meanwhile (strays.py).
    writer = strays.Recording(backend, may_write=made is not None)
    passed: list[tuple[int, dict[str, Any]]] = []
    try:
        for slot in range(base.upto + 1, last + 1):
            entry = base.mine.get(slot) or _entry(writer, job_id, slot, registers.get(slot), values, base.problems)
            if entry is None:
                break  # a hole this reader may not close: the prefix ends before it
            passed.append((slot, entry))
    except StoreError:  # cut short after writing: what it wrote into a job deleted meanwhile is still undone
        if writer.written:
            with contextlib.suppress(StoreError):
                strays.undone_if_changed(backend, job_id, made, writer.written)
        raise
    finally:
        # All or nothing per slot: the prefix's position and its rows move together, even when a later slot
        # raised (the store unavailable while closing a hole): a Store used again after the error must not
        # have skipped the rows of the slots it passed (a trial would be shown dispatched for ever).
        _advance(base, passed)
    # A read that took anything from the job ends by listing its spec again: the same making throughout means
    # every slot read was that job's (a new one is made only once the old spec is gone, which the delete
    # removes last), so a read never mixes two jobs of one id; and what it wrote into a deleted one is undone.
    if (passed or writer.written or from_snapshot) and strays.undone_if_changed(backend, job_id, made, writer.written):
        raise JobDeletedError(job_id, backend.location)
    _check_snapshot(backend, base, {e["snapshot"]: e["upto"] for _slot, e in passed if e["kind"] == "snapshot"})
    return base


UNSETTLED = (
    "It is the highest proposal accepted in a slot with no decided value, so no reader may close the slot (the "
    "entry it holds may have been decided) and every read of the job stops here: restore the object's bytes (its "
    "key names their checksum), or see docs/STORE.md, rule R11"
)
NO_SPEC = "an entry in progress this reader may not close: the job's spec is not listed (deleted? being made?)"
DROPPED = "the job was deleted and made again since this Store read it: its earlier read is dropped, read anew"


def _advance(read: LogRead, passed: list[tuple[int, dict[str, Any]]]) -> None:
    """Move the read's position past the slots `passed`, with their rows: the rows are built first, so an error
    building them moves nothing (every entry passed the field table, which lets through nothing Arrow refuses)."""
    if not passed:
        return
    read.tables.append(entries.table([row for slot, entry in passed for row in entries.rows(slot, entry)]))
    for slot, entry in passed:
        read.by_slot[slot] = entry
        read.mine.pop(slot, None)
    read.upto = passed[-1][0]


def _entry(
    backend: strays.Recording,
    job_id: str,
    slot: int,
    register: consensus.Register | None,
    values: dict[str, bytes | CorruptObjectError | None],
    problems: list[ObjectProblem],
) -> dict[str, Any] | None:
    """The slot's entry: its decided value, else (a hole) what closing it decides."""
    directory = keys.slot_dir(job_id, slot)
    if register is not None and register.values:
        key = register.values[0]
        data = values.get(key)
        if isinstance(data, bytes):
            try:
                return entries.decode(key, consensus.checked(key, data))
            except CorruptObjectError as exc:
                problems.append(ObjectProblem(exc.key, exc.reason))
                return _recovered(backend, directory, register, problems)
        if isinstance(data, CorruptObjectError):
            problems.append(ObjectProblem(data.key, data.reason))
            return _recovered(backend, directory, register, problems)
        if data is None:  # listed, then gone when fetched: the phase-2 block holding the same bytes is its copy
            return _recovered(backend, directory, register, problems)
    if register is None:
        # The listing showed nothing here but decided slots after it. A listing is no point-in-time snapshot: a
        # proposer's first PUT may have landed after the listing passed this slot. Look again before saying so.
        register = consensus.parse(directory, backend.list(directory))
        if register.values:
            return _decided_entry(backend, directory, register, problems)
        if not register.blocks:  # still nothing: an appender takes a slot only after the last it listed
            problems.append(
                ObjectProblem(directory, "a slot with no objects before decided ones (deleted?): closed as noop")
            )
            return _close(backend, directory, problems, waits=())
    return _close(backend, directory, problems)


def _recovered(
    backend: strays.Recording, directory: str, register: consensus.Register, problems: list[ObjectProblem]
) -> dict[str, Any] | None:
    """A decided value gone or damaged, read from its other copy (consensus.copy_of_value) and put back under
    its agreed name; a slot with no readable copy, or whose entry fails the field table, is reported and
    skipped (a noop in this reader's view: nothing is written over it)."""
    data = consensus.copy_of_value(backend, register)
    if data is not None:
        try:
            entry = entries.decode(register.values[0], data)
        except CorruptObjectError as exc:
            if not any(p.key == exc.key for p in problems):
                problems.append(ObjectProblem(exc.key, exc.reason))
        else:
            if backend.may_write:
                with contextlib.suppress(StoreAccessError):  # the agreed bytes, back under their agreed name
                    backend.put(register.values[0], data)
            return entry
    problems.append(ObjectProblem(directory, "its entry is unreadable and no valid copy of it is: skipped"))
    return {"kind": "noop"}


def _close(
    backend: strays.Recording,
    directory: str,
    problems: list[ObjectProblem],
    waits: tuple[float, ...] = HOLE_WAITS_S,
) -> dict[str, Any] | None:
    """A hole's entry: the one its proposer gets decided while we wait, else noop (or the accepted entry)."""
    for pause in waits:
        time.sleep(pause)
        register = consensus.parse(directory, backend.list(directory))
        if register.values:
            return _decided_entry(backend, directory, register, problems)
    if not backend.may_write:  # no spec listed: a job being deleted or made, or whose spec is lost
        problems.append(ObjectProblem(directory, NO_SPEC))
        return None
    try:
        data = consensus.propose(backend, directory, NOOP)
    except StoreAccessError as exc:  # a reader that may not write ends its prefix here
        problems.append(ObjectProblem(directory, f"an entry in progress this reader may not close ({exc.code})"))
        return None
    except CorruptObjectError as exc:  # the highest accepted proposal is unreadable: its value may be decided
        raise CorruptObjectError(exc.key, f"{exc.reason}. {UNSETTLED}") from None
    assert data is not None
    try:
        return entries.decode(consensus.value_key(directory, data), data)
    except CorruptObjectError as exc:  # a bad entry its proposer got decided: reported, skipped
        problems.append(ObjectProblem(exc.key, exc.reason))
        return {"kind": "noop"}


def _decided_entry(
    backend: strays.Recording, directory: str, register: consensus.Register, problems: list[ObjectProblem]
) -> dict[str, Any] | None:
    try:
        return entries.decode(register.values[0], consensus.decided(backend, register.values[0]))
    except (CorruptObjectError, ObjectNotFound) as exc:
        if isinstance(exc, CorruptObjectError):
            problems.append(ObjectProblem(exc.key, exc.reason))
        return _recovered(backend, directory, register, problems)


def _check_snapshot(backend: Backend, read: LogRead, named: dict[str, int]) -> None:
    """The newest snapshot the log names, if it covers more than the one read, should be there: report it
    if it is gone (older ones are deleted as they are superseded)."""
    if not named:
        return
    newest = max(named, key=lambda name: named[name])
    if named[newest] <= read.snapshot_upto:
        return
    if not any(upto >= named[newest] for upto, _key in snapshot.listed(backend, read.job_id)):  # else superseded
        where = keys.snapshots_dir(read.job_id) + newest
        read.problems.append(ObjectProblem(where, "a snapshot the log names is gone: its slots were read instead"))


def append(backend: Backend, read: LogRead, entry: dict[str, Any]) -> int:
    """Put `entry` in the first slot after everything `read` listed that it can get; returns that slot.
    Its value may also end up in an earlier slot (a proposer that adopted it): readers take the first,
    which says the same."""
    entry = entries.checked(entry)  # nothing is agreed that a reader could not read back
    data = entries.encode(entry)
    slot = max(read.seen, read.upto) + 1  # after the read's listing: a slot taken since only makes it yield
    for tries in range(MAX_SLOTS_TRIED):
        directory = keys.slot_dir(read.job_id, slot)
        if consensus.propose(backend, directory, data, yield_to_others=True, fresh=tries == 0) == data:
            read.mine[slot] = entry
            return slot
        slot += 1
        # Those who yielded with us all want the next slot: a jittered pause spreads them out.
        time.sleep(random.uniform(0, consensus.BACKOFF_S * 2 ** min(tries, 6)))
    raise StoreError(f"could not append to the log of {read.job_id} in {backend.location}")
