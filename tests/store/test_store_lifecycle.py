"""Delete, re-create, compaction and readers are safe against each other: a compaction never stamps one making
of a job with another's rows, a reader or compactor at work during a delete leaves nothing that keeps the id
from being made again, and a Store kept across a delete and re-create reads the new job, not a mix.

Each race is placed exactly: a backend that runs the other party at one request of the first (the real store
code on both sides, on both backends). Each test fails on c837984; lifecycle_checker.py interleaves the same
parties at random (test_lifecycle_checker.py).
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable

import pytest
from test_snapshot_identity import history

from zeus_kfp.job import JobSpec
from zeus_kfp.store import JobDeletedError, Store, keys, open_store


def trial(store, spec: JobSpec, rid: str, energy_j: float) -> None:
    history(store, spec, (rid,), energy_j)


def shown(uri: str, spec: JobSpec) -> list[tuple]:
    frame = open_store(uri).trials(spec.job_id)
    return list(frame[["trial", "recurrence_id", "energy_j"]].itertuples(index=False, name=None))


class Hooked:
    """Runs `then` once, when `at(op, key)` first holds, just before that request of the backend it is mixed into."""

    at: Callable[[str, str], bool]
    then: Callable[[], object]
    fired: bool

    def _maybe(self, op: str, key: str) -> None:
        if not self.fired and self.at(op, key):
            self.fired = True
            self.then()

    def get(self, key: str) -> bytes:
        self._maybe("get", key)
        return super().get(key)  # type: ignore[misc]

    def put(self, key: str, data: bytes) -> None:
        self._maybe("put", key)
        super().put(key, data)  # type: ignore[misc]

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        self._maybe("list", prefix)
        return super().list(prefix, start_after)  # type: ignore[misc]

    def delete(self, key: str) -> None:
        self._maybe("delete", key)
        super().delete(key)  # type: ignore[misc]


def meanwhile(backend, at: Callable[[str, str], bool], then: Callable[[], object]):
    """A copy of `backend` (a local directory or S3, its class kept) that runs `then` at the request `at` picks."""
    hooked = copy.copy(backend)
    hooked.__class__ = type(f"Hooked{type(backend).__name__}", (Hooked, type(backend)), {})
    hooked.at, hooked.then, hooked.fired = at, then, False
    return hooked


def made_again(uri: str, spec: JobSpec) -> Callable[[], None]:
    def run() -> None:
        other = open_store(uri)
        other.delete_job(spec.job_id)
        other.ensure_job(spec)
        trial(other, spec, "new-1", 7.0)

    return run


@pytest.mark.parametrize("listing", [1, 2, 3], ids=["after the read", "before the write", "after the write"])
def test_a_compaction_while_its_job_is_deleted_and_made_again_stamps_nothing_of_the_old_job(store, spec, listing):
    """c837984 took the incarnation it stamped when it wrote the snapshot, after reading the log: the old job's
    three trials were read as the new job's, and the new job's first trial vanished under them. Here the job is
    deleted and made again at the compaction's first, second or third listing of the spec after the log's."""
    store.ensure_job(spec)
    for n in (1, 2, 3):
        trial(store, spec, f"old-{n}", 500.0)
    listed = {"log": False, "spec": 0}

    def at(op: str, key: str) -> bool:
        listed["log"] |= op == "list" and key == keys.log_dir(spec.job_id)
        listed["spec"] += listed["log"] and op == "list" and key == keys.spec_dir(spec.job_id)
        return listed["spec"] == listing

    compactor = Store(meanwhile(store.backend, at, made_again(store.uri, spec)))
    with contextlib.suppress(JobDeletedError):  # told so: what it wrote, if anything, removed
        assert compactor.compact(spec.job_id).written is None
    assert compactor.backend.fired
    trial(open_store(store.uri), spec, "new-2", 8.0)
    assert shown(store.uri, spec) == [(1, "new-1", 7.0), (2, "new-2", 8.0)]
    assert open_store(store.uri).compact(spec.job_id).written  # the next compaction is the new job's
    assert shown(store.uri, spec) == [(1, "new-1", 7.0), (2, "new-2", 8.0)]


def test_a_reader_during_a_delete_leaves_nothing_that_keeps_the_id_from_being_made_again(store, spec):
    """c837984 deleted the log from its first slot on, so a reader meanwhile saw holes before decided slots and
    closed them: its blocks outlived the delete, and "the job's spec is gone but its log is not" refused the id."""
    store.ensure_job(spec)
    for n in (1, 2, 3):
        trial(store, spec, f"run-{n}", 100.0)
    logged = [k for k in store.backend.list(keys.log_dir(spec.job_id))]
    middle = sorted(logged)[len(logged) // 2]
    reader_saw = []

    def read() -> None:
        try:
            reader_saw.append(shown(store.uri, spec))
        except JobDeletedError as exc:
            reader_saw.append(str(exc))

    Store(meanwhile(store.backend, lambda op, key: op == "delete" and key == middle, read)).delete_job(spec.job_id)
    assert reader_saw  # the read ran half-way through the delete
    assert store.backend.list(keys.job_dir(spec.job_id)) == []
    store.ensure_job(spec)  # made again
    trial(store, spec, "new-1", 7.0)
    assert shown(store.uri, spec) == [(1, "new-1", 7.0)]


def test_a_reader_closing_a_hole_in_a_job_deleted_under_it_undoes_what_it_wrote(store, spec):
    """A crashed writer's hole (a phase-1 block, no value) before a decided slot: the reader waits, then closes it
    with a noop. The whole delete runs while it waits; what it then writes is its own to undo."""
    store.ensure_job(spec)
    trial(store, spec, "run-1", 100.0)
    last = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(spec.job_id)))
    hole = keys.slot_dir(spec.job_id, last + 1)
    store.backend.put(f"{hole}b.000001.{'f' * 16}.1", b"")  # a writer that died after its first PUT
    after = b'{"kind":"begin","recurrence_id":"run-2"}'  # and an entry decided after it
    store.backend.put(f"{keys.slot_dir(spec.job_id, last + 2)}v.{keys.crc(after)}.json", after)
    deleted = []

    def waiting_on_the_hole(op: str, key: str) -> bool:
        return op == "list" and key == hole

    def delete() -> None:
        deleted.append(open_store(store.uri).delete_job(spec.job_id))

    reader = Store(meanwhile(open_store(store.uri).backend, waiting_on_the_hole, delete))
    with pytest.raises(JobDeletedError, match=r"deleted \(or deleted and made again\) while it was read"):
        reader.trials(spec.job_id)
    assert deleted and store.backend.list(keys.job_dir(spec.job_id)) == []  # its noop's blocks undone
    open_store(store.uri).ensure_job(spec)


def test_a_store_kept_across_a_delete_and_re_create_reads_the_new_job(store, spec):
    """c837984 kept the old job's prefix and read the new job's slots after it: the old trials, and none new."""
    store.ensure_job(spec)
    for n in (1, 2, 3):
        trial(store, spec, f"old-{n}", 500.0)
    kept = open_store(store.uri)
    assert len(kept.trials(spec.job_id)) == 3
    made_again(store.uri, spec)()
    with pytest.warns(UserWarning, match="deleted and made again since this Store read it"):
        frame = kept.trials(spec.job_id)
    assert list(frame[["trial", "recurrence_id", "energy_j"]].itertuples(index=False, name=None)) == [(1, "new-1", 7.0)]


def test_a_store_that_read_a_job_before_it_was_made_reads_it_made_without_a_warning(store, spec):
    """Reading a job id before it exists (a run asks first, then registers) is no read of an earlier making:
    seen as one, every run said the job was deleted and made again."""
    early = open_store(store.uri)
    assert early.trials(spec.job_id).empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        early.ensure_job(spec)
        trial(early, spec, "run-1", 100.0)
        assert early.trials(spec.job_id)["energy_j"].tolist() == [100.0]


def test_a_store_kept_across_a_re_create_of_as_many_slots_settles_and_specs_the_new_job(store, spec):
    """The same number of slots in the new job: a settled view kept by slot count alone would be the old one."""
    history(store, spec, ("old-1",), 500.0)
    kept = open_store(store.uri)
    assert kept.trials(spec.job_id)["energy_j"].tolist() == [500.0] and kept.get_job(spec.job_id) == spec
    changed = spec.with_changes(batch_sizes=(64, 128))
    other = open_store(store.uri)
    other.delete_job(spec.job_id)
    history(other, changed, ("new-1",), 7.0)
    with pytest.warns(UserWarning, match="deleted and made again"):
        assert kept.trials(spec.job_id)["energy_j"].tolist() == [7.0]
    assert kept.get_job(spec.job_id) == changed


def test_a_delete_removes_the_log_from_its_last_slot_back_and_the_spec_last(store, spec):
    store.ensure_job(spec)
    trial(store, spec, "run-1", 100.0)
    store.compact(spec.job_id)
    order: list[str] = []

    def record(op: str, key: str) -> bool:
        if op == "delete":
            order.append(key)
        return False

    Store(meanwhile(store.backend, record, lambda: None)).delete_job(spec.job_id)
    slots = [keys.slot_of(k) for k in order if keys.slot_of(k) is not None]
    assert slots == sorted(slots, reverse=True) and len(set(slots)) == 4  # begin, dispatched, finished, snapshot
    for slot in set(slots):  # each slot's blocks before its value: a listing sees the value only with its blocks
        named = [keys.basename(k) for k in order if keys.slot_of(k) == slot]
        assert named[-1].startswith("v.") and all(n.startswith("b.") for n in named[:-1])
    assert all(k.startswith(keys.spec_dir(spec.job_id)) for k in order[-3:]) and order[-1].startswith(
        keys.spec_dir(spec.job_id) + "v."
    )
