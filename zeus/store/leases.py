"""Compaction leases: one compactor at a time does the work of committing a stream's next generation.

Why. Compaction is started by readers: a read that finds more loose records than the threshold
compacts (Store._maybe_compact). Concurrent clients cross the threshold together, and each one then
re-reads the whole snapshot and writes a new one, though only one of them can commit it (the mark's
exclusive create decides, snapshots.commit). With 8 clients on one job, 7 of every 8 compactions
were such wasted work, about a third of all the time spent (benchmarks/RESULTS.md).

How. Before the work, a compactor creates `compacting/{stream}/{g}` exclusively, g the generation
it means to commit, holding its clock's time. A compactor that finds the lease taken leaves the
stream be, unless the lease is older than LEASE_S (its holder died or hangs) or holds no time it
can read: then it takes it over. The holder deletes it when done, however it ended.

Why this is safe. A lease is advisory: what the store keeps still rests on the exclusive creates of
records and marks (streams.py). Two compactors that both believe they hold it (a takeover of a slow
holder, a server that ignores If-None-Match) are the case without leases: one commits and the other
is told another compactor committed first. A lease never released delays compaction of that stream
by at most LEASE_S, so reads stay exact, only slower meanwhile. Clocks of different pods only decide
when a lease counts as old; a time further than LEASE_S in the future counts as unreadable.
"""

from __future__ import annotations

import time

from zeus.store import keys
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.errors import CorruptObjectError

LEASE_S = 60.0  # far above a compaction's time (about 0.1 s locally and 1 s on S3 at 10,000 trials)


def take(backend: Backend, job_id: str, stream: str, generation: int, now: float | None = None) -> str | None:
    """The lease's key if this call now holds the lease on committing `generation`, else None."""
    key = keys.lease_key(job_id, stream, generation)
    now = time.time() if now is None else now
    body = f"{now:.3f}".encode()
    if backend.put_new(key, body):
        return key
    if not _stale(backend, key, now):
        return None
    backend.delete([key])  # a racing taker may delete ours in turn: then both work, as without leases
    return key if backend.put_new(key, body) else None


def _stale(backend: Backend, key: str, now: float) -> bool:
    try:
        held_since = float(backend.get(key).decode("ascii"))
    except ObjectNotFound:  # released between our create and our look: free again
        return True
    except (CorruptObjectError, UnicodeDecodeError, ValueError):  # not a lease anyone can honour
        return True
    return not now - LEASE_S <= held_since <= now + LEASE_S


def release(backend: Backend, job_id: str, stream: str, lease: str, committed: int | None) -> None:
    """Delete our lease; after a commit of generation `committed`, also the leases of earlier
    generations (left by compactors that died: nobody can commit those generations any more)."""
    done = [lease]
    if committed is not None:
        for key in backend.list(keys.leases_dir(job_id, stream)):
            number = keys.seq_number(key)
            if number is not None and number < committed:
                done.append(key)
    backend.delete(done)
