"""Store.trial_events: a consistent cut with a cursor, and exactly the events after a cursor.

The oracle is the full read: the events returned in steps, cursor to cursor, must add up to the
events of one full read at the end, each once, whatever compactions happened in between."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import Store, StoreInputError, events, keys, ledger, open_store, snapshots
from zeus.store.schemas import META_NAMES_CHECKSUM

DECISION = Decision(batch_size=64, cost_threshold=None, stage="exploration", reason="test")


def _trial(store, spec, rid: str, attempt: int, finish: bool = True) -> None:
    store.dispatch_trial(spec.job_id, rid, attempt, DECISION)
    if finish:
        done = TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0, energy_j=float(attempt),
                                 num_epochs=1)  # fmt: skip
        store.finish_trial(spec.job_id, rid, attempt, done)


def _names(table: pa.Table) -> list[str]:
    return sorted(table.column("_event").to_pylist())


def test_events_after_a_cursor_are_exactly_the_new_ones_across_compactions(store, spec):
    lazy = Store(store.backend, auto_compact_after=None)
    lazy.ensure_job(spec)
    lazy.begin_recurrence(spec.job_id, "run-a")
    seen = {"dispatched": [], "finished": []}

    def step(cursor: str | None) -> str:
        found = lazy.trial_events(spec.job_id, after=cursor)
        assert not found.reset and lazy.problems == []
        seen["dispatched"] += found.dispatched.column("_event").to_pylist()
        seen["finished"] += found.finished.column("_event").to_pylist()
        return found.cursor

    cursor = step(None)
    assert seen == {"dispatched": [], "finished": []}
    _trial(lazy, spec, "run-a", 1)
    _trial(lazy, spec, "run-a", 2, finish=False)  # in flight at this cursor
    cursor = step(cursor)
    assert seen == {"dispatched": ["run-a.0001", "run-a.0002"], "finished": ["run-a.0001"]}
    lazy.compact(spec.job_id)  # the loose events the cursor holds are merged: not returned again
    cursor = step(cursor)
    assert len(seen["dispatched"]) == 2
    lazy.finish_trial(spec.job_id, "run-a", 2, TrialResult.build(spec, batch_size=64, status="reached", time_s=1.0,
                                                                  energy_j=2.0, num_epochs=1))  # fmt: skip
    _trial(lazy, spec, "run-a", 3)
    lazy.compact(spec.job_id)  # new events merged before they were ever read loose
    _trial(lazy, spec, "run-a", 4)
    cursor = step(cursor)
    lazy.compact(spec.job_id)
    _trial(lazy, spec, "run-a", 5)
    step(cursor)
    full = lazy.trial_events(spec.job_id)
    assert sorted(seen["dispatched"]) == _names(full.dispatched) == [f"run-a.{a:04d}" for a in range(1, 6)]
    assert sorted(seen["finished"]) == _names(full.finished)
    assert len(seen["finished"]) == len(set(seen["finished"]))


def test_a_cursor_of_nothing_new_returns_nothing_and_stays_usable(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    _trial(store, spec, "run-a", 1)
    first = store.trial_events(spec.job_id)
    again = store.trial_events(spec.job_id, after=first.cursor)
    assert again.dispatched.num_rows == 0 and again.finished.num_rows == 0
    assert store.trial_events(spec.job_id, after=again.cursor).finished.num_rows == 0


def test_after_a_lost_snapshot_the_read_says_reset_and_returns_the_whole_cut(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    for attempt in (1, 2):
        _trial(store, spec, "run-a", attempt)
    store.compact(spec.job_id)
    cursor = store.trial_events(spec.job_id).cursor
    (snapshot,) = [k for k in store.backend.list(keys.snapshots_dir(spec.job_id, "finished")) if k.endswith(".parquet")]
    store.backend.delete([snapshot])
    with pytest.warns(match="missing"):
        store.trials(spec.job_id)  # a reader repairs it: a new chain rebuilt from the records
    found = store.trial_events(spec.job_id, after=cursor)
    assert found.reset and _names(found.finished) == ["run-a.0001", "run-a.0002"]
    assert _names(found.dispatched) == ["run-a.0001", "run-a.0002"]


@pytest.mark.parametrize("bad", ["", "not-base64!", "eyJ2IjogMX0="])
def test_a_cursor_not_from_this_store_is_refused_naming_the_field(store, spec, bad):
    store.ensure_job(spec)
    with pytest.raises(StoreInputError) as info:
        store.trial_events(spec.job_id, after=bad)
    assert info.value.field == "cursor"


def test_a_cursor_of_another_job_is_refused(tmp_path, spec):
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(spec)
    other = spec.with_changes(job_id="other-job")
    store.ensure_job(other)
    with pytest.raises(StoreInputError):
        store.trial_events(other.job_id, after=store.trial_events(spec.job_id).cursor)


# A cursor read of an unchanged snapshot decodes only its names (streams._read_past_unchanged): the
# cases where that shortcut could count an event twice or trust damaged names.


def _compacted_with_cursor(store, spec) -> tuple[Store, str]:
    lazy = Store(store.backend, auto_compact_after=None)
    lazy.ensure_job(spec)
    lazy.begin_recurrence(spec.job_id, "run-a")
    _trial(lazy, spec, "run-a", 1)
    lazy.compact(spec.job_id)
    return lazy, lazy.trial_events(spec.job_id).cursor


def test_a_hint_put_again_for_a_compacted_record_does_not_return_its_event_again(store, spec):
    lazy, cursor = _compacted_with_cursor(store, spec)
    # A duplicated step (a KFP retry while the first pod runs) writes the same attempt after compaction
    # deleted its hint: create_record puts the hint again, then finds the record taken.
    for stream in ("dispatched", "finished"):
        record = lazy.backend.get(keys.record_key(spec.job_id, stream, "run-a.0001"))
        assert events.create_record(lazy.backend, spec.job_id, stream, "run-a", 1, record) == record
        assert lazy.backend.list(keys.events_dir(spec.job_id, stream))  # the hint is back
    _trial(lazy, spec, "run-a", 2)
    found = lazy.trial_events(spec.job_id, after=cursor)
    assert not found.reset and lazy.problems == []
    assert _names(found.dispatched) == _names(found.finished) == ["run-a.0002"]
    again = lazy.trial_events(spec.job_id, after=found.cursor)
    assert again.dispatched.num_rows == again.finished.num_rows == 0


def test_a_cursor_read_with_nothing_new_over_its_unchanged_snapshot_does_not_fetch_the_snapshot(store, spec):
    """Every listed hint is a record the cursor already read: nothing to check against the snapshot, so
    nothing of it is fetched. Shown by deleting the snapshots and their names objects behind the store's
    back: a read that fetched either would report the snapshot lost and rebuild (`reset`). The next read
    that needs it reports the loss."""
    lazy, cursor = _compacted_with_cursor(store, spec)
    _trial(lazy, spec, "run-a", 2)
    found = lazy.trial_events(spec.job_id, after=cursor)
    assert _names(found.dispatched) == _names(found.finished) == ["run-a.0002"]
    marks = {stream: snapshots.latest_mark(lazy.backend, spec.job_id, stream) for stream in ("dispatched", "finished")}
    lazy.backend.delete([key for m in marks.values() for key in (m.snapshot, keys.snapshot_names_key(m.snapshot))])
    again = lazy.trial_events(spec.job_id, after=found.cursor)
    assert not again.reset and lazy.problems == []
    assert again.dispatched.num_rows == again.finished.num_rows == 0
    _trial(lazy, spec, "run-a", 3)
    with pytest.warns(match="missing"):
        later = lazy.trial_events(spec.job_id, after=again.cursor)
    assert later.reset and {p.key for p in lazy.problems} == {mark.snapshot for mark in marks.values()}


def _rewrite_snapshot(store, spec, stream: str, change) -> str:
    """Replace the stream's committed snapshot object by `change(table, metadata)`, keeping its key."""
    mark = snapshots.latest_mark(store.backend, spec.job_id, stream)
    table = pq.read_table(pa.BufferReader(store.backend.get(mark.snapshot)))
    table, metadata = change(table, dict(table.schema.metadata))
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(metadata), sink)
    store.backend.delete([mark.snapshot])
    assert store.backend.put_new(mark.snapshot, sink.getvalue().to_pybytes())
    return mark.snapshot


