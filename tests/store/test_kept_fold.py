"""The policy's kept fold in the store (zeus.steps.job_history, zeus.store.tallies), through the real
bandit and feedback steps, on both backends.

The oracle is the full path: `decide(spec, store.history(job), seed)` read just before each bandit
step, the policy folding the whole history from nothing. The steps read the kept fold plus the events
after its cursor; they must decide the same, with compactions in between, with overlapping
recurrences, and whatever happens to the kept fold (deleted, corrupt, another version, a reset cut).
"""

from __future__ import annotations

import json
import random
import warnings

import pytest

from zeus.job import TrialResult
from zeus.policy import get_policy
from zeus.policy.tally import TALLY_VERSION
from zeus.seeds import decision_seed
from zeus.steps import bandit, feedback
from zeus.steps.job_history import read_job_history
from zeus.store import StoreWarning, framing, keys
from zeus.store.schemas import encode_json

POLICY = "default"
COST = {32: 9.0, 64: 6.0, 128: 5.0, 256: 7.0}  # seconds per trial at each size (energy 100 W x that)


def _result(spec, batch_size: int, rng: random.Random) -> str:
    status = "reached" if rng.random() < 0.8 else "not_reached"
    time_s = COST[batch_size] * rng.uniform(0.9, 1.2)
    return TrialResult.build(spec, batch_size=batch_size, status=status, time_s=time_s, energy_j=100.0 * time_s,
                             num_epochs=3).to_json()  # fmt: skip


def _oracle(store, spec, rid: str):
    recurrence = store.recurrence_number(spec.job_id, rid)
    return get_policy(POLICY).decide(spec, store.history(spec.job_id), decision_seed(spec.seed, recurrence, 1))


def _start(store, spec, rid: str):
    store.begin_recurrence(spec.job_id, rid)
    expected = _oracle(store, spec, rid)
    choice = bandit(store_uri=store.uri, job_id=spec.job_id, recurrence_id=rid, attempt=1, policy=POLICY)
    assert choice.decision == expected, rid
    return choice


def _finish(store, spec, rid: str, batch_size: int, rng: random.Random) -> None:
    feedback(store_uri=store.uri, job_id=spec.job_id, recurrence_id=rid, attempt=1,
             result_json=_result(spec, batch_size, rng), profile_path="", policy=POLICY)  # fmt: skip
    arms = get_policy(POLICY).arm_states(spec, store.history(spec.job_id))  # the full path's view
    written = store.bandit_state(spec.job_id)
    written = written[written["recurrence_id"] == rid].sort_values("batch_size")
    assert written["num_observations"].tolist() == [a.num_observations for a in arms]
    assert written["posterior_mean"].fillna(-1).tolist() == [-1 if a.posterior_mean is None else a.posterior_mean
                                                              for a in arms]  # fmt: skip


def _run(store, spec, rng: random.Random, cycles: int, prefix: str) -> None:
    """Recurrences started and finished in a random overlap (up to 3 in flight), compacting now and then."""
    in_flight: list[tuple[str, int]] = []
    started = 0
    while started < cycles or in_flight:
        if in_flight and (started >= cycles or len(in_flight) >= 3 or rng.random() < 0.5):
            rid, batch = in_flight.pop(rng.randrange(len(in_flight)))
            _finish(store, spec, rid, batch, rng)
        else:
            rid = f"{prefix}{started}"
            in_flight.append((rid, _start(store, spec, rid).batch_size))
            started += 1
        if rng.random() < 0.2:
            store.compact(spec.job_id)


def test_the_steps_decide_from_the_kept_fold_as_from_the_whole_history(store, spec):
    store.ensure_job(spec)
    _run(store, spec, random.Random(5), cycles=10, prefix="r")
    kept = store.kept_tally(spec.job_id)
    assert kept is not None and kept.version == TALLY_VERSION
    history = read_job_history(store, spec, spec.job_id)
    assert not history.full and history.fold.tally.num_records == 10  # every trial folded, none in flight
    assert len(store.backend.list(keys.tally_dir(spec.job_id))) <= 2  # older kept folds are deleted


