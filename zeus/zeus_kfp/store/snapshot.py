"""Snapshots: slots 1..upto of a job's log as one Parquet table, so a read need not fetch every slot.

Their metadata and the reader's checks are docs/STORE.md, "Snapshots". Why no lease: a snapshot caches decided
slots, which never change, so any snapshot of this job is right whoever wrote it. Why the checks: "of this job"
must be checked, not assumed: another job's snapshot copied in, or one a compaction uploaded after its job was
deleted and made again, would otherwise be read as this job's history. One that fails is reported, and the
log, which is never deleted, is read instead. Why the incarnation is taken before the log is read, not when
the snapshot is written: a job deleted and made again between the two would have the old job's rows stamped
as the new job's, and trusted by its readers.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes
from zeus_kfp.store import entries, fields, keys, strays
from zeus_kfp.store.backend import Backend, ObjectNotFound
from zeus_kfp.store.errors import CorruptObjectError, ObjectProblem

RELISTS = 3  # a snapshot deleted between the listing and the fetch (compaction reclaiming it): list again
JOB, INCARNATION, UPTO, FORMAT = b"zeus_kfp.job_id", b"zeus_kfp.incarnation", b"zeus_kfp.upto", b"zeus_kfp.format"


def listed(backend: Backend, job_id: str) -> list[tuple[int, str]]:
    """(upto, key) of the job's snapshots, the most slots first."""
    found = []
    for key in backend.list(keys.snapshots_dir(job_id)):
        parsed = keys.parse_snapshot_key(key)
        if parsed is not None:
            found.append((parsed[0], key))
    return sorted(found, reverse=True)


def read_snapshot(
    backend: Backend, job_id: str, problems: list[ObjectProblem], made: str | None
) -> tuple[int, pa.Table] | None:
    """(upto, rows) of the newest readable snapshot of this job (`made`: its incarnation as the read began), or
    None: then the log is read from slot 1."""
    found = listed(backend, job_id)
    for _ in range(RELISTS):
        gone = False
        for upto, key in found:
            try:
                return upto, decode(key, backend.get(key), job_id, made)
            except ObjectNotFound:
                gone = True
                break
            except CorruptObjectError as exc:
                problems.append(ObjectProblem(exc.key, f"{exc.reason}; read from the log instead"))
        if not gone:
            return None
        found = listed(backend, job_id)
    return None


def decode(key: str, data: bytes, job_id: str, made: str | None) -> pa.Table:
    """The snapshot's rows, if it is this job's (`made`: its incarnation) and holds every slot its key names;
    CorruptObjectError naming the key and what failed else."""
    parsed = keys.parse_snapshot_key(key)
    assert parsed is not None
    upto = parsed[0]
    keys.verified(key, data, parsed[1])
    try:
        arrow = read_parquet_bytes(data)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptObjectError(key, f"not Parquet ({str(exc)[:80]})") from None
    meta = arrow.schema.metadata or {}
    if JOB not in meta:
        raise CorruptObjectError(key, "names no job (written by an older zeus-kfp)")
    if not meta.get(FORMAT, b"").isdigit() or int(meta[FORMAT]) > fields.FORMAT:
        raise CorruptObjectError(
            key, f"is of store format {_said(meta.get(FORMAT, b'?'))}, not one this zeus-kfp reads"
        )
    if meta[JOB] != job_id.encode():
        raise CorruptObjectError(key, f"belongs to job '{_said(meta[JOB])}', not {job_id!r}")
    if made is None:
        raise CorruptObjectError(key, "cannot be told this job's: no spec of it is listed (see the spec's problem)")
    if meta.get(INCARNATION) != made.encode():
        raise CorruptObjectError(key, "belongs to an earlier job of this id (deleted and made again)")
    if meta.get(UPTO) != str(upto).encode():
        raise CorruptObjectError(key, f"says it covers slots 1..{_said(meta.get(UPTO, b'?'))}, its key 1..{upto}")
    table = entries.checked_table(key, arrow.replace_schema_metadata(None))
    slots = pc.unique(table.column("slot"))
    if len(slots) != upto or (upto and (pc.min(slots).as_py() != 1 or pc.max(slots).as_py() != upto)):
        raise CorruptObjectError(key, f"holds {len(slots)} of the {upto} slots its key names")
    return table


def _said(value: bytes) -> str:
    """A metadata value as a message shows it: bytes that are not UTF-8 shown escaped, never a decoding error."""
    return value.decode("utf-8", "backslashreplace")[:80]


def encode(table: pa.Table, job_id: str, upto: int, made: str) -> bytes:
    meta = {
        JOB: job_id.encode(),
        INCARNATION: made.encode(),
        UPTO: str(upto).encode(),
        FORMAT: str(fields.FORMAT).encode(),
    }
    return parquet_bytes(table.replace_schema_metadata(meta), compression="zstd")


def write(backend: Backend, job_id: str, upto: int, table: pa.Table, made: str | None) -> str | None:
    """Write slots 1..upto (read from the job's incarnation `made`) as a snapshot naming it; None (nothing
    written, or what was written removed) while no spec is listed, or once the job listed is another making
    of it than the one read."""
    if made is None or strays.incarnation(backend, job_id) != made:
        return None
    data = encode(table, job_id, upto, made)
    key = keys.snapshot_key(job_id, upto, keys.crc(data))
    backend.put(key, data)
    return None if strays.undone_if_changed(backend, job_id, made, [key]) else key
