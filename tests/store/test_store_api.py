"""The store's contract, once, run against both backends (local directory and S3 server)."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

from zeus_kfp.job import Decision, JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store import (
    EventConflictError,
    JobSpecMismatchError,
    StoreInputError,
    UnknownJobError,
    UnknownTrialError,
    consensus,
    entries,
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


def test_a_spec_stored_while_it_held_the_gates_settings_still_reads_and_the_job_goes_on(store, spec):
    """A spec record agreed before the run settings left the JobSpec holds the gate's settings (zeus_kfp.run_settings):
    an agreed record never changes, so it is read as it is, those keys dropped, and the same job is accepted again.
    A changed job still is refused."""
    former = {"period_s": 3600.0, "max_running": 2, "drift_detector": "none", "drift_threshold": 0.0, "drift_data": ""}
    record = {"created_at": 1_700_000_000_000_000, "job_id": spec.job_id, "owner": "alice",
              "spec": spec.to_dict() | former}  # fmt: skip
    consensus.propose(store.backend, keys.spec_dir(spec.job_id), entries.encode(record))  # as zeus-kfp wrote it then
    reopened = open_store(store.uri)
    assert reopened.get_job(spec.job_id) == spec
    assert reopened.ensure_job(spec, owner="alice") == spec
    assert reopened.list_jobs()["job_id"].tolist() == [spec.job_id] and reopened.problems == []
    with pytest.raises(JobSpecMismatchError, match="max_epochs"):
        reopened.ensure_job(spec.with_changes(max_epochs=30))


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


def test_dispatch_is_idempotent_and_hands_out_the_recorded_decision(store, spec):
    """The first get_dispatch reads a job with nothing dispatched: columns without a chunk, on which pyarrow
    15-25's indices_nonzero crashed the interpreter. make test runs this file with pyarrow 15."""
    store.ensure_job(spec)
    with pytest.raises(UnknownTrialError):
        store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)  # recurrence not begun
    store.begin_recurrence(spec.job_id, "run-a")
    assert store.get_dispatch(spec.job_id, "run-a", 1) is None
    assert store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE, kfp_run_id="kfp-1") == (1, EXPLORE)
    assert store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE, kfp_run_id="kfp-1") == (1, EXPLORE)
    assert store.get_dispatch(spec.job_id, "run-a", 1) == (1, EXPLORE)
    other = Decision(batch_size=64, cost_threshold=10.0, stage="exploration", reason="smaller")
    # A twin bandit step that decided otherwise is handed what was recorded first, not an error.
    assert open_store(store.uri).dispatch_trial(spec.job_id, "run-a", 1, other, kfp_run_id="kfp-1") == (1, EXPLORE)
    assert store.dispatch_trial(spec.job_id, "run-a", 2, other) == (2, other)
    assert store.trials(spec.job_id)["batch_size"].tolist() == [128, 64]
    with pytest.raises(StoreInputError) as info:
        store.dispatch_trial(spec.job_id, "run-a", 3, {"batch_size": 64})
    assert info.value.field == "decision"


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
    assert "run-a attempt 1" in info.value.key
    assert "energy_j: 5000.0 -> 9999.0" in str(info.value) and "cost:" in str(info.value)
    with pytest.raises(StoreInputError) as bad:
        store.finish_trial(spec.job_id, "run-a", 1, result(spec, batch_size=64))
    assert bad.value.field == "batch_size"
    trials = store.trials(spec.job_id)
    assert len(trials) == 1 and trials.loc[0, "energy_j"] == 5_000.0


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