def _damage(store, job_id: str, how: str) -> None:
    (*_, newest) = store.backend.list(keys.tally_dir(job_id))
    if how == "deleted":
        store.backend.delete(store.backend.list(keys.tally_dir(job_id)))
    elif how == "corrupt":
        data = bytearray(store.backend.get(newest))
        data[len(data) // 2] ^= 0x20
        store.backend.delete([newest])
        store.backend.put_new(newest, bytes(data))
    elif how == "garbage-newest":  # named like the newest kept fold, not one
        store.backend.put_new(keys.tally_key(job_id, 10**9, "garbage"), b"\x00not json")
    elif how == "older-form":  # kept by a zeus-kfp before the tally's own header: a cache miss, not damage
        record = {"version": TALLY_VERSION, "job": job_id, "cursor": "", "fold": {}}
        store.backend.put_new(keys.tally_key(job_id, 10**9, "older"), encode_json(record))
    elif how == "base64-form":  # framed, but arrays as base64 in the JSON (before they went as bytes)
        record = {"version": TALLY_VERSION, "job": job_id, "cursor": "", "fold": {"arrays": {}}}
        store.backend.put_new(
            keys.tally_key(job_id, 10**9, "b64"), framing.frame(b"tally", json.dumps(record).encode())
        )
    elif how == "arrays-cut-short":  # a well-framed object whose arrays are shorter than its JSON says
        head = {"version": TALLY_VERSION, "job": job_id, "cursor": "", "fold": {}, "arrays": [["rec_id", "<i8", 4]]}
        body = json.dumps(head).encode() + b"\n" + bytes(8 * 3)
        store.backend.put_new(keys.tally_key(job_id, 10**9, "short"), framing.frame(b"tally", body))
    elif how == "other-version":  # a newer zeus-kfp's kept fold, of an empty history: must not be used
        fold = read_job_history(store, store.get_job(job_id), job_id).fold
        empty = type(fold).empty(fold.tally.spec)
        store.keep_tally(job_id, 10**9, store.trial_events(job_id).cursor, TALLY_VERSION + 1, *empty.to_parts())


@pytest.mark.parametrize(
    "how", ["deleted", "corrupt", "garbage-newest", "arrays-cut-short", "older-form", "base64-form", "other-version"]
)
def test_a_lost_or_damaged_kept_fold_changes_no_decision(store, spec, how):
    store.ensure_job(spec)
    rng = random.Random(11)
    _run(store, spec, rng, cycles=4, prefix="a")
    _damage(store, spec.job_id, how)
    if how in ("corrupt", "garbage-newest", "arrays-cut-short"):
        with pytest.warns(StoreWarning, match="tally"):  # reported by key, then read as no kept fold
            assert read_job_history(store, spec, spec.job_id).full
            _run(store, spec, rng, cycles=3, prefix="b")  # its first step finds it too, then replaces it
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", StoreWarning)  # nothing damaged: nothing to report
            assert read_job_history(store, spec, spec.job_id).full
            _run(store, spec, rng, cycles=3, prefix="b")
    assert not read_job_history(store, spec, spec.job_id).full  # the steps kept a new one


def test_a_reset_cut_refolds_the_whole_history(store, spec):
    store.ensure_job(spec)
    rng = random.Random(3)
    _run(store, spec, rng, cycles=4, prefix="a")
    store.compact(spec.job_id)
    for stream in ("dispatched", "finished"):  # lost snapshots: the stored cursor cannot be extended
        store.backend.delete(store.backend.list(keys.snapshots_dir(spec.job_id, stream)))
    with pytest.warns(match="missing"):
        store.trials(spec.job_id)  # a reader rebuilds the streams from their records
    assert read_job_history(store, spec, spec.job_id).full
    _run(store, spec, rng, cycles=3, prefix="b")


def test_a_kept_fold_deleted_under_its_reader_gives_way_to_the_one_below(store, spec, monkeypatch):
    """A writer deletes the newest kept fold between a reader's listing and its fetch (write_tally keeps
    only its own and the newest below it): the reader takes the one below, not a fold of everything."""
    store.ensure_job(spec)
    _run(store, spec, random.Random(3), cycles=6, prefix="a")
    listed = store.backend.list(keys.tally_dir(spec.job_id))
    assert len(listed) == 2
    real_get = store.backend.get

    def a_writer_deletes_the_newest_first(key: str) -> bytes:
        if key == listed[-1]:
            store.backend.delete([key])
        return real_get(key)

    monkeypatch.setattr(store.backend, "get", a_writer_deletes_the_newest_first)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        history = read_job_history(store, spec, spec.job_id)
    monkeypatch.undo()
    assert not history.full and store.backend.list(keys.tally_dir(spec.job_id)) == listed[:1]
    finished = store.trials(spec.job_id)
    assert history.fold.tally.num_records + len(history.fold.tail) == len(finished) == 6


def test_when_every_kept_fold_listed_is_gone_the_reader_lists_again(store, spec, monkeypatch):
    """Racing writers replace both kept folds the reader listed before it fetches either: it lists
    again and takes the new one, not a fold of everything."""
    store.ensure_job(spec)
    _run(store, spec, random.Random(3), cycles=6, prefix="a")
    listed = store.backend.list(keys.tally_dir(spec.job_id))
    assert len(listed) == 2
    newest = store.backend.get(listed[-1])
    replaced = keys.tally_key(spec.job_id, 6, "racer")
    real_get = store.backend.get

    def racing_writers_replace_both(key: str) -> bytes:
        if key in listed and store.backend.list(keys.tally_dir(spec.job_id)) == listed:
            store.backend.put_new(replaced, newest)
            store.backend.delete(listed)
        return real_get(key)

    monkeypatch.setattr(store.backend, "get", racing_writers_replace_both)
    history = read_job_history(store, spec, spec.job_id)
    monkeypatch.undo()
    assert not history.full and store.backend.list(keys.tally_dir(spec.job_id)) == [replaced]
    assert history.fold.tally.num_records + len(history.fold.tail) == len(store.trials(spec.job_id)) == 6
