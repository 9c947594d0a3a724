"""One consistent cut of a job's trial events, with a cursor to read only what came after it.

`read_trial_events(backend, job_id)` reads the finished stream, then the dispatched stream
(streams.py says why that order makes the cut consistent: every finished trial in it has its
dispatch in it). It returns both as Arrow tables and a cursor: an opaque, URL-safe string.
`read_trial_events(backend, job_id, after=cursor)` returns only the events that are in the
new cut and were not in the cursor's, and a new cursor; its cut contains the old one, so
cursors only move forward. When the store cannot extend the old cut exactly (a lost snapshot
was rebuilt from the records since), `reset` is True and the tables hold the whole cut:
replace what was built from the old one instead of adding to it.

Meant for an incremental fold over trial events (bandit state kept as a snapshot that names
the last cursor it covers): state(cut') = fold(state(cut), events after cut).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import pyarrow as pa

from zeus.store import keys
from zeus.store.backend import Backend
from zeus.store.errors import ObjectProblem, StoreInputError
from zeus.store.streams import Position, StreamRead, read_stream

CURSOR_VERSION = 2  # 2: each position names its snapshot object and checksum
READ_VERSIONS = (1, 2)  # a version-1 cursor (kept in an older kept fold) reads the usual way
CUT_STREAMS = ("finished", "dispatched")  # read in this order (see the module doc)
CURSOR_ALLOWED = "a cursor returned by Store.trial_events for this job, or None to read everything"


@dataclass
class TrialEvents:
    """The dispatched and finished events of one cut (only those after `after`, if given).

    Each table has the stream's stored columns plus `_event`, the trial's name
    `{recurrence_id}.{attempt:04d}` (unique within a stream)."""

    dispatched: pa.Table
    finished: pa.Table
    cursor: str
    reset: bool = False
    problems: list[ObjectProblem] = field(default_factory=list)
    reads: dict[str, StreamRead] = field(default_factory=dict, repr=False)


def encode_cursor(job_id: str, positions: dict[str, Position]) -> str:
    body = {"v": CURSOR_VERSION, "job": job_id} | {
        stream: [p.generation, p.rows, sorted(p.loose), p.snapshot, p.checksum] for stream, p in positions.items()
    }
    return base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()


def decode_cursor(job_id: str, cursor: str) -> dict[str, Position]:
    try:
        body = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if body["v"] not in READ_VERSIONS or body["job"] != job_id:
            raise ValueError("another version or job")
        positions = {}
        for stream in CUT_STREAMS:
            generation, rows, loose, *known = body[stream]
            snapshot, checksum = known if body["v"] >= 2 else ("", "")
            if not all(isinstance(n, int) and n >= 0 for n in (generation, rows)):
                raise ValueError("negative position")
            if not all(isinstance(name, str) and keys.parse_event_name(name) for name in loose):
                raise ValueError("bad event name")
            if not (isinstance(snapshot, str) and isinstance(checksum, str)):
                raise ValueError("bad snapshot")
            if snapshot and not snapshot.startswith(keys.snapshots_dir(job_id, stream)):
                raise ValueError("a snapshot of another job or stream")
            positions[stream] = Position(generation, rows, frozenset(loose), snapshot, checksum)
        return positions
    except Exception:
        shown = cursor if isinstance(cursor, str) and len(cursor) <= 40 else f"{str(cursor)[:40]}..."
        raise StoreInputError("cursor", shown, CURSOR_ALLOWED) from None


def read_trial_events(backend: Backend, job_id: str, after: str | None = None) -> TrialEvents:
    positions = decode_cursor(job_id, after) if after is not None else {}
    reads = {stream: read_stream(backend, job_id, stream, positions.get(stream)) for stream in CUT_STREAMS}
    reset = any(read.reset for read in reads.values())
    if reset and after is not None:  # one stream's chain broke: hand out the whole cut of both
        reads = {stream: read_stream(backend, job_id, stream) for stream in CUT_STREAMS}
    cursor = encode_cursor(job_id, {stream: read.position for stream, read in reads.items()})
    problems = [problem for read in reads.values() for problem in read.problems]
    return TrialEvents(
        reads["dispatched"].table, reads["finished"].table, cursor, reset and after is not None, problems, reads
    )