def test_damaged_names_in_an_unchanged_snapshot_are_reported_and_the_cut_read_from_the_records(store, spec):
    lazy, cursor = _compacted_with_cursor(store, spec)

    def rename(table, metadata):  # every other column and the metadata (both checksums) as written
        index = table.schema.get_field_index("_event")
        return table.set_column(index, "_event", pa.array(["run-a.0002"] * table.num_rows)), metadata

    damaged = _rewrite_snapshot(lazy, spec, "finished", rename)
    lazy.backend.delete([keys.snapshot_names_key(damaged)])  # as written before names objects: its column is read
    _trial(lazy, spec, "run-a", 2)
    with pytest.warns(match="not what was written"):
        found = lazy.trial_events(spec.job_id, after=cursor)
    assert damaged in {problem.key for problem in lazy.problems}
    assert found.reset and _names(found.finished) == _names(found.dispatched) == ["run-a.0001", "run-a.0002"]


@pytest.mark.parametrize("damage", ["garbled", "another snapshot's"])
def test_a_damaged_names_object_is_reported_and_the_snapshot_read_instead(store, spec, damage):
    lazy, cursor = _compacted_with_cursor(store, spec)
    mark = snapshots.latest_mark(lazy.backend, spec.job_id, "finished")
    names_key = keys.snapshot_names_key(mark.snapshot)
    if damage == "garbled":
        data = bytearray(lazy.backend.get(names_key))
        data[-3] ^= 0x01
        replacement = bytes(data)
    else:  # well formed, but for a snapshot of other rows than the mark committed
        replacement = snapshots.encode_names(pa.table({"_event": ["run-a.0001", "run-a.0002"]}), mark.checksum)
    lazy.backend.delete([names_key])
    assert lazy.backend.put_new(names_key, replacement)
    _trial(lazy, spec, "run-a", 2)
    with pytest.warns(match="names"):
        found = lazy.trial_events(spec.job_id, after=cursor)
    assert [p.key for p in lazy.problems] == [names_key]
    assert not found.reset and _names(found.dispatched) == _names(found.finished) == ["run-a.0002"]


