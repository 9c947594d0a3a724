"""The interleavings that once gave two answers or spurious warnings, each forced deterministically.

Each test wraps the real store function that opens the window (a fault-injection seam: the
wrapper runs the real code, then does what a concurrent process would do at that moment),
on both backends. Nothing of the store is faked; the "other process" is a second Store.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from zeus.job import TrialResult
from zeus.policy.base import Decision
from zeus.store import EventConflictError, Store, StoreError, StoreWarning, cuts, events, keys, open_store, snapshots

BIG = Decision(batch_size=128, cost_threshold=None, stage="exploration", reason="p1 decided 128")
SMALL = Decision(batch_size=64, cost_threshold=None, stage="exploration", reason="p2 decided 64")


def _done(spec, batch: int, energy_j: float = 100.0) -> TrialResult:
    return TrialResult.build(spec, batch_size=batch, status="reached", time_s=10.0, energy_j=energy_j, num_epochs=2)


@pytest.fixture
def quiet():
    """Any StoreWarning fails the test: these races must not produce spurious ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        yield


def _begin(store, spec, *rids: str) -> None:
    store.ensure_job(spec)
    for rid in rids:
        store.begin_recurrence(spec.job_id, rid)


@pytest.mark.parametrize("same_decision", [True, False], ids=["same-decision", "different-decision"])
def test_duplicated_bandit_steps_and_a_compactor_give_one_answer(store, spec, monkeypatch, quiet, same_decision):
    """P2 checks and finds nothing; P1 dispatches; a compactor merges P1's event; then P2 creates.
    P2 must be told P1's trial (or refused, if it decided otherwise), and every read must agree."""
    _begin(store, spec, "run-a")
    p1 = open_store(store.uri)
    real_find = events.find_dispatch
    interleaved = []

    def p2_checks_then_p1_and_a_compactor_run(*args, **kwargs):
        found = real_find(*args, **kwargs)
        if not interleaved:
            interleaved.append(True)
            p1.dispatch_trial(spec.job_id, "run-a", 1, BIG)
            p1.compact(spec.job_id)
            assert p1.backend.list(keys.events_dir(spec.job_id, "dispatched")) == []  # merged, hint deleted
        return found

    monkeypatch.setattr(events, "find_dispatch", p2_checks_then_p1_and_a_compactor_run)
    p2 = open_store(store.uri)
    if same_decision:
        assert p2.dispatch_trial(spec.job_id, "run-a", 1, BIG) == 1  # told P1's trial, not a new one
    else:
        with pytest.raises(EventConflictError) as info:
            p2.dispatch_trial(spec.job_id, "run-a", 1, SMALL)
        assert "128" in str(info.value) and info.value.key == keys.event_key(spec.job_id, "dispatched", "run-a", 1)
    monkeypatch.setattr(events, "find_dispatch", real_find)
    reader = open_store(store.uri)
    assert reader.get_dispatch(spec.job_id, "run-a", 1) == (1, BIG)
    for _ in ("before", "after another compaction"):
        trials = reader.trials(spec.job_id)
        assert trials[["trial", "batch_size"]].values.tolist() == [[1, 128]] and reader.problems == []
        reader.compact(spec.job_id)
    reader.finish_trial(spec.job_id, "run-a", 1, _done(spec, 128))
    assert reader.history(spec.job_id)[0].batch_size == 128


def test_a_retried_feedback_step_succeeds_after_other_recurrences_finished_trials(store, spec, tmp_path, quiet):
    """The retry recomputes the bandit state from a longer history; it must not fail (first wins)."""
    from zeus.steps.trial import feedback

    _begin(store, spec, "run-a", "run-b")
    store.dispatch_trial(spec.job_id, "run-a", 1, BIG)
    result_json = json.dumps(_done(spec, 128).to_dict())
    call = {"store_uri": store.uri, "job_id": spec.job_id, "recurrence_id": "run-a", "attempt": 1}
    call |= {"result_json": result_json, "profile_path": str(tmp_path / "none.parquet"), "policy": "default"}
    assert feedback(**call) is True
    first = store.bandit_state(spec.job_id)
    store.dispatch_trial(spec.job_id, "run-b", 1, SMALL)  # another recurrence finishes a trial meanwhile
    store.finish_trial(spec.job_id, "run-b", 1, _done(spec, 64, energy_j=50.0))
    store.compact(spec.job_id)
    assert feedback(**call) is True  # the retry
    pd.testing.assert_frame_equal(store.bandit_state(spec.job_id), first)  # the first snapshot is kept


