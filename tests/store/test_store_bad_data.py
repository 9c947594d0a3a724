"""Bad objects in the store: reported by key and reason, skipped or refused, never a crash in pandas,
never a lost row. Both backends; the objects are planted through the backend, as a stray tool would."""

from __future__ import annotations

import io
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import CorruptObjectError, NewerSchemaError, StoreWarning
from zeus.store.schemas import META_TABLE, META_VERSION, encode

DECISION = Decision(batch_size=64, cost_threshold=None, stage="exploration", reason="test")


def _two_trials(store, spec) -> None:
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    for attempt in (1, 2):
        store.dispatch_trial(spec.job_id, "run-a", attempt, DECISION)
        done = TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0, energy_j=10.0, num_epochs=1)
        store.finish_trial(spec.job_id, "run-a", attempt, done)


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _finished_row(spec) -> dict:
    return {
        "job_id": spec.job_id,
        "recurrence_id": "run-a",
        "attempt": 3,
        "batch_size": 64,
        "status": "reached",
        "reached": True,
        "time_s": 1.0,
        "energy_j": 1.0,
        "cost": 1.0,
        "num_epochs": 1,
        "power_limit_w": None,
        "metric": None,
        "simulated": False,
        "reason": "",
        "source": "",
        "ended_at": None,
    }


BAD_OBJECTS = {
    "not parquet": (lambda spec: b"this is not a parquet file", "not a Parquet file"),
    "no zeus metadata": (lambda spec: _parquet(pa.table({"x": [1, 2]})), "wrong schema"),
    "wrong table": (lambda spec: encode("phases", [{"job_id": spec.job_id, "phase": "running", "at": None}]), "table"),
    "missing columns": (
        lambda spec: _parquet(
            pa.table({"job_id": [spec.job_id]}).replace_schema_metadata({META_TABLE: b"finished", META_VERSION: b"1"})
        ),
        "missing columns",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_OBJECTS))
def test_a_bad_event_is_reported_and_skipped_and_left_in_place(store, spec, kind):
    _two_trials(store, spec)
    make, reason = BAD_OBJECTS[kind]
    bad_key = f"jobs/{spec.job_id}/events/finished/run-a.0003.parquet"
    store.backend.put_new(bad_key, make(spec))
    with pytest.warns(StoreWarning, match="run-a.0003"):
        trials = store.trials(spec.job_id)
    assert trials["trial"].tolist() == [1, 2] and trials["status"].tolist() == ["reached", "reached"]
    assert [p.key for p in store.problems] == [bad_key] and reason in store.problems[0].reason
    with pytest.warns(StoreWarning):
        store.compact(spec.job_id)  # merges the good events, keeps the bad one for a person to look at
    assert store.backend.list(f"jobs/{spec.job_id}/events/") == [bad_key]
    with pytest.warns(StoreWarning):
        assert store.trials(spec.job_id)["trial"].tolist() == [1, 2]


def test_a_newer_schema_version_is_refused_not_half_read(store, spec):
    _two_trials(store, spec)
    newer = pa.Table.from_pylist([_finished_row(spec)]).replace_schema_metadata(
        {META_TABLE: b"finished", META_VERSION: b"99"}
    )
    key = f"jobs/{spec.job_id}/events/finished/run-a.0003.parquet"
    store.backend.put_new(key, _parquet(newer))
    with pytest.raises(NewerSchemaError) as info:
        store.trials(spec.job_id)
    assert info.value.key == key and "upgrade zeus-kfp" in str(info.value)
    with pytest.raises(NewerSchemaError):
        store.compact(spec.job_id)
    assert len(store.backend.list(f"jobs/{spec.job_id}/events/finished/")) == 3  # nothing deleted


def test_a_corrupt_snapshot_is_refused_with_its_key(store, spec):
    _two_trials(store, spec)
    store.compact(spec.job_id)
    key = f"jobs/{spec.job_id}/snapshots/finished/{2:012d}.parquet"
    store.backend.put_new(key, b"PAR1 garbage")
    with pytest.raises(CorruptObjectError) as info:
        store.trials(spec.job_id)
    assert info.value.key == key and "not a Parquet file" in info.value.reason


def test_a_late_conflicting_copy_of_a_compacted_event_is_reported_and_kept_aside(store, spec):
    """A retry that checked before the first write landed can create the key again after compaction
    deleted it. Same content: harmless, cleaned up. Different content: the compacted event stays the
    truth and the late one is reported (never silently dropped) and left for a person."""
    from datetime import UTC, datetime

    _two_trials(store, spec)
    store.compact(spec.job_id)
    key = f"jobs/{spec.job_id}/events/finished/run-a.0001.parquet"
    same = _finished_row(spec) | {"attempt": 1, "energy_j": 10.0, "time_s": 1.0, "ended_at": datetime.now(UTC)}
    same["cost"] = spec.cost(10.0, 1.0)
    same["metric"] = None
    assert store.backend.put_new(key, encode("finished", [same]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        assert store.trials(spec.job_id)["energy_j"].tolist() == [10.0, 10.0]
    store.compact(spec.job_id)
    assert store.backend.list(f"jobs/{spec.job_id}/events/") == []  # an identical copy is cleaned up

    assert store.backend.put_new(key, encode("finished", [same | {"energy_j": 99.0}]))
    with pytest.warns(StoreWarning, match="differs from the compacted event"):
        trials = store.trials(spec.job_id)
    assert trials["energy_j"].tolist() == [10.0, 10.0] and [p.key for p in store.problems] == [key]
    with pytest.warns(StoreWarning):
        store.compact(spec.job_id)
    assert store.backend.list(f"jobs/{spec.job_id}/events/") == [key]


def test_a_corrupt_job_spec_is_skipped_in_listings_and_refused_on_use(store, spec):
    store.ensure_job(spec.with_changes(job_id="healthy"))
    key = f"catalog/specs/{spec.job_id}.parquet"
    store.backend.put_new(key, b"not parquet at all")
    with pytest.warns(StoreWarning, match=spec.job_id):
        assert store.list_jobs()["job_id"].tolist() == ["healthy"]
    with pytest.raises(CorruptObjectError) as info:
        store.get_job(spec.job_id)
    assert info.value.key == key
    with pytest.raises(CorruptObjectError):
        store.ensure_job(spec)  # never replaced by a guess