def test_a_names_object_answers_which_names_its_snapshot_holds_exactly():
    """No name is found by being a part of another (the lines are whole names), and an empty snapshot
    holds nothing."""
    names = ["run-a.0001", "run-ab.0001", "b.0012"]
    _, _, held = snapshots.decode_names_object("k", snapshots.encode_names(pa.table({"_event": names}), "sum"))
    assert [held.holds(n) for n in [*names, "run-a.000", "un-a.0001", "b.001", "run-a.0001\nrun-ab.0001"]] == [
        True, True, True, False, False, False, False,
    ]  # fmt: skip
    asked = {*names, "run-a.000", "un-a.0001", "b.001", "run-a.0001\nrun-ab.0001"}
    assert len(asked) > snapshots.SEARCH_AT_MOST  # held() splits the object into a set here, searches below
    assert snapshots.held(held, asked) == set(names)
    assert snapshots.held(held, {"run-a.0001", "un-a.0001"}) == {"run-a.0001"}
    _, _, empty = snapshots.decode_names_object(
        "k", snapshots.encode_names(pa.table({"_event": pa.array([], pa.string())}), "")
    )
    assert not empty.holds("run-a.0001") and not empty.holds("")


def test_a_snapshot_written_without_a_names_checksum_is_read_whole(store, spec):
    lazy, cursor = _compacted_with_cursor(store, spec)
    for stream in ("dispatched", "finished"):
        _rewrite_snapshot(lazy, spec, stream, lambda table, meta: (table, {k: v for k, v in meta.items()
                                                                          if k != META_NAMES_CHECKSUM}))  # fmt: skip
        events.create_record(lazy.backend, spec.job_id, stream, "run-a", 1, b"")  # its hint again, as above
    _trial(lazy, spec, "run-a", 2)
    found = lazy.trial_events(spec.job_id, after=cursor)
    assert not found.reset and lazy.problems == []
    assert _names(found.dispatched) == _names(found.finished) == ["run-a.0002"]


def test_a_cursor_from_before_positions_named_their_snapshot_reads_the_same_events(store, spec):
    lazy, cursor = _compacted_with_cursor(store, spec)
    body = json.loads(base64.urlsafe_b64decode(cursor))
    older = {"v": 1, "job": body["job"]} | {stream: body[stream][:3] for stream in ("finished", "dispatched")}
    older_cursor = base64.urlsafe_b64encode(json.dumps(older).encode()).decode()
    _trial(lazy, spec, "run-a", 2)
    for after in (cursor, older_cursor):
        found = lazy.trial_events(spec.job_id, after=after)
        assert not found.reset and _names(found.dispatched) == _names(found.finished) == ["run-a.0002"]


@pytest.mark.parametrize("numbers", [range(1, 6), range(995, 1006)])  # within one folder, and across two
def test_the_top_number_after_a_known_one_is_the_top_of_a_full_listing(store, numbers):
    directory = keys.seq_dir("resnet-nightly", "trial")
    for number in numbers:
        assert store.backend.put_new(keys.seq_key("resnet-nightly", "trial", number), b"{}")
    assert ledger.top_number(store.backend, directory) == numbers[-1]
    for known in numbers:
        assert ledger.top_number(store.backend, directory, at_least=known) == numbers[-1]
    claimed = ledger.claim_number(store.backend, "resnet-nightly", "trial", {}, claimed=numbers[0])
    assert claimed == numbers[-1] + 1
