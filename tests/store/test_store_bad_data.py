"""Bad objects in the store: reported by key and reason, skipped or refused, never a crash in pandas,
never a lost row. Both backends; the objects are planted through the backend, as a stray tool would."""

from __future__ import annotations

import io
import re
import warnings

import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from store_keys import hints

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import CorruptObjectError, NewerSchemaError, Store, StoreWarning, framing, keys
from zeus.store.schemas import (
    META_CHECKSUM,
    META_TABLE,
    META_VERSION,
    decode,
    encode,
    snapshot_schema,
    table_checksum,
)

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


def _framed_arrow(table: pa.Table) -> bytes:
    """A small table in the framed Arrow IPC encoding, built here with pyarrow and the frame's header."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return framing.frame(b"arrow", sink.getvalue().to_pybytes())


def _legacy_record(store, key: str, table: str) -> bytes:
    """The object at `key` as zeus-kfp wrote small tables before framed Arrow IPC: Parquet, with the
    table, schema version 2 and the checksum of its columns in the metadata."""
    arrow = decode(key, store.backend.get(key), table)
    meta = {META_TABLE: table.encode(), META_VERSION: b"2", META_CHECKSUM: table_checksum(arrow).encode()}
    return _parquet(arrow.replace_schema_metadata(meta))


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
    "framed, not Arrow": (lambda spec: framing.frame(b"arrow", b"this is not an Arrow stream"), "not readable"),
    "framed, truncated": (lambda spec: encode("finished", [_finished_row(spec)])[:-7], "truncated"),
    "framed, wrong table": (
        lambda spec: _framed_arrow(
            pa.Table.from_pylist([_finished_row(spec)]).replace_schema_metadata(
                {META_TABLE: b"phases", META_VERSION: b"2"}
            )
        ),
        "wrong schema",
    ),
}


def _plant(store, spec, stream: str, name: str, data: bytes) -> str:
    """A bad record with its hint, as a stray tool or bit rot would leave it."""
    key = keys.record_key(spec.job_id, stream, name)
    store.backend.put_new(keys.hint_key(spec.job_id, stream, name), b"")
    store.backend.put_new(key, data)
    return key


@pytest.mark.parametrize("kind", sorted(BAD_OBJECTS))
def test_a_bad_record_is_reported_and_skipped_and_left_in_place(store, spec, kind):
    _two_trials(store, spec)
    make, reason = BAD_OBJECTS[kind]
    bad_key = _plant(store, spec, "finished", "run-a.0003", make(spec))
    with pytest.warns(StoreWarning, match="run-a.0003"):
        trials = store.trials(spec.job_id)
    assert trials["trial"].tolist() == [1, 2] and trials["status"].tolist() == ["reached", "reached"]
    assert [p.key for p in store.problems] == [bad_key] and reason in store.problems[0].reason
    with pytest.warns(StoreWarning):
        store.compact(spec.job_id)  # merges the good records, keeps the bad one for a person to look at
    assert hints(store, spec.job_id) == [keys.hint_key(spec.job_id, "finished", "run-a.0003")]
    with pytest.warns(StoreWarning):
        assert store.trials(spec.job_id)["trial"].tolist() == [1, 2]


@pytest.mark.parametrize("encoding", [_parquet, _framed_arrow])
def test_a_newer_schema_version_is_refused_not_half_read(store, spec, encoding):
    _two_trials(store, spec)
    newer = pa.Table.from_pylist([_finished_row(spec)]).replace_schema_metadata(
        {META_TABLE: b"finished", META_VERSION: b"99"}
    )
    key = _plant(store, spec, "finished", "run-a.0003", encoding(newer))
    with pytest.raises(NewerSchemaError) as info:
        store.trials(spec.job_id)
    assert info.value.key == key and "upgrade zeus-kfp" in str(info.value)
    with pytest.raises(NewerSchemaError):
        store.compact(spec.job_id)
    assert len(store.backend.list(keys.events_dir(spec.job_id, "finished"))) == 3  # nothing deleted


def _snapshot_key(store, spec, stream: str) -> str:
    (key,) = [k for k in store.backend.list(keys.snapshots_dir(spec.job_id, stream)) if k.endswith(".parquet")]
    return key


def _replace(store, key: str, data: bytes | None) -> None:
    """Overwrite or delete an object behind the store's back (create-only backends: delete, then create)."""
    store.backend.delete([key])
    if data is not None:
        assert store.backend.put_new(key, data)


