"""Keys the store tests look at, asked of zeus.store.keys (never spelled out in a test)."""

from __future__ import annotations

from zeus.store import Store, keys


def hints(store: Store, job_id: str) -> list[str]:
    """Every hint of the job, all streams (the records a snapshot may not hold yet)."""
    return [key for stream in keys.STREAMS for key in store.backend.list(keys.events_dir(job_id, stream))]
