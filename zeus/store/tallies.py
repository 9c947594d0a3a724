"""The policy's kept fold of a job's history (zeus.policy.fold), stored as a cache beside the events.

Why a cache and not a record: everything in it is derived from the trial events, so losing it, or
finding it corrupt, written by another version or under another spec, costs one full read of the
history and changes no decision. That is why it needs none of the events' protocol: it is written
with an exclusive create under a new name (`keys.tally_key`: how many trials it covers, a random
token), the newest name is the one read, and a writer deletes the others it saw but one. Two writers
racing both write exact folds of their own cuts; a reader takes either.

The object is framed (framing.py: a header line `zeus-kfp tally <crc32> <length>`). Its body is
one line of JSON (the tally version, the job, the store cursor the fold covers, cuts.read_trial_events,
the fold's other values, and the name, type and length of each array), then the arrays' bytes,
little-endian, back to back. Not schemas.encode_json, which the store's other small records use:
that checksum is over a canonical re-serialization of the record, and a fold (its recurrence tables,
hundreds of kB at 10,000 trials) is read by every step, so checking its exact bytes instead saves
serializing it again on each read; its arrays go as bytes, not base64 in JSON, for the same reason
(benchmarks/RESULTS.md). An object in an older form (JSON without arrays after it) is read as a
cache miss (the next step keeps a new one), never reported as damaged.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zeus.store import framing, keys
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.errors import CorruptObjectError, ObjectProblem


@dataclass(frozen=True)
class StoredTally:
    """A kept fold as read back: its key, the cursor it covers, its version, the fold's values and arrays."""

    key: str
    cursor: str
    version: int
    fold: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def _covers(key: str) -> int | None:
    parts = keys.basename(key).split(".")
    return int(parts[0]) if len(parts) == 3 and parts[2] == "json" and parts[0].isdigit() else None


KIND = b"tally"
ARRAY_KINDS = frozenset({"<i8", "<f8", "|b1"})  # the array types a kept fold holds


def encode_tally(record: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """`record` (JSON-able, without an "arrays" key) and `arrays`, framed (see the module doc)."""
    parts, layout = [], []
    for name, values in arrays.items():
        kind = values.dtype.newbyteorder("<") if values.dtype.byteorder not in "|" else values.dtype
        if kind.str not in ARRAY_KINDS:
            raise ValueError(f"array {name!r} of type {kind.str}: a kept fold holds {sorted(ARRAY_KINDS)}")
        parts.append(np.ascontiguousarray(values, dtype=kind).tobytes())
        layout.append([name, kind.str, int(values.size)])
    return framing.frame_headed(KIND, record | {"arrays": layout}, b"".join(parts))


def decode_tally(key: str, data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The record and arrays `encode_tally` wrote; None for an object in an older form (a cache miss);
    CorruptObjectError naming the key for anything else."""
    if data.startswith(b'{"record"'):  # written by zeus-kfp before its own header (schemas.encode_json)
        return None
    try:
        record, body = framing.unframe_headed(KIND, data)
        if not isinstance(record, dict):
            raise ValueError("not a record")
        if body is None:  # the form before arrays went as bytes (base64 in the JSON)
            return None
        arrays, at = {}, 0
        for name, kind, size in record.pop("arrays"):
            if kind not in ARRAY_KINDS or not isinstance(size, int) or size < 0:
                raise ValueError(f"array {name!r}: not a stored array type or length")
            end = at + np.dtype(kind).itemsize * size
            if end > len(body):
                raise ValueError("arrays longer than the object")
            arrays[str(name)] = np.frombuffer(body, dtype=kind, count=size, offset=at).copy()
            at = end
        if at != len(body):
            raise ValueError("bytes after the arrays")
        return record, arrays
    except (ValueError, TypeError, KeyError) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CorruptObjectError(key, f"not a readable kept fold ({str(exc)[:80]})") from None


LISTINGS = 3  # a reader lists the kept folds again if every one listed was deleted before it fetched it


def read_tally(backend: Backend, job_id: str, problems: list[ObjectProblem]) -> StoredTally | None:
    """The newest kept fold of the job, or None (none stored, or corrupt: reported). One that a writer
    deleted between our listing and our fetch (write_tally) gives way to the next one down, which that
    writer keeps; if every one listed is gone, they are listed again (a few times). With overlapping
    recurrences this happens every few cycles, and a miss costs the reader a fold of the whole history
    (about 0.1 s at 10,000 trials)."""
    for _ in range(LISTINGS):
        found = [key for key in backend.list(keys.tally_dir(job_id)) if _covers(key) is not None]
        if not found:
            return None
        for key in sorted(found, key=lambda k: (_covers(k), k), reverse=True):
            try:
                decoded = decode_tally(key, backend.get(key))
            except ObjectNotFound:
                continue
            except CorruptObjectError as exc:
                problems.append(ObjectProblem(key, exc.reason))
                return None
            if decoded is None:
                return None
            record, arrays = decoded
            try:
                return StoredTally(key, str(record["cursor"]), int(record["version"]), dict(record["fold"]), arrays)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(ObjectProblem(key, f"not a kept fold ({type(exc).__name__}: {str(exc)[:80]})"))
                return None
    return None


def write_tally(
    backend: Backend,
    job_id: str,
    covers: int,
    cursor: str,
    version: int,
    fold: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> str:
    """Store a kept fold over `covers` trials at `cursor`, then delete every other one but the newest
    below it (a reader that listed a moment ago may be fetching it). Returns its key. `fold`: JSON-able
    values; `arrays`: numpy arrays of the types in ARRAY_KINDS, kept as their bytes.

    Those above it are deleted too: a racing writer's (exact, merely newer: the next reader folds a few
    more events) or garbage named like a newest one, which would otherwise shadow every later fold."""
    key = keys.tally_key(job_id, covers, uuid.uuid4().hex[:12])
    backend.put_cache(key, encode_tally({"version": version, "job": job_id, "cursor": cursor, "fold": fold}, arrays))
    found = sorted((_covers(k), k) for k in backend.list(keys.tally_dir(job_id)) if _covers(k) is not None)
    below = [k for n, k in found if (n, k) < (covers, key)][-1:]
    backend.delete([k for _, k in found if k != key and k not in below])
    return key