def test_a_read_is_one_consistent_cut_across_the_two_trial_streams(store, spec, monkeypatch, quiet):
    """Between the read of one stream and the other, another recurrence dispatches and finishes a
    trial: the cut shows it in flight or not at all, never as "finished without dispatched"."""
    _begin(store, spec, "run-a", "run-b")
    store.dispatch_trial(spec.job_id, "run-a", 1, BIG)
    store.finish_trial(spec.job_id, "run-a", 1, _done(spec, 128))
    other = open_store(store.uri)
    real_read = cuts.read_stream
    interleaved = []

    def between_the_streams(backend, job_id, stream, after=None):
        read = real_read(backend, job_id, stream, after)
        if stream == cuts.CUT_STREAMS[0] and not interleaved:
            interleaved.append(stream)
            other.dispatch_trial(spec.job_id, "run-b", 1, SMALL)
            other.finish_trial(spec.job_id, "run-b", 1, _done(spec, 64))
        return read

    monkeypatch.setattr(cuts, "read_stream", between_the_streams)
    reader = Store(store.backend, auto_compact_after=None)
    trials = reader.trials(spec.job_id)
    assert reader.problems == []
    assert trials[["recurrence_id", "trial", "status"]].values.tolist() == [
        ["run-a", 1, "reached"],
        ["run-b", 2, "dispatched"],  # its finish came after this cut's finished stream was read
    ]
    monkeypatch.setattr(cuts, "read_stream", real_read)
    assert reader.trials(spec.job_id)["status"].tolist() == ["reached", "reached"]


def _fill(store, spec, rid: str, attempts: int) -> None:
    for attempt in range(1, attempts + 1):
        store.dispatch_trial(spec.job_id, rid, attempt, BIG)
        store.finish_trial(spec.job_id, rid, attempt, _done(spec, 128, energy_j=float(attempt)))


def test_a_reader_whose_snapshot_is_retired_under_it_reads_again_quietly(store, spec, monkeypatch, quiet):
    """Between choosing a snapshot and fetching it, a compaction commits a newer one and retires it."""
    _begin(store, spec, "run-a")
    _fill(store, spec, "run-a", 3)
    store.compact(spec.job_id)
    monkeypatch.setattr(snapshots, "GRACE_S", 0.0)  # retire at once: the slowest possible reader
    real_load = snapshots.load
    other = Store(open_store(store.uri).backend, auto_compact_after=None)
    races = []

    def a_compaction_lands_first(backend, stream, mark):
        if stream == "finished" and not races:  # once, for the reader (the compactor's loads pass)
            races.append(mark.generation)
            _fill(other, spec, "run-a", 4)  # one more trial (attempts 1-3 are no-ops)
            other.compact(spec.job_id)
        return real_load(backend, stream, mark)

    monkeypatch.setattr(snapshots, "load", a_compaction_lands_first)
    reader = Store(store.backend, auto_compact_after=None)
    trials = reader.trials(spec.job_id)
    assert races == [1] and reader.problems == []
    assert trials["energy_j"].tolist() == [1.0, 2.0, 3.0, 4.0]
    left = store.backend.list(keys.snapshots_dir(spec.job_id, "finished"))  # generation 1 retired, names too
    assert sorted((keys.snapshot_generation(k), k.rsplit(".", 1)[1]) for k in left) == [(2, "names"), (2, "parquet")]


def test_a_reader_that_never_catches_a_snapshot_fails_once_clearly(store, spec, monkeypatch):
    _begin(store, spec, "run-a")
    _fill(store, spec, "run-a", 1)
    store.compact(spec.job_id)
    monkeypatch.setattr(snapshots, "GRACE_S", 0.0)
    real_load = snapshots.load
    other = Store(open_store(store.uri).backend, auto_compact_after=None)
    rounds, busy = [], []

    def always_retired(backend, stream, mark):
        if stream == "finished" and not busy:  # the reader's loads, not the compactor's own
            busy.append(True)
            rounds.append(mark.generation)
            _fill(other, spec, "run-a", len(rounds) + 1)
            other.compact(spec.job_id)
            busy.clear()
        return real_load(backend, stream, mark)

    monkeypatch.setattr(snapshots, "load", always_retired)
    with pytest.raises(StoreError, match="no stable read of finished") as info:
        Store(store.backend, auto_compact_after=None).trials(spec.job_id)
    assert "4 times" in str(info.value) and len(rounds) == 4


