"""How much compaction work a store does: one compactor at a time (leases), compaction after about
sqrt(rows) loose records, and which writes are flushed to disk. Every outcome is checked through the
stored objects and the rows read back, never through the code's own word."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from store_keys import hints

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import Store, keys, leases, snapshots
from zeus.store import compaction as compaction_module
from zeus.store.backend import LocalBackend
from zeus.store.bulk import import_trials
from zeus.store.compaction import compact_stream

BIG = Decision(batch_size=128, cost_threshold=None, stage="exploration", reason="test")


def _trials(store, spec, rid: str, count: int) -> None:
    store.begin_recurrence(spec.job_id, rid)
    for attempt in range(1, count + 1):
        store.dispatch_trial(spec.job_id, rid, attempt, BIG)
        result = TrialResult.build(spec, batch_size=128, status="not_reached", time_s=60.0,
                                   energy_j=100.0 * attempt, num_epochs=4, metric=0.5)  # fmt: skip
        store.finish_trial(spec.job_id, rid, attempt, result)


def _leases(store, spec, stream: str = "finished") -> list[str]:
    return store.backend.list(keys.leases_dir(spec.job_id, stream))


def test_a_compactor_leaves_a_stream_to_the_one_already_at_work_on_it(store, spec, monkeypatch):
    """While compactor A reads the stream under its lease, compactor B finds the lease and does no work:
    it reads nothing and commits nothing. A then commits, and its lease is gone."""
    store.ensure_job(spec)
    _trials(store, spec, "run-a", 3)
    real_read = compaction_module.read_stream
    seen: list[str] = []

    def b_arrives_while_a_reads(backend, job_id, stream, after=None):
        seen.append("read")
        if len(seen) == 1:  # A's read: B comes now
            outcome = compact_stream(backend, job_id, stream)
            seen.append(outcome.note)
            assert outcome.merged == 0 and snapshots.top_generation(backend, job_id, stream) == 0
        return real_read(backend, job_id, stream, after)

    monkeypatch.setattr(compaction_module, "read_stream", b_arrives_while_a_reads)
    done = compact_stream(store.backend, spec.job_id, "finished")
    assert seen == ["read", "another compactor is at it"]  # B never read the stream
    assert done.merged == 3 and snapshots.top_generation(store.backend, spec.job_id, "finished") == 1
    assert _leases(store, spec) == []
    assert store.trials(spec.job_id)["energy_j"].tolist() == [100.0, 200.0, 300.0]


def test_a_fresh_lease_holds_off_compaction_and_reads_stay_exact(store, spec):
    store.ensure_job(spec)
    _trials(store, spec, "run-a", 2)
    before = store.trials(spec.job_id)
    assert leases.take(store.backend, spec.job_id, "finished", 1) is not None  # someone else's, alive
    store.compact(spec.job_id)
    assert snapshots.top_generation(store.backend, spec.job_id, "finished") == 0
    assert len(store.backend.list(keys.events_dir(spec.job_id, "finished"))) == 2  # hints kept
    assert snapshots.top_generation(store.backend, spec.job_id, "dispatched") == 1  # other streams go on
    pd.testing.assert_frame_equal(store.trials(spec.job_id), before)


@pytest.mark.parametrize("body", [b"1000.000", b"\xffnot a time", b"9999999999.000"], ids=["old", "garbage", "future"])
def test_a_lease_left_by_a_dead_compactor_is_taken_over(store, spec, body):
    store.ensure_job(spec)
    _trials(store, spec, "run-a", 2)
    before = store.trials(spec.job_id)
    store.backend.put_new(keys.lease_key(spec.job_id, "finished", 1), body)
    store.compact(spec.job_id)
    assert snapshots.top_generation(store.backend, spec.job_id, "finished") == 1
    assert hints(store, spec.job_id) == [] and _leases(store, spec) == []
    pd.testing.assert_frame_equal(store.trials(spec.job_id), before)


def test_a_compaction_that_fails_releases_its_lease(store, spec, monkeypatch):
    store.ensure_job(spec)
    _trials(store, spec, "run-a", 2)

    def the_disk_fills(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(snapshots, "commit", the_disk_fills)
    with pytest.raises(OSError, match="no space"):
        compact_stream(store.backend, spec.job_id, "finished")
    assert _leases(store, spec) == []
    monkeypatch.undo()
    assert compact_stream(store.backend, spec.job_id, "finished").merged == 2


def test_a_commit_collects_the_leases_of_generations_already_committed(store, spec):
    store.ensure_job(spec)
    _trials(store, spec, "run-a", 1)
    store.compact(spec.job_id)
    stale = keys.lease_key(spec.job_id, "finished", 1)  # generation 1 is committed: nobody needs it
    store.backend.put_new(stale, b"1000.000")
    _trials(store, spec, "run-b", 1)
    store.compact(spec.job_id)
    assert snapshots.top_generation(store.backend, spec.job_id, "finished") == 2
    assert _leases(store, spec) == []


def _history(count: int) -> pd.DataFrame:
    one = {"attempt": 1, "batch_size": 128, "status": "reached", "time_s": 60.0, "num_epochs": 4}
    rows = [one | {"recurrence": r + 1, "recurrence_id": f"hist-{r + 1}", "energy_j": 100.0 + r} for r in range(count)]
    return pd.DataFrame(rows)


def test_reads_compact_after_about_sqrt_rows_loose_records(store, spec):
    """Over a 100-row snapshot a reader with a floor of 3 waits for more than 10 loose records."""
    import_trials(store, spec, _history(100))
    eager = Store(store.backend, auto_compact_after=3)
    eager.trials(spec.job_id)  # the import's snapshot is generation 1
    _trials(store, spec, "run-a", 10)
    eager.trials(spec.job_id)
    assert snapshots.top_generation(store.backend, spec.job_id, "finished") == 1  # 10 loose: not yet
    _trials(store, spec, "run-b", 1)
    found = eager.trials(spec.job_id)
    assert snapshots.top_generation(store.backend, spec.job_id, "finished") == 2  # 11 loose: compacted
    assert len(found) == 111 and hints(store, spec.job_id) == []


def test_only_objects_with_bytes_to_lose_are_flushed_to_disk(tmp_path, monkeypatch):
    """A record is flushed before it is linked; an empty hint and a cache are not."""
    backend = LocalBackend(tmp_path)
    flushed: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        flushed.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    assert backend.put_new("a/record", b"12345")
    assert backend.put_new("a/hint", b"")
    assert backend.put_cache("a/cache", b"678")
    assert not backend.put_cache("a/cache", b"other")  # still an exclusive create
    assert flushed == [5]
    assert [backend.get(k) for k in ("a/record", "a/hint", "a/cache")] == [b"12345", b"", b"678"]
