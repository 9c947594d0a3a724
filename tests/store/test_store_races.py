"""The interleavings that could give two answers, each forced deterministically, on both backends.

The store's one agreement is a register (consensus.py); these tests drive proposers through every
order of their requests that matters, kill them between requests, lose their answers, and check
that every caller is told the one value the store keeps. Nothing of the store is faked: the
"other process" is a second Store, and a wrapped backend only decides when each real request runs.
"""

from __future__ import annotations

import json
import random
import threading
import warnings

import pytest

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import StoreError, StoreInputError, StoreUnavailableError, StoreWarning, consensus, keys, open_store
from zeus_kfp.store.store import Store

BIG = Decision(batch_size=128, cost_threshold=None, stage="exploration", reason="p1 decided 128")
SMALL = Decision(batch_size=64, cost_threshold=None, stage="exploration", reason="p2 decided 64")


def done(spec, batch: int, energy_j: float = 100.0) -> TrialResult:
    return TrialResult.build(spec, batch_size=batch, status="reached", time_s=10.0, energy_j=energy_j, num_epochs=2)


@pytest.fixture
def quiet():
    """Any StoreWarning fails the test: these races must not produce spurious ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        yield


class Scheduled:
    """A backend whose requests run in an order a seeded scheduler picks (each request waits its turn
    with a random pause first), so many proposers interleave differently on every seed."""

    def __init__(self, backend, seed: int) -> None:
        self.inner, self.random, self.lock = backend, random.Random(seed), threading.Lock()
        self.uri, self.location, self.parallel = backend.uri, backend.location, 1

    def _turn(self) -> None:
        with self.lock:
            pause = self.random.random() * 0.002
        threading.Event().wait(pause)

    def get(self, key):
        self._turn()
        return self.inner.get(key)

    def put(self, key, data):
        self._turn()
        return self.inner.put(key, data)

    def list(self, prefix, start_after=None):
        self._turn()
        return self.inner.list(prefix, start_after)

    def list_dirs(self, prefix):
        return self.inner.list_dirs(prefix)

    def delete(self, key):
        return self.inner.delete(key)


@pytest.mark.parametrize("seed", range(6))
def test_proposers_racing_on_one_register_all_learn_the_one_value(store, seed):
    directory = "jobs/race/spec/"
    values = [json.dumps({"proposer": i}).encode() for i in range(6)]
    learned: dict[int, bytes | None] = {}
    start = threading.Barrier(len(values))

    def propose(i: int) -> None:
        start.wait()
        learned[i] = consensus.propose(Scheduled(store.backend, seed * 100 + i), directory, values[i])

    threads = [threading.Thread(target=propose, args=(i,)) for i in range(len(values))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(learned.values())) == 1 and learned[0] in values
    assert consensus.propose(store.backend, directory, None) == learned[0]  # what any later reader learns
    decided = [k for k in store.backend.list(directory) if keys.basename(k).startswith("v.")]
    assert len(decided) == 1 and store.backend.get(decided[0]) == learned[0]


@pytest.mark.parametrize("seed", range(4))
def test_appenders_racing_for_slots_each_get_one_and_readers_agree(store, spec, seed, quiet):
    store.ensure_job(spec)
    rids = [f"run-{i}" for i in range(5)]
    numbers: dict[str, int] = {}
    start = threading.Barrier(len(rids))

    def begin(i: int) -> None:
        racer = Store(Scheduled(store.backend, seed * 100 + i))
        start.wait()
        numbers[rids[i]] = racer.begin_recurrence(spec.job_id, rids[i])

    threads = [threading.Thread(target=begin, args=(i,)) for i in range(len(rids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(numbers.values()) == [1, 2, 3, 4, 5]
    assert {rid: open_store(store.uri).recurrence_number(spec.job_id, rid) for rid in rids} == numbers


def test_twin_bandit_steps_both_hand_out_the_decision_recorded_first(store, spec, monkeypatch, quiet):
    """p1 looks and finds nothing, p2 dispatches meanwhile, p1 dispatches its own, different decision."""
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    p1, p2 = open_store(store.uri), open_store(store.uri)
    assert p1.get_dispatch(spec.job_id, "run-a", 1) is None
    assert p2.dispatch_trial(spec.job_id, "run-a", 1, SMALL) == (1, SMALL)
    assert p1.dispatch_trial(spec.job_id, "run-a", 1, BIG) == (1, SMALL)
    assert open_store(store.uri).trials(spec.job_id)["batch_size"].tolist() == [64]


def test_twins_that_both_append_before_either_reads_settle_on_the_first_slot(store, spec, monkeypatch, quiet):
    """Both twins' entries land in the log (each read before the other wrote); each, reading up to its own
    slot, finds the first and hands it out; readers ignore the second."""
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    p1, p2 = open_store(store.uri), open_store(store.uri)
    real_append = Store._append
    p2_done: dict[str, object] = {}

    def p1_append(self, read, entry):
        if self is p1 and not p2_done:  # p1 has read (nothing dispatched) and is about to append: p2 runs now
            p2_done["told"] = p2.dispatch_trial(spec.job_id, "run-a", 1, SMALL)
        return real_append(self, read, entry)

    monkeypatch.setattr(Store, "_append", p1_append)
    assert p1.dispatch_trial(spec.job_id, "run-a", 1, BIG) == (1, SMALL)
    assert p2_done["told"] == (1, SMALL)
    dispatched = [e for e in _entries(store, spec) if e["kind"] == "dispatched"]
    assert [e["batch_size"] for e in dispatched] == [64, 128]  # both in the log, the first one counts
    assert open_store(store.uri).history(spec.job_id)[0].batch_size == 64


def _entries(store, spec) -> list[dict]:
    found = []
    for key in store.backend.list(keys.log_dir(spec.job_id)):
        if keys.basename(key).startswith("v."):
            found.append(json.loads(store.backend.get(key)))
    return found


class Dies:
    """A backend that raises on the first PUT whose key matches, before (or after) making it: a proposer
    killed between two requests, or one whose answer was lost."""

    def __init__(self, backend, marker: str, after: bool) -> None:
        self.inner, self.marker, self.after, self.fired = backend, marker, after, False
        self.uri, self.location, self.parallel = backend.uri, backend.location, 1

    def put(self, key, data):
        if not self.fired and self.marker in keys.basename(key):
            self.fired = True
            if self.after:
                self.inner.put(key, data)
            raise StoreUnavailableError("127.0.0.1:1", "test", 1, "the answer was lost")
        return self.inner.put(key, data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize(
    ("marker", "after", "kept"),
    [(".1", False, False), (".1", True, False), (".2.", False, False), (".2.", True, True), ("v.", False, True)],
    ids=["before-phase-1", "after-phase-1", "before-phase-2", "after-phase-2", "before-commit"],
)
def test_a_dispatch_killed_between_requests_is_kept_exactly_when_accepted(store, spec, marker, after, kept, quiet):
    """Killed before its entry was accepted anywhere, a dispatch leaves a hole the next writer closes as
    noop; killed after, the next writer finds the entry and keeps it. Nobody was told either way, and the
    retried bandit step is then told what is stored."""
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    dying = Store(Dies(store.backend, marker, after))
    with pytest.raises(StoreUnavailableError):
        dying.dispatch_trial(spec.job_id, "run-a", 1, BIG)
    store.begin_recurrence(spec.job_id, "run-b")  # the next writer, after the dead one's slot
    retry = open_store(store.uri).dispatch_trial(spec.job_id, "run-a", 1, SMALL)
    assert retry == ((1, BIG) if kept else (1, SMALL))  # a closed hole is no trial: numbers stay dense
    history = open_store(store.uri).history(spec.job_id)
    assert [(h.recurrence, h.batch_size) for h in history] == [(1, retry[1].batch_size)]


def test_a_reader_whose_snapshot_is_deleted_under_it_reads_the_newer_one_quietly(store, spec, monkeypatch, quiet):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-a")
    store.dispatch_trial(spec.job_id, "run-a", 1, BIG)
    store.compact(spec.job_id)
    reader = open_store(store.uri)
    real_get = type(store.backend).get
    raced: list[str] = []

    def get(self, key):
        if "/snapshots/" in key and not raced:  # the reader listed this snapshot; a compactor replaces it now
            raced.append(key)
            store.begin_recurrence(spec.job_id, "run-b")
            store.compact(spec.job_id)
        return real_get(self, key)

    monkeypatch.setattr(type(store.backend), "get", get)
    assert [h.batch_size for h in reader.history(spec.job_id)] == [128]
    assert raced and reader.problems == []


def test_a_retried_feedback_step_succeeds_after_other_recurrences_finished_trials(store, spec, tmp_path, quiet):
    from zeus_kfp.steps.feedback import feedback

    store.ensure_job(spec)
    for rid in ("run-a", "run-b"):
        store.begin_recurrence(spec.job_id, rid)
    store.dispatch_trial(spec.job_id, "run-a", 1, BIG)
    call = {"store_uri": store.uri, "job_id": spec.job_id, "recurrence_id": "run-a", "attempt": 1}
    call |= {"result_json": json.dumps(done(spec, 128).to_dict()), "profile_path": str(tmp_path / "none.parquet")}
    assert feedback(**call) is True
    store.dispatch_trial(spec.job_id, "run-b", 1, SMALL)  # another recurrence finishes a trial meanwhile
    store.finish_trial(spec.job_id, "run-b", 1, done(spec, 64, energy_j=50.0))
    store.compact(spec.job_id)
    assert feedback(**call) is True  # the retry
    assert open_store(store.uri).trials(spec.job_id)["status"].tolist() == ["reached", "reached"]


def test_a_log_too_contended_to_agree_fails_once_clearly(store, spec, monkeypatch):
    store.ensure_job(spec)
    monkeypatch.setattr(consensus, "MAX_ROUNDS", 0)
    with pytest.raises(StoreError, match="no agreement"):
        consensus.propose(store.backend, keys.slot_dir(spec.job_id, 1), b"{}")


@pytest.mark.parametrize("bad", ["abc\n", "abc\n\n"])
def test_ids_with_a_trailing_newline_are_refused(store, spec, bad):
    from zeus_kfp.job import JobSpecError

    with pytest.raises(StoreInputError) as info:
        store.trials(bad)
    assert info.value.field == "job_id"
    with pytest.raises(JobSpecError):
        spec.with_changes(job_id=bad)
    store.ensure_job(spec)
    with pytest.raises(StoreInputError) as info:
        store.begin_recurrence(spec.job_id, "run-a\n")
    assert info.value.field == "recurrence_id"