def test_compaction_and_a_lost_answer_on_every_create_still_tell_each_caller_the_truth(store, spec, quiet):
    """Every create reaches the server but its answer is lost, and the retry is refused as existing
    (412): our own write, read back. Dispatch, finish, numbering and bulk import all still hold."""
    from zeus.store.bulk import import_trials

    class LostAnswers:
        def __init__(self, backend) -> None:
            self.backend = backend
            self.lost = 0

        def put_new(self, key: str, data: bytes) -> bool:
            created = self.backend.put_new(key, data)
            self.lost += created
            return False  # the create happened; the caller only sees the retry's 412

        def __getattr__(self, name: str):
            return getattr(self.backend, name)

    flaky = Store(LostAnswers(store.backend))
    history = pd.DataFrame(
        {"recurrence": [1, 2], "recurrence_id": ["old-1", "old-2"], "attempt": [1, 1], "batch_size": [64, 128],
         "status": ["reached", "not_reached"], "time_s": [1.0, 2.0], "energy_j": [3.0, 4.0], "num_epochs": [1, 2]}
    )  # fmt: skip
    assert import_trials(flaky, spec, history) == 2
    assert flaky.begin_recurrence(spec.job_id, "run-a") == 3
    assert flaky.dispatch_trial(spec.job_id, "run-a", 1, BIG) == 3
    flaky.finish_trial(spec.job_id, "run-a", 1, _done(spec, 128))
    flaky.compact(spec.job_id)
    assert flaky.backend.lost > 10
    trials = open_store(store.uri).trials(spec.job_id)
    assert trials[["recurrence", "trial", "status"]].values.tolist() == [
        [1, 1, "reached"],
        [2, 2, "not_reached"],
        [3, 3, "reached"],
    ]
    assert import_trials(store, spec, history) == 2  # and an import retried later is a no-op


def test_temp_files_of_a_killed_local_writer_are_ignored_then_collected(tmp_path, spec):
    """put_new writes a temp file and links it; a writer killed in between leaves the temp file."""
    import os
    import time

    store = open_store(str(tmp_path / "store"))
    _begin(store, spec, "run-a")
    _fill(store, spec, "run-a", 1)
    folder = tmp_path / "store" / keys.records_dir(spec.job_id, "finished")
    old, fresh = folder / ".tmp-killed-long-ago", folder / ".tmp-still-writing"
    old.write_bytes(b"half an event")
    fresh.write_bytes(b"half an event")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.backend.list(keys.records_dir(spec.job_id, "finished")) == [
        keys.event_key(spec.job_id, "finished", "run-a", 1)
    ]
    _fill(store, spec, "run-a", 2)
    store.compact(spec.job_id)
    assert not old.exists() and fresh.exists()


def test_a_symbolic_link_in_a_local_store_is_reported_not_followed(tmp_path, spec):
    store = open_store(str(tmp_path / "store"))
    _begin(store, spec, "run-a")
    _fill(store, spec, "run-a", 1)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(store.backend.get(keys.event_key(spec.job_id, "finished", "run-a", 1)))
    store.backend.put_new(keys.hint_key(spec.job_id, "finished", keys.event_name("run-a", 2)), b"")
    link = tmp_path / "store" / keys.event_key(spec.job_id, "finished", "run-a", 2)
    link.symlink_to(outside)
    with pytest.warns(StoreWarning, match="symbolic link"):
        trials = store.trials(spec.job_id)
    assert trials["attempt"].tolist() == [1]
    assert [p.key for p in store.problems] == [keys.event_key(spec.job_id, "finished", "run-a", 2)]


@pytest.mark.parametrize("bad", ["abc\n", "abc\n\n"])
def test_ids_with_a_trailing_newline_are_refused(store, spec, bad):
    from zeus.job import JobSpecError
    from zeus.store import StoreInputError

    with pytest.raises(StoreInputError) as info:
        store.trials(bad)
    assert info.value.field == "job_id"
    with pytest.raises(JobSpecError):
        spec.with_changes(job_id=bad)
    store.ensure_job(spec)
    with pytest.raises(StoreInputError) as info:
        store.begin_recurrence(spec.job_id, "run-a\n")
    assert info.value.field == "recurrence_id"
