"""The store's contract, once, run against both backends (local directory and S3 server)."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
from store_keys import hints

from zeus.job import JobSpec, TrialResult, TrialStatus
from zeus.policy.base import ArmState, Decision
from zeus.store import (
    CorruptObjectError,
    EventConflictError,
    JobSpecMismatchError,
    StoreInputError,
    UnknownJobError,
    UnknownTrialError,
    keys,
    open_store,
)

EXPLORE = Decision(batch_size=128, cost_threshold=None, stage="exploration", reason="default batch size first")


def result(spec: JobSpec, batch_size: int = 128, status: str = "reached", energy_j: float = 5_000.0) -> TrialResult:
    return TrialResult.build(
        spec, batch_size=batch_size, status=status, time_s=60.0, energy_j=energy_j, num_epochs=4, metric=0.91
    )


def test_ensure_job_creates_once_and_refuses_a_changed_spec(store, spec):
    assert store.ensure_job(spec, owner="alice") == spec
    assert store.ensure_job(spec, owner="alice") == spec  # a later recurrence: same spec, no-op
    assert store.get_job(spec.job_id) == spec
    changed = spec.with_changes(max_epochs=30, eta_knob=0.7)
    with pytest.raises(JobSpecMismatchError) as info:
        store.ensure_job(changed)
    message = str(info.value)
    assert "max_epochs: 20 -> 30" in message and "eta_knob: 0.5 -> 0.7" in message
    assert store.get_job(spec.job_id) == spec  # the stored spec is untouched
    with pytest.raises(UnknownJobError):
        store.get_job("no-such-job")


def test_list_jobs_filters_by_phase_and_owner(store, spec):
    store.ensure_job(spec, owner="alice")
    store.ensure_job(spec.with_changes(job_id="bert-weekly"), owner="bob")
    store.set_phase("bert-weekly", "completed")
    store.set_phase("resnet-nightly", "completed")
    store.set_phase("resnet-nightly", "running")  # latest wins
    jobs = store.list_jobs()
    assert dict(zip(jobs["job_id"], jobs["phase"], strict=True)) == {
        "bert-weekly": "completed",
        "resnet-nightly": "running",
    }
    assert jobs.loc[jobs["job_id"] == "resnet-nightly", "batch_sizes"].iloc[0] == [32, 64, 128, 256]
    assert store.list_jobs(phase="completed")["job_id"].tolist() == ["bert-weekly"]
    assert store.list_jobs(owner="alice")["job_id"].tolist() == ["resnet-nightly"]
    assert store.list_jobs(phase="completed", owner="alice").empty
    with pytest.raises(StoreInputError) as info:
        store.list_jobs(phase="done")
    assert info.value.field == "phase" and "completed" in info.value.allowed
    with pytest.raises(StoreInputError):
        store.set_phase("resnet-nightly", "paused")


def test_recurrence_numbers_are_idempotent_and_unique_when_started_together(store, spec):
    store.ensure_job(spec)
    assert store.begin_recurrence(spec.job_id, "run-a") == 1
    assert store.begin_recurrence(spec.job_id, "run-a") == 1  # a retried step
    got: dict[str, int] = {}
    barrier = threading.Barrier(6)

    def begin(rid: str) -> None:
        barrier.wait()
        got[rid] = open_store(store.uri).begin_recurrence(spec.job_id, rid)

    threads = [threading.Thread(target=begin, args=(f"run-{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got.values()) == [2, 3, 4, 5, 6, 7]
    assert {rid: store.begin_recurrence(spec.job_id, rid) for rid in got} == got


def test_dispatch_is_idempotent_and_refuses_a_different_decision(store, spec):
    store.ensure_job(spec)
    with pytest.raises(UnknownTrialError):
        store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)  # recurrence not begun
    store.begin_recurrence(spec.job_id, "run-a")
    assert store.get_dispatch(spec.job_id, "run-a", 1) is None
    assert store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE, kfp_run_id="kfp-1") == 1
    assert store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE, kfp_run_id="kfp-1") == 1
    assert store.get_dispatch(spec.job_id, "run-a", 1) == (1, EXPLORE)
    other = Decision(batch_size=64, cost_threshold=10.0, stage="exploration", reason="smaller")
    with pytest.raises(EventConflictError) as info:
        store.dispatch_trial(spec.job_id, "run-a", 1, other, kfp_run_id="kfp-1")
    assert info.value.key == keys.event_key(spec.job_id, "dispatched", "run-a", 1)
    assert store.dispatch_trial(spec.job_id, "run-a", 2, other) == 2
    assert store.trials(spec.job_id)["batch_size"].tolist() == [128, 64]


def test_finish_is_idempotent_and_never_overwrites(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    with pytest.raises(UnknownTrialError):
        store.finish_trial(spec.job_id, "run-a", 1, result(spec))
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    store.finish_trial(spec.job_id, "run-a", 1, result(spec))
    store.finish_trial(spec.job_id, "run-a", 1, result(spec))  # retried step: no-op
    with pytest.raises(EventConflictError) as info:
        store.finish_trial(spec.job_id, "run-a", 1, result(spec, energy_j=9_999.0))
    assert info.value.key == keys.event_key(spec.job_id, "finished", "run-a", 1)
    assert "energy_j: 5000.0 -> 9999.0" in str(info.value)
    with pytest.raises(StoreInputError) as bad:
        store.finish_trial(spec.job_id, "run-a", 1, result(spec, batch_size=64))
    assert bad.value.field == "batch_size"
    trials = store.trials(spec.job_id)
    assert len(trials) == 1 and trials.loc[0, "energy_j"] == 5_000.0
    assert len(store.backend.list(keys.events_dir(spec.job_id, "finished"))) == 1


def test_trials_frame_marks_unfinished_and_history_follows_it(store, spec):
    store.ensure_job(spec)
    for rid in ("run-a", "run-b"):
        store.begin_recurrence(spec.job_id, rid)
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    store.finish_trial(spec.job_id, "run-a", 1, result(spec, status="not_reached"))
    smaller = Decision(64, 20_000.0, "exploration", "next size down")
    store.dispatch_trial(spec.job_id, "run-a", 2, smaller)
    store.finish_trial(spec.job_id, "run-a", 2, result(spec, batch_size=64, energy_j=3_000.0))
    store.dispatch_trial(spec.job_id, "run-b", 1, smaller)  # in flight
    trials = store.trials(spec.job_id)
    assert trials[["recurrence", "trial", "attempt", "batch_size", "status", "finished", "reached"]].to_dict(
        "records"
    ) == [
        {"recurrence": 1, "trial": 1, "attempt": 1, "batch_size": 128, "status": "not_reached", "finished": True,
         "reached": False},
        {"recurrence": 1, "trial": 2, "attempt": 2, "batch_size": 64, "status": "reached", "finished": True,
         "reached": True},
        {"recurrence": 2, "trial": 3, "attempt": 1, "batch_size": 64, "status": "dispatched", "finished": False,
         "reached": False},
    ]  # fmt: skip
    assert trials.loc[1, "cost"] == pytest.approx(10_500.0)  # 0.5 x 3,000 J + 0.5 x 300 W x 60 s
    assert trials.loc[2, "cost_threshold"] == 20_000.0
    history = store.history(spec.job_id)
    assert [(h.recurrence, h.trial, h.batch_size, h.status) for h in history] == [
        (1, 1, 128, TrialStatus.NOT_REACHED),
        (1, 2, 64, TrialStatus.REACHED),
        (2, 3, 64, TrialStatus.DISPATCHED),
    ]
    assert history[1].cost == pytest.approx(10_500.0) and history[2].cost is None


def test_profiles_and_bandit_state_round_trip(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    profile = pd.DataFrame(
        {
            "phase": ["train", "train", "eval"],
            "power_limit_w": [300, 275, 275],
            "average_power_w": [280.0, 251.5, 240.0],
            "throughput": [900.0, 880.0, 2400.0],
            "simulated": [True, True, True],
        }
    )
    store.write_profile(spec.job_id, "run-a", 1, profile)
    store.write_profile(spec.job_id, "run-a", 1, profile)  # retried: no-op
    got = store.profiles(spec.job_id)
    assert len(got) == 3 and set(got["batch_size"]) == {128} and set(got["trial"]) == {1}
    assert got.loc[got["phase"] == "eval", "throughput"].tolist() == [2400.0]
    with pytest.raises(StoreInputError) as info:
        store.write_profile(spec.job_id, "run-a", 1, profile.assign(phase=["train", "warmup", "eval"]))
    assert info.value.field == "phase" and info.value.value == "warmup"
    with pytest.raises(StoreInputError) as info:
        store.write_profile(spec.job_id, "run-a", 1, profile.drop(columns=["throughput"]))
    assert "throughput" in str(info.value)

    arms = [ArmState(b, "exploration", 0, None, None, False) for b in spec.batch_sizes]
    store.write_bandit_state(spec.job_id, "run-a", 1, arms, None)
    store.dispatch_trial(spec.job_id, "run-a", 2, Decision(64, 1e4, "exploration", "down"))
    later = [ArmState(128, "exploitation", 2, -5_000.0, 0.5, False), ArmState(256, "exploitation", 0, None, None, True)]
    store.write_bandit_state(spec.job_id, "run-a", 2, later, 5_000.0)
    state = store.bandit_state(spec.job_id)
    assert state["batch_size"].tolist() == [128, 256] and state["pruned"].tolist() == [False, True]
    assert set(state["lowest_cost"]) == {5_000.0}
    assert len(store.bandit_state(spec.job_id, latest_only=False)) == 6


def _fill(store, spec, recurrences: int, attempts: int) -> None:
    for r in range(recurrences):
        rid = f"run-{r}"
        store.begin_recurrence(spec.job_id, rid)
        for a in range(1, attempts + 1):
            store.dispatch_trial(spec.job_id, rid, a, EXPLORE)
            store.finish_trial(spec.job_id, rid, a, result(spec, energy_j=1_000.0 * (r + a)))


def test_compaction_keeps_every_row_once_and_later_appends_show(store, spec):
    store.ensure_job(spec)
    _fill(store, spec, recurrences=3, attempts=3)
    before = store.trials(spec.job_id)
    store.compact(spec.job_id)
    assert hints(store, spec.job_id) == []  # merged into snapshots
    pd.testing.assert_frame_equal(store.trials(spec.job_id), before)
    store.compact(spec.job_id)  # nothing new: no-op
    pd.testing.assert_frame_equal(store.trials(spec.job_id), before)
    store.begin_recurrence(spec.job_id, "run-late")
    store.dispatch_trial(spec.job_id, "run-late", 1, EXPLORE)
    after = store.trials(spec.job_id)
    assert len(after) == 10 and after["trial"].tolist() == list(range(1, 11))
    assert after.iloc[-1]["status"] == "dispatched"
    # Retries of compacted trials: the same content is still a no-op, different content still refused.
    assert store.dispatch_trial(spec.job_id, "run-0", 1, EXPLORE) == 1
    store.finish_trial(spec.job_id, "run-0", 1, result(spec, energy_j=1_000.0))
    with pytest.raises(EventConflictError):
        store.dispatch_trial(spec.job_id, "run-0", 1, Decision(32, None, "x", "y"))
    with pytest.raises(EventConflictError):
        store.finish_trial(spec.job_id, "run-0", 1, result(spec, energy_j=7.0))
    assert len(store.trials(spec.job_id)) == 10


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "UPPER", "x" * 64, ".."])
def test_job_ids_cannot_escape_their_prefix(store, bad, tmp_path):
    with pytest.raises(StoreInputError) as info:
        store.trials(bad)
    assert info.value.field == "job_id"
    with pytest.raises(StoreInputError):
        store.begin_recurrence(bad, "run-a")
    with pytest.raises(StoreInputError):
        store.set_phase(bad, "running")


@pytest.mark.parametrize("bad", ["../../etc", "a/b", "a.b", "", "-x", "x" * 129])
def test_recurrence_ids_cannot_escape_their_prefix(store, spec, bad):
    store.ensure_job(spec)
    with pytest.raises(StoreInputError) as info:
        store.begin_recurrence(spec.job_id, bad)
    assert info.value.field == "recurrence_id" and "KFP run id" in info.value.allowed
    with pytest.raises(StoreInputError):
        store.dispatch_trial(spec.job_id, bad, 1, EXPLORE)
    with pytest.raises(StoreInputError) as info:
        store.dispatch_trial(spec.job_id, "run-a", 0, EXPLORE)
    assert info.value.field == "attempt"
    assert store.backend.list(keys.JOBS_DIR) == []  # nothing written anywhere


def test_a_job_without_trials_reads_as_empty_frames(store, spec):
    store.ensure_job(spec)
    trials = store.trials(spec.job_id)
    assert trials.empty and "status" in trials.columns and "cost" in trials.columns
    assert store.history(spec.job_id) == []
    assert store.profiles(spec.job_id).empty and store.bandit_state(spec.job_id).empty
    store.compact(spec.job_id)  # nothing to do, no error
    assert store.trials(spec.job_id).empty


def test_imported_history_reads_back_and_numbering_continues(store, spec):
    from zeus.store.bulk import import_trials

    history = pd.DataFrame(
        {
            "recurrence": [1, 1, 2],
            "recurrence_id": ["old-1", "old-1", "old-2"],
            "attempt": [1, 2, 1],
            "batch_size": [128, 64, 64],
            "status": ["not_reached", "reached", "reached"],
            "time_s": [10.0, 20.0, 30.0],
            "energy_j": [100.0, 200.0, 300.0],
            "num_epochs": [5, 3, 3],
        }
    )
    assert import_trials(store, spec, history) == 3
    store.begin_recurrence(spec.job_id, "new-run")
    assert store.begin_recurrence(spec.job_id, "new-run") == 3
    assert store.dispatch_trial(spec.job_id, "new-run", 1, EXPLORE) == 4
    trials = store.trials(spec.job_id)
    assert trials["trial"].tolist() == [1, 2, 3, 4]
    assert trials["status"].tolist() == ["not_reached", "reached", "reached", "dispatched"]
    assert trials.loc[2, "cost"] == pytest.approx(4_650.0)  # 0.5 x 300 J + 0.5 x 300 W x 30 s, recomputed
    assert import_trials(store, spec, history) == 3  # the same import again: a no-op
    assert store.trials(spec.job_id)["trial"].tolist() == [1, 2, 3, 4]
    with pytest.raises(Exception, match="already has trials"):
        import_trials(store, spec, history.assign(energy_j=1.0))
    with pytest.raises(StoreInputError) as closed:
        store.begin_recurrence(spec.job_id, "old-2")  # an imported recurrence takes no new trials
    assert closed.value.field == "recurrence_id"
    with pytest.raises(StoreInputError) as info:
        import_trials(store, spec.with_changes(job_id="other"), history.assign(status="dispatched"))
    assert info.value.field == "status"


def test_imported_ids_are_matched_whole_in_both_manifest_forms(store, spec):
    """An imported id is closed; an id it is only part of, or that is part of it, is not. The JSON
    manifest of earlier versions closes its ids the same way."""
    from zeus.store.bulk import import_trials
    from zeus.store.schemas import encode_json

    one = {"recurrence": 1, "attempt": 1, "batch_size": 64, "status": "reached", "time_s": 1.0, "energy_j": 1.0}
    import_trials(store, spec, pd.DataFrame([one | {"recurrence_id": "old-1", "num_epochs": 3}]))
    earlier = spec.with_changes(job_id="earlier-job")
    store.ensure_job(earlier)
    record = {"digest": "d", "trials": 1, "at": "2026-01-01T00:00:00+00:00", "recurrence_ids": ["old-1"]}
    store.backend.put_new(keys.import_key(earlier.job_id), encode_json(record))
    for job_id in (spec.job_id, earlier.job_id):
        with pytest.raises(StoreInputError, match="imported"):
            store.begin_recurrence(job_id, "old-1")
        for other in ("old-10", "old-", "ld-1"):
            store.begin_recurrence(job_id, other)
    key = keys.import_key(spec.job_id)
    garbled = store.backend.get(key).replace(b"old-1", b"old-2")  # the CRC no longer matches
    store.backend.delete([key])
    store.backend.put_new(key, garbled)
    with pytest.raises(CorruptObjectError) as info:  # never read as "nothing imported"
        store.begin_recurrence(spec.job_id, "old-2")
    assert info.value.key == key


def test_two_first_recurrences_with_different_specs_settle_on_one(store, spec):
    other = spec.with_changes(max_epochs=99)
    outcomes: dict[int, object] = {}
    barrier = threading.Barrier(2)

    def first_use(i: int, candidate: JobSpec) -> None:
        barrier.wait()
        try:
            outcomes[i] = open_store(store.uri).ensure_job(candidate)
        except JobSpecMismatchError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=first_use, args=(i, s)) for i, s in enumerate((spec, other))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winner = store.get_job(spec.job_id)
    assert winner in (spec, other)
    assert [outcomes[i] == winner for i in (0, 1)].count(True) == 1  # one caller got its spec stored
    loser = next(o for o in outcomes.values() if o != winner)
    assert isinstance(loser, JobSpecMismatchError) and "max_epochs" in str(loser)


def test_racing_different_results_first_wins_the_other_is_refused(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    outcomes: dict[float, object] = {}
    barrier = threading.Barrier(4)

    def finish(energy_j: float) -> None:
        barrier.wait()
        try:
            open_store(store.uri).finish_trial(spec.job_id, "run-a", 1, result(spec, energy_j=energy_j))
            outcomes[energy_j] = "stored"
        except EventConflictError as exc:
            outcomes[energy_j] = exc

    threads = [threading.Thread(target=finish, args=(e,)) for e in (1.0, 2.0, 3.0, 4.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [e for e, outcome in outcomes.items() if outcome == "stored"]
    assert len(winners) == 1, outcomes
    assert all(
        keys.event_key(spec.job_id, "finished", "run-a", 1) in str(o) for o in outcomes.values() if o != "stored"
    )
    assert store.trials(spec.job_id)["energy_j"].tolist() == winners


def test_a_foreign_object_among_the_hints_is_reported_and_changes_nothing(store, spec):
    """A copy of an event under another name (a manual copy, a stray tool) is not a trial: every
    reader names it and ignores it, before and after compaction, which leaves it for a person."""
    from zeus.store import StoreWarning

    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    store.finish_trial(spec.job_id, "run-a", 1, result(spec, energy_j=1_000.0))
    stray = keys.events_dir(spec.job_id, "finished") + "run-a.0001.copy.parquet"
    assert store.backend.put_new(stray, b"anything")
    for _ in ("loose", "compacted"):
        with pytest.warns(StoreWarning, match="foreign object"):
            trials = store.trials(spec.job_id)
        assert len(trials) == 1 and trials.loc[0, "energy_j"] == 1_000.0
        assert [p.key for p in store.problems] == [stray]
        with pytest.warns(StoreWarning):
            store.compact(spec.job_id)
        assert store.backend.list(keys.events_dir(spec.job_id, "finished")) == [stray]


def test_reads_compact_a_stream_once_it_has_many_loose_events(store, spec):
    from zeus.store import Store

    _fill(store, spec, recurrences=1, attempts=5)
    lazy = Store(store.backend, auto_compact_after=None)
    before = lazy.trials(spec.job_id)
    assert len(hints(lazy, spec.job_id)) == 10  # never compacts by itself
    eager = Store(store.backend, auto_compact_after=3)
    pd.testing.assert_frame_equal(eager.trials(spec.job_id), before)
    assert hints(eager, spec.job_id) == []  # both trial streams compacted
    pd.testing.assert_frame_equal(eager.trials(spec.job_id), before)


def test_a_job_in_the_old_layout_is_refused_not_read_as_empty(store, spec):
    """A store written before records and marks: a clear error, never an empty history."""
    from zeus.store import StoreError

    store.ensure_job(spec)
    old = keys.snapshots_dir(spec.job_id, "finished") + f"{3:012d}.parquet"  # layout 1: no token in the name
    store.backend.put_new(old, b"an old snapshot")
    with pytest.raises(StoreError, match="store layout 2") as info:
        store.history(spec.job_id)
    assert old in str(info.value)
