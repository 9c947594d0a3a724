"""Which making of a job this is, and what a reader or compactor wrote into a job deleted under it: undone.

A job's incarnation is the checksum of its agreed spec record (docs/STORE.md, "Snapshots"): the record holds
`created_at`, so a job deleted and made again under the same id has another. Why undo: a reader closes holes
and a compactor writes a snapshot and appends its entry, each into the job it read. If the job is deleted
meanwhile, what it wrote after the delete listed the job would be left behind, and a log without its spec
refuses the id for good (catalog.py: a new spec over an old history is never guessed). The delete lists the
job again once its spec is gone (store.py), so a write that landed before that is removed by the delete; one
after it is its writer's to undo, found by listing the spec after writing ("Deleting a job").
"""

from __future__ import annotations

from zeus_kfp.store import consensus, keys
from zeus_kfp.store.backend import Backend, LocalBackend


def incarnation(backend: Backend, job_id: str) -> str | None:
    """Which making of the job this is: the checksum of its agreed spec record. None while no spec value is
    listed (a job being made, being deleted, or whose spec is lost)."""
    register = consensus.parse(keys.spec_dir(job_id), backend.list(keys.spec_dir(job_id)))
    return consensus.value_checksum(register.values[0]) if register.values else None


class Recording:
    """A backend that remembers the keys PUT through it (the rest passes through): what a writer may undo.
    `may_write`: whether its user may write at all (a reader writes nothing into a job with no spec listed)."""

    def __init__(self, inner: Backend, may_write: bool = True) -> None:
        self.inner, self.may_write = inner, may_write
        self.uri, self.location, self.parallel = inner.uri, inner.location, inner.parallel
        self.written: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.written.append(key)  # before: a PUT whose answer is lost may still have landed
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        return self.inner.get(key)

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        return self.inner.list(prefix, start_after)

    def list_dirs(self, prefix: str) -> list[str]:
        return self.inner.list_dirs(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def undone_if_changed(backend: Backend, job_id: str, made: str | None, written: list[str]) -> bool:
    """Whether the job is no longer the making `made` it was read as (deleted, or deleted and made again); if so,
    the keys in `written` are deleted (a local store's folders left empty too), so nothing of it blocks the id."""
    if incarnation(backend, job_id) == made:
        return False
    for key in written:
        backend.delete(key)
    if written and isinstance(backend, LocalBackend):
        backend.remove_empty_dirs(keys.job_dir(job_id))
    return True
