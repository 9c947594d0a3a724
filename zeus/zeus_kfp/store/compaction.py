"""Compaction: write the job's decided log prefix as one snapshot, and reclaim what it supersedes.

What it writes and deletes is docs/STORE.md, "Snapshots". Why only the report step and `zeus-kfp compact`
run it: readers never compact (a stampede of compacting readers was the old design's problem). Why no
lease: a snapshot is a cache of slots that never change, so two compactors at once both write a correct
one. Where the server refuses deletes (a Kubeflow 1.11 namespace key) nothing is wrong: superseded
snapshots stay, and the store says so once per process. Why the job's incarnation is checked around each write:
a job deleted (and made again) during a compaction must get neither the old job's rows as its snapshot nor a
stray object that keeps its id from being made again (strays.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from zeus_kfp.store import entries, keys, log, snapshot, strays
from zeus_kfp.store.backend import Backend, LocalBackend, ObjectNotFound
from zeus_kfp.store.errors import DeleteRefusedError, JobDeletedError, ObjectProblem

logger = logging.getLogger(__name__)
QUIET_KINDS = ("snapshot", "noop")  # entries that change nothing a reader settles
_said_refused: set[str] = set()  # locations whose refusal to delete was already said


@dataclass
class CompactResult:
    job_id: str
    upto: int  # slots the read covered
    written: str | None = None  # the snapshot this call wrote (None: the newest already covered the log)
    deleted: int = 0  # superseded snapshots (and stale temp files) removed
    delete_refused: bool = False
    problems: list[ObjectProblem] = field(default_factory=list)


def compact(backend: Backend, job_id: str) -> CompactResult:
    read = log.read(backend, job_id)
    result = CompactResult(job_id, read.upto, problems=read.problems)
    news = [e for slot, e in read.by_slot.items() if slot > read.snapshot_upto and e["kind"] not in QUIET_KINDS]
    if news:  # (a compaction's own `snapshot` entry is no reason for the next one)
        result.written = snapshot.write(backend, job_id, read.upto, read.table(), read.made)
    if result.written:
        named = {"kind": "snapshot", "snapshot": keys.basename(result.written), "upto": read.upto}
        writer = strays.Recording(backend)
        try:
            log.append(writer, read, named | {"at": entries.now_us()})
        finally:  # (told an error after writing too: what it wrote into a job deleted meanwhile is undone)
            gone = strays.undone_if_changed(backend, job_id, read.made, [*writer.written, result.written])
        if gone:
            raise JobDeletedError(job_id, backend.location)
    elif strays.incarnation(backend, job_id) != read.made:
        return result  # the snapshots listed now are another making's: none is superseded by what was read
    newest = read.upto if result.written else read.snapshot_upto
    for upto, key in snapshot.listed(backend, job_id):
        if upto >= newest:
            continue
        try:
            backend.delete(key)
            result.deleted += 1
        except ObjectNotFound:
            continue
        except DeleteRefusedError as exc:
            result.delete_refused = True
            if backend.location not in _said_refused:
                _said_refused.add(backend.location)
                logger.warning("zeus-kfp store: %s", exc)
            break
    if isinstance(backend, LocalBackend):
        result.deleted += backend.collect_temp()
    return result
