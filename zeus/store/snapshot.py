"""Snapshots: slots 1..upto of a job's log as one Parquet table, so a read need not fetch every slot.

A snapshot is a cache of decided slots, which never change, so any snapshot is right for the
slots it covers, whoever wrote it and whenever: two compactors at once write two correct
snapshots, and no lease, mark or generation is needed. Readers take the one covering the most
slots; one that is damaged (its bytes do not hash to the checksum its key names) or unreadable is
reported by key and the next is tried, down to reading the log itself, which is never deleted.
"""

from __future__ import annotations

import pyarrow as pa

from zeus_kfp.store import entries, keys
from zeus_kfp.store.backend import Backend, ObjectNotFound
from zeus_kfp.store.errors import CorruptObjectError, ObjectProblem
from zeus_kfp.store.parquet_bytes import parquet_bytes, read_parquet_bytes

RELISTS = 3  # a snapshot deleted between the listing and the fetch (compaction reclaiming it): list again


def listed(backend: Backend, job_id: str) -> list[tuple[int, str]]:
    """(upto, key) of the job's snapshots, the most slots first."""
    found = []
    for key in backend.list(keys.snapshots_dir(job_id)):
        parsed = keys.parse_snapshot_key(key)
        if parsed is not None:
            found.append((parsed[0], key))
    return sorted(found, reverse=True)


def read_snapshot(backend: Backend, job_id: str, problems: list[ObjectProblem]) -> tuple[int, pa.Table] | None:
    """(upto, rows) of the newest readable snapshot, or None: then the log is read from slot 1."""
    for _ in range(RELISTS):
        gone = False
        for upto, key in listed(backend, job_id):
            try:
                return upto, decode(key, backend.get(key))
            except ObjectNotFound:
                gone = True
                break
            except CorruptObjectError as exc:
                problems.append(ObjectProblem(exc.key, f"{exc.reason}; read from the log instead"))
        if not gone:
            return None
    return None


def decode(key: str, data: bytes) -> pa.Table:
    parsed = keys.parse_snapshot_key(key)
    assert parsed is not None
    keys.verified(key, data, parsed[1])
    try:
        arrow = read_parquet_bytes(data)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptObjectError(key, f"not Parquet ({str(exc)[:80]})") from None
    table = entries.checked_table(key, arrow)
    if table.num_rows and table.column("slot")[-1].as_py() > parsed[0]:
        raise CorruptObjectError(key, f"holds slots past the {parsed[0]} its key names")
    return table


def encode(table: pa.Table) -> bytes:
    return parquet_bytes(table, compression="zstd")


def write(backend: Backend, job_id: str, upto: int, table: pa.Table) -> str:
    data = encode(table)
    key = keys.snapshot_key(job_id, upto, keys.crc(data))
    backend.put(key, data)
    return key
