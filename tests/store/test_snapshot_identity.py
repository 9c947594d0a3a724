"""Snapshots are checked, not trusted whole: one of another job, of an earlier job of the same id, one that
holds fewer slots than its name says, or one written without its job's identity is reported by key and the
log is read instead. Also the reads around them: a value listed and then gone is read from its other copy, and
a listing that is no point-in-time snapshot raises no false alarm.

Every damage is done to the objects behind the store's back; the store is then opened afresh.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from zeus_kfp.job import Decision, JobSpec, TrialResult
from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes
from zeus_kfp.store import Store, keys, open_store
from zeus_kfp.store.backend import ObjectNotFound

EXPLORE = Decision(128, None, "exploration", "default batch size first")


def history(store, spec: JobSpec, runs: tuple[str, ...], energy_j: float) -> None:
    store.ensure_job(spec)
    for rid in runs:
        store.begin_recurrence(spec.job_id, rid)
        store.dispatch_trial(spec.job_id, rid, 1, EXPLORE)
        result = TrialResult.build(spec, batch_size=128, status="reached", time_s=9.0, energy_j=energy_j, num_epochs=3)
        store.finish_trial(spec.job_id, rid, 1, result)


def seen(uri: str, spec: JobSpec) -> list[tuple]:
    frame = open_store(uri).trials(spec.job_id)
    return list(frame[["recurrence_id", "energy_j"]].itertuples(index=False, name=None))


def snapshot_of(store, job_id: str) -> tuple[str, bytes]:
    key = store.backend.list(keys.snapshots_dir(job_id))[-1]
    return key, store.backend.get(key)


def problems_after_read(uri: str, spec: JobSpec) -> list:
    reader = open_store(uri)
    with pytest.warns(UserWarning):
        reader.trials(spec.job_id)
    return reader.problems


def test_another_jobs_snapshot_copied_in_is_not_read_as_this_jobs_history(store, spec):
    other = spec.with_changes(job_id="someone-else")
    history(store, spec, ("mine-1",), 100.0)
    history(store, other, ("theirs-1", "theirs-2", "theirs-3"), 999.0)
    store.compact(other.job_id)
    _key, data = snapshot_of(store, other.job_id)
    planted = keys.snapshot_key(spec.job_id, 9, keys.crc(data))  # claims this job's first 9 slots
    store.backend.put(planted, data)
    assert planted in [p.key for p in problems_after_read(store.uri, spec)]
    assert seen(store.uri, spec) == [("mine-1", 100.0)]


def test_a_snapshot_back_after_delete_is_not_adopted_by_the_new_job_of_that_id(store, spec):
    history(store, spec, ("old-1", "old-2"), 500.0)
    store.compact(spec.job_id)
    late_key, late = snapshot_of(store, spec.job_id)  # a compaction's upload that lands after the delete
    open_store(store.uri).delete_job(spec.job_id)
    history(store, spec, ("new-1",), 7.0)
    store.backend.put(late_key, late)
    problems = problems_after_read(store.uri, spec)
    assert any(p.key == late_key and "earlier job of this id" in p.reason for p in problems)
    assert seen(store.uri, spec) == [("new-1", 7.0)]


def test_a_snapshot_that_holds_fewer_slots_than_its_name_says_loses_no_trial(store, spec):
    history(store, spec, ("run-1", "run-2", "run-3"), 300.0)
    store.compact(spec.job_id)
    key, data = snapshot_of(store, spec.job_id)
    table = read_parquet_bytes(data)
    cut = table.filter(pa.compute.less_equal(table.column("slot"), 3))  # the metadata still claims them all
    cut_data = parquet_bytes(cut.replace_schema_metadata(table.schema.metadata))
    upto = keys.parse_snapshot_key(key)[0]
    store.backend.delete(key)
    forged = keys.snapshot_key(spec.job_id, upto, keys.crc(cut_data))
    store.backend.put(forged, cut_data)
    assert any(p.key == forged and "slots" in p.reason for p in problems_after_read(store.uri, spec))
    assert seen(store.uri, spec) == [("run-1", 300.0), ("run-2", 300.0), ("run-3", 300.0)]


def test_a_snapshot_without_its_jobs_identity_is_read_from_the_log_instead(store, spec):
    history(store, spec, ("run-1", "run-2"), 40.0)
    store.compact(spec.job_id)
    key, data = snapshot_of(store, spec.job_id)
    bare = parquet_bytes(read_parquet_bytes(data).replace_schema_metadata(None))  # as an older zeus-kfp wrote
    store.backend.delete(key)
    old = keys.snapshot_key(spec.job_id, keys.parse_snapshot_key(key)[0], keys.crc(bare))
    store.backend.put(old, bare)
    assert any(p.key == old and "names no job" in p.reason for p in problems_after_read(store.uri, spec))
    assert seen(store.uri, spec) == [("run-1", 40.0), ("run-2", 40.0)]
    open_store(store.uri).compact(spec.job_id)  # the next compaction writes one that names it
    assert open_store(store.uri).trials(spec.job_id)["energy_j"].tolist() == [40.0, 40.0]


class GoneWhenFetched:
    """A backend whose LIST still shows the values in `gone` while a GET says they are not there (a listing
    served from an index that lags a delete, or an object removed between the two requests)."""

    def __init__(self, inner, gone: set[str]) -> None:
        self.inner, self.gone = inner, gone
        self.parallel, self.uri, self.location = inner.parallel, inner.uri, inner.location

    def get(self, key: str) -> bytes:
        if key in self.gone:
            raise ObjectNotFound(key)
        return self.inner.get(key)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_value_listed_then_gone_is_read_from_its_other_copy(store, spec):
    history(store, spec, ("run-1", "run-2"), 60.0)
    values = {k for k in store.backend.list(keys.log_dir(spec.job_id)) if keys.basename(k).startswith("v.")}
    values |= {k for k in store.backend.list(keys.spec_dir(spec.job_id)) if keys.basename(k).startswith("v.")}
    reader = Store(GoneWhenFetched(open_store(store.uri).backend, values))
    frame = reader.trials(spec.job_id)
    assert list(frame["recurrence_id"]) == ["run-1", "run-2"] and reader.problems == []
    assert reader.get_job(spec.job_id) == spec


class LaggingListing:
    """A backend whose first listing of the log misses one slot's objects (written after the listing passed
    its place, while a later slot was written before the listing reached it); every later listing shows it."""

    def __init__(self, inner, slot_dir: str) -> None:
        self.inner, self.slot_dir, self.lagged = inner, slot_dir, False
        self.parallel, self.uri, self.location = inner.parallel, inner.uri, inner.location

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        found = self.inner.list(prefix, start_after)
        if not self.lagged and "/log/" in prefix + "/log/" and prefix.endswith("log/"):
            self.lagged = True
            return [k for k in found if not k.startswith(self.slot_dir)]
        return found

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_listing_that_is_no_point_in_time_snapshot_raises_no_false_alarm(store, spec):
    history(store, spec, ("run-1", "run-2"), 80.0)
    reader = Store(LaggingListing(open_store(store.uri).backend, keys.slot_dir(spec.job_id, 2)))
    frame = reader.trials(spec.job_id)
    assert reader.backend.lagged and reader.problems == []  # no "deleted?"
    assert list(frame["recurrence_id"]) == ["run-1", "run-2"]
