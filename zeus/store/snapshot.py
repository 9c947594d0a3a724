"""Snapshots: slots 1..upto of a job's log as one Parquet table, so a read need not fetch every slot.

Their metadata and the reader's checks are docs/STORE.md, "Snapshots". Why no lease: a snapshot caches decided
slots, which never change, so any snapshot of this job is right whoever wrote it. Why the checks: "of this job"
must be checked, not assumed: another job's snapshot copied in, or one a compaction uploaded after its job was
deleted and made again, would otherwise be read as this job's history. One that fails is reported, and the
log, which is never deleted, is read instead.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from zeus_kfp.store import consensus, entries, fields, keys
from zeus_kfp.store.backend import Backend, ObjectNotFound
from zeus_kfp.store.errors import CorruptObjectError, ObjectProblem
from zeus_kfp.store.parquet_bytes import parquet_bytes, read_parquet_bytes

RELISTS = 3  # a snapshot deleted between the listing and the fetch (compaction reclaiming it): list again
JOB, INCARNATION, UPTO, FORMAT = b"zeus_kfp.job_id", b"zeus_kfp.incarnation", b"zeus_kfp.upto", b"zeus_kfp.format"


def incarnation(backend: Backend, job_id: str) -> str | None:
    """Which making of the job this is: the checksum of its agreed spec record (it holds created_at, so a job
    deleted and made again under the same id has another). None while no spec value is listed."""
    register = consensus.parse(keys.spec_dir(job_id), backend.list(keys.spec_dir(job_id)))
    return consensus.value_checksum(register.values[0]) if register.values else None


def listed(backend: Backend, job_id: str) -> list[tuple[int, str]]:
    """(upto, key) of the job's snapshots, the most slots first."""
    found = []
    for key in backend.list(keys.snapshots_dir(job_id)):
        parsed = keys.parse_snapshot_key(key)
        if parsed is not None:
            found.append((parsed[0], key))
    return sorted(found, reverse=True)


def read_snapshot(backend: Backend, job_id: str, problems: list[ObjectProblem]) -> tuple[int, pa.Table] | None:
    """(upto, rows) of the newest readable snapshot of this job, or None: then the log is read from slot 1."""
    found = listed(backend, job_id)
    made = incarnation(backend, job_id) if found else None
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
            key, f"is of store format {meta.get(FORMAT, b'?').decode()}, not one this zeus-kfp reads"
        )
    if meta[JOB].decode() != job_id:
        raise CorruptObjectError(key, f"is job {meta[JOB].decode()!r}'s, not {job_id!r}'s")
    if made is None or meta.get(INCARNATION, b"").decode() != made:
        raise CorruptObjectError(key, "belongs to an earlier job of this id (deleted and made again)")
    if meta.get(UPTO, b"").decode() != str(upto):
        raise CorruptObjectError(key, f"says it covers slots 1..{meta.get(UPTO, b'?').decode()}, its key 1..{upto}")
    table = entries.checked_table(key, arrow.replace_schema_metadata(None))
    slots = pc.unique(table.column("slot"))
    if len(slots) != upto or (upto and (pc.min(slots).as_py() != 1 or pc.max(slots).as_py() != upto)):
        raise CorruptObjectError(key, f"holds {len(slots)} of the {upto} slots its key names")
    return table


def encode(table: pa.Table, job_id: str, upto: int, made: str) -> bytes:
    meta = {
        JOB: job_id.encode(),
        INCARNATION: made.encode(),
        UPTO: str(upto).encode(),
        FORMAT: str(fields.FORMAT).encode(),
    }
    return parquet_bytes(table.replace_schema_metadata(meta), compression="zstd")


def write(backend: Backend, job_id: str, upto: int, table: pa.Table) -> str | None:
    """Write slots 1..upto as a snapshot naming this job; None (nothing written) while its spec is not listed."""
    made = incarnation(backend, job_id)
    if made is None:
        return None
    data = encode(table, job_id, upto, made)
    key = keys.snapshot_key(job_id, upto, keys.crc(data))
    backend.put(key, data)
    return key