def test_profiles_round_trip_and_the_first_one_stands(store, spec):
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
    store.write_profile(spec.job_id, "run-a", 1, PowerProfile(profile))
    store.write_profile(spec.job_id, "run-a", 1, PowerProfile(profile))  # retried: no-op
    got = store.profiles(spec.job_id)
    assert len(got) == 3 and set(got["batch_size"]) == {128} and set(got["trial"]) == {1}
    assert got.loc[got["phase"] == "eval", "throughput"].tolist() == [2400.0]
    with pytest.raises(JobSpecError) as info:
        store.write_profile(spec.job_id, "run-a", 1, PowerProfile(profile.assign(phase=["train", "warmup", "eval"])))
    assert info.value.field == "phase" and info.value.value == "warmup"
    with pytest.raises(JobSpecError) as info:
        store.write_profile(spec.job_id, "run-a", 1, PowerProfile(profile.drop(columns=["throughput"])))
    assert "throughput" in str(info.value)

    later = profile.assign(average_power_w=[1.0, 2.0, 3.0])
    # a retried step's later one: first stands
    open_store(store.uri).write_profile(spec.job_id, "run-a", 1, PowerProfile(later))
    assert store.profiles(spec.job_id)["average_power_w"].tolist() == [280.0, 251.5, 240.0]


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
    first = store.compact(spec.job_id)
    assert first.written is not None and first.upto == 3 * 7  # 3 begins, 9 dispatches, 9 results
    fresh = open_store(store.uri)  # reads the snapshot, then only the slots after it
    pd.testing.assert_frame_equal(fresh.trials(spec.job_id), before)
    again = store.compact(spec.job_id)  # only the first one's `snapshot` entry is new: nothing to write
    assert again.written is None and again.upto == first.upto + 1 and again.deleted == 0
    pd.testing.assert_frame_equal(open_store(store.uri).trials(spec.job_id), before)
    store.begin_recurrence(spec.job_id, "run-late")
    store.dispatch_trial(spec.job_id, "run-late", 1, EXPLORE)
    after = store.trials(spec.job_id)
    assert len(after) == 10 and after["trial"].tolist() == list(range(1, 11))
    third = store.compact(spec.job_id)
    assert third.written is not None and third.deleted == 1  # the first snapshot, superseded
    assert after.iloc[-1]["status"] == "dispatched"
    # Retries of compacted trials: the same content is still a no-op, different content still refused.
    assert store.dispatch_trial(spec.job_id, "run-0", 1, EXPLORE) == (1, EXPLORE)
    store.finish_trial(spec.job_id, "run-0", 1, result(spec, energy_j=1_000.0))
    assert store.dispatch_trial(spec.job_id, "run-0", 1, Decision(32, None, "x", "y")) == (1, EXPLORE)
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
    assert store.backend.list(keys.log_dir(spec.job_id)) == []  # nothing written to the log


def test_a_job_without_trials_reads_as_empty_frames(store, spec):
    store.ensure_job(spec)
    trials = store.trials(spec.job_id)
    assert trials.empty and "status" in trials.columns and "cost" in trials.columns
    assert store.history(spec.job_id) == []
    assert store.profiles(spec.job_id).empty
    store.compact(spec.job_id)  # nothing to do, no error
    assert store.trials(spec.job_id).empty


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
    assert all("run-a attempt 1" in str(o) for o in outcomes.values() if o != "stored")
    assert store.trials(spec.job_id)["energy_j"].tolist() == winners


def test_a_foreign_object_in_the_log_is_ignored_and_changes_nothing(store, spec):
    """A stray object in a slot folder (a manual copy, a tool) is no block and no value: every reader
    ignores it, before and after compaction, and the slot's entry reads as agreed."""
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    store.dispatch_trial(spec.job_id, "run-a", 1, EXPLORE)
    store.finish_trial(spec.job_id, "run-a", 1, result(spec, energy_j=1_000.0))
    stray = keys.slot_dir(spec.job_id, 3) + "v.copy.json"
    store.backend.put(stray, b"anything")
    for _ in ("loose", "compacted"):
        trials = open_store(store.uri).trials(spec.job_id)
        assert len(trials) == 1 and trials.loc[0, "energy_j"] == 1_000.0
        store.compact(spec.job_id)
    assert stray in store.backend.list(keys.log_dir(spec.job_id))