@pytest.mark.parametrize("damage", ["deleted", "emptied", "garbled", "another snapshot"])
def test_a_lost_or_damaged_snapshot_is_reported_and_the_stream_read_from_its_records(store, spec, damage):
    """Snapshots are caches of the records: a damaged one never reads as "no results"."""
    _two_trials(store, spec)
    store.compact(spec.job_id)
    before = store.trials(spec.job_id)
    key = _snapshot_key(store, spec, "finished")
    good = store.backend.get(key)
    empty = encode("finished", pa.Table.from_pylist([], schema=snapshot_schema("finished")), snapshot=True)
    other = encode("finished", decode(key, good, "finished", snapshot=True).slice(1), snapshot=True)
    replacement = {"deleted": None, "emptied": empty, "garbled": good[:-40] + b"x" * 40, "another snapshot": other}
    _replace(store, key, replacement[damage])
    lazy = Store(store.backend, auto_compact_after=None)
    with pytest.warns(StoreWarning, match=re.escape(keys.snapshots_dir(spec.job_id, "finished"))):
        trials = lazy.trials(spec.job_id)
    pd.testing.assert_frame_equal(trials, before)
    assert [p.key for p in lazy.problems] == [key]
    with pytest.warns(StoreWarning):
        store.trials(spec.job_id)  # a reader that may write repairs it: a generation rebuilt from the records
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        pd.testing.assert_frame_equal(store.trials(spec.job_id), before)


def test_garbage_named_like_a_newer_snapshot_is_ignored(store, spec):
    """Only a committed generation (its mark) is read: a stray object named like a snapshot is not."""
    _two_trials(store, spec)
    store.compact(spec.job_id)
    before = store.trials(spec.job_id)
    store.backend.put_new(keys.snapshots_dir(spec.job_id, "finished") + f"{99:012d}.feed.parquet", b"PAR1 garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        pd.testing.assert_frame_equal(store.trials(spec.job_id), before)


@pytest.mark.parametrize("encoding", ["framed", "legacy parquet"])
def test_garbled_bytes_are_skipped_by_key_or_read_exactly_never_misread(tmp_path, spec, encoding):
    """Flip bits all over a valid record: each read either gets the true row or skips the record,
    naming its key (never a UnicodeDecodeError, ArrowNotImplementedError or a different value).
    A framed record's every byte is under its CRC, so every flip is caught; a Parquet record (as
    written before framing, and still read) has bytes no value depends on, so some reads are exact.
    Decoding does not depend on the backend: a local directory only, to keep it quick."""
    import random

    from zeus.store import open_store

    store = open_store(str(tmp_path / "store"))
    _two_trials(store, spec)
    key = keys.event_key(spec.job_id, "finished", "run-a", 2)
    truth = store.trials(spec.job_id)
    if encoding == "legacy parquet":
        _replace(store, key, _legacy_record(store, key, "finished"))
        pd.testing.assert_frame_equal(Store(store.backend, auto_compact_after=None).trials(spec.job_id), truth)
    good = store.backend.get(key)
    rng = random.Random(11)
    outcomes = {"exact": 0, "skipped": 0}
    lazy = Store(store.backend, auto_compact_after=None)
    for _ in range(120):
        garbled = bytearray(good)
        for _flip in range(rng.choice([1, 1, 2, 8])):
            garbled[rng.randrange(len(garbled))] ^= 1 << rng.randrange(8)
        _replace(store, key, bytes(garbled))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWarning)
            trials = lazy.trials(spec.job_id)
        if lazy.problems:
            assert [p.key for p in lazy.problems] == [key]
            assert trials["trial"].tolist() == [1, 2] and not trials.loc[1, "finished"]
            outcomes["skipped"] += 1
        else:
            pd.testing.assert_frame_equal(trials, truth)
            outcomes["exact"] += 1
    if encoding == "framed":
        assert outcomes == {"exact": 0, "skipped": 120}
    else:
        assert outcomes["skipped"] > 0 and outcomes["exact"] > 0, outcomes


def test_corrupt_side_tables_never_block_a_step_that_writes_them(store, spec):
    """A garbled profile or bandit record is reported on read; writing new ones (and retrying) still works."""
    from zeus.policy.base import ArmState

    _two_trials(store, spec)
    arms = [ArmState(64, "exploration", 1, -10.0, 1.0, False)]
    bad_bandit = _plant(store, spec, "bandit", "run-a.0001", b"garbage")
    bad_profile = _plant(store, spec, "profiles", "run-a.0001", b"garbage")
    store.write_bandit_state(spec.job_id, "run-a", 1, arms, 10.0)  # a retry finds the (bad) first: kept
    store.write_bandit_state(spec.job_id, "run-a", 2, arms, 10.0)
    profile = pd.DataFrame(
        {"phase": ["train"], "power_limit_w": [300.0], "average_power_w": [250.0], "throughput": [9.0],
         "simulated": [True]}
    )  # fmt: skip
    store.write_profile(spec.job_id, "run-a", 1, profile)
    store.write_profile(spec.job_id, "run-a", 2, profile)
    with pytest.warns(StoreWarning, match="run-a.0001"):
        assert store.bandit_state(spec.job_id)["trial"].tolist() == [2]
    assert [p.key for p in store.problems] == [bad_bandit]
    with pytest.warns(StoreWarning, match="run-a.0001"):
        assert store.profiles(spec.job_id)["trial"].tolist() == [2]
    assert [p.key for p in store.problems] == [bad_profile]


def test_a_corrupt_recurrence_record_is_refused_naming_its_key(store, spec):
    store.ensure_job(spec)
    key = keys.recurrence_index_key(spec.job_id, "run-x")
    store.backend.put_new(key, b'{"recurrence": ')
    with pytest.raises(CorruptObjectError) as info:
        store.begin_recurrence(spec.job_id, "run-x")
    assert info.value.key == key
    with pytest.raises(CorruptObjectError):
        store.dispatch_trial(spec.job_id, "run-x", 1, DECISION)


def test_a_corrupt_job_spec_is_skipped_in_listings_and_refused_on_use(store, spec):
    store.ensure_job(spec.with_changes(job_id="healthy"))
    key = keys.spec_key(spec.job_id)
    store.backend.put_new(key, b"not parquet at all")
    with pytest.warns(StoreWarning, match=spec.job_id):
        assert store.list_jobs()["job_id"].tolist() == ["healthy"]
    with pytest.raises(CorruptObjectError) as info:
        store.get_job(spec.job_id)
    assert info.value.key == key
    with pytest.raises(CorruptObjectError):
        store.ensure_job(spec)  # never replaced by a guess


def test_each_problem_is_warned_once_per_read(store, spec):
    _two_trials(store, spec)
    bad_key = _plant(store, spec, "finished", "run-a.0003", b"not parquet")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreWarning)
        store.trials(spec.job_id)
    assert [str(w.message).count(bad_key) for w in caught] == [1]


def test_a_record_in_an_earlier_layout_reads_as_this_version_writes_it(spec):
    """Written by a version before `source` (the column missing), with its columns in another order and
    a narrower integer: read with the column null, in the stored order and types. This version's own
    record reads back as written (its schema is already the stored one)."""
    row = _finished_row(spec)
    current = decode("k", encode("finished", [row]), "finished")
    assert current.to_pylist() == [row]
    earlier = pa.Table.from_pylist([{k: v for k, v in row.items() if k != "source"}])
    earlier = earlier.select(list(reversed(earlier.column_names)))
    earlier = earlier.set_column(earlier.column_names.index("attempt"), "attempt", pa.array([3], pa.int32()))
    stored = decode("k", _framed_arrow(earlier.replace_schema_metadata({META_TABLE: b"finished", META_VERSION: b"1"})),
                    "finished")  # fmt: skip
    assert stored.schema.equals(current.schema) and stored.to_pylist() == [row | {"source": None}]
