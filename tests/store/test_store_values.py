"""No value bricks a job: what cannot be read back is refused before it is proposed, and an entry planted
anyway is reported by key and skipped. Also: delete always works, and numpy numbers are taken as numbers.

Each test's bad value is one a user or a step could really send (a huge --max-running, a result.json whose
num_epochs overflows a 64-bit column, a NaN threshold, a numpy batch size from a notebook); each test reads
the job back afresh after it (a new step's process), which is where the damage showed before.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from zeus_kfp.job import Decision, JobSpec, JobSpecError, TrialResult
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.store import CorruptObjectError, GateRequest, StoreInputError, UnknownJobError, fields, keys, open_store
from zeus_kfp.store.errors import StoreFormatError

EXPLORE = Decision(128, None, "exploration", "default batch size first")
HUGE = 1180591620717411303424  # 2**70: the issue's --max-running


def good(store, spec: JobSpec, rid: str = "run-1") -> None:
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, rid)
    store.dispatch_trial(spec.job_id, rid, 1, EXPLORE)
    result = TrialResult.build(spec, batch_size=128, status="reached", time_s=60.0, energy_j=1_000.0, num_epochs=4)
    store.finish_trial(spec.job_id, rid, 1, result)


def trials_of(uri: str, spec: JobSpec) -> list[tuple]:
    frame = open_store(uri).trials(spec.job_id)
    return list(frame[["recurrence_id", "attempt", "batch_size", "status"]].itertuples(index=False, name=None))


def objects(store) -> list[str]:
    return sorted(store.backend.list("jobs/"))


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        (Decision(HUGE, None, "exploration", "x"), "batch_size"),
        (Decision("128", None, "exploration", "x"), "batch_size"),  # type: ignore[arg-type]
        (Decision(128, "cheap", "exploration", "x"), "cost_threshold"),  # type: ignore[arg-type]
        (Decision(128, math.nan, "exploration", "x"), "cost_threshold"),
        (Decision(128, math.inf, "exploration", "x"), "cost_threshold"),
        (Decision(128, None, 7, "x"), "stage"),  # type: ignore[arg-type]
    ],
)
def test_a_decision_that_could_not_be_read_back_is_refused_naming_the_field(store, spec, decision, field):
    good(store, spec)
    store.begin_recurrence(spec.job_id, "run-2")
    before, stored = trials_of(store.uri, spec), objects(store)
    with pytest.raises(StoreInputError) as info:
        store.dispatch_trial(spec.job_id, "run-2", 1, decision)
    assert info.value.field == field and "allowed" in str(info.value)
    assert objects(store) == stored  # nothing proposed
    assert trials_of(store.uri, spec) == before
    store.dispatch_trial(spec.job_id, "run-2", 1, EXPLORE)  # and the job goes on
    assert trials_of(store.uri, spec)[-1] == ("run-2", 1, 128, "dispatched")


def test_a_numpy_batch_size_and_threshold_are_numbers(store, spec):
    good(store, spec)
    store.begin_recurrence(spec.job_id, "run-2")
    trial, recorded = store.dispatch_trial(
        spec.job_id, "run-2", 1, Decision(np.int64(64), np.float64(2.5e4), "exploration", "from a notebook")
    )
    assert (trial, recorded.batch_size, recorded.cost_threshold) == (2, 64, 25_000.0)
    assert type(recorded.batch_size) is int
    assert open_store(store.uri).get_dispatch(spec.job_id, "run-2", 1) == (2, recorded)


def test_a_gate_request_beyond_its_column_is_refused_and_the_job_still_reads(store, spec):
    good(store, spec)
    before, stored = trials_of(store.uri, spec), objects(store)
    with pytest.raises(StoreInputError) as info:
        store.open_recurrence(spec.job_id, "run-2", GateRequest(0.0, HUGE, 2, 60.0))
    assert info.value.field == "max_running"
    assert objects(store) == stored and trials_of(store.uri, spec) == before


def test_a_spec_or_result_with_an_integer_beyond_64_bits_is_refused_where_it_is_made(spec):
    with pytest.raises(JobSpecError) as info:
        spec.with_changes(max_epochs=HUGE)
    assert info.value.field == "max_epochs"
    with pytest.raises(JobSpecError) as info:  # a run setting, stored in a gated begin's 64-bit column
        RunSettings(max_running=HUGE)
    assert info.value.field == "max_running" and str(2**63 - 1) in str(info.value)
    with pytest.raises(JobSpecError) as info:  # a user script's result.json may say so
        TrialResult.from_dict({"batch_size": 128, "status": "reached", "time_s": 1.0, "energy_j": 1.0,
                               "num_epochs": 10**20, "cost": 1.0})  # fmt: skip
    assert info.value.field == "num_epochs"


def plant(store, spec: JobSpec, entry: dict) -> str:
    """An entry with a valid checksum in the slot after the last: as a buggy writer would have got it agreed."""
    data = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    slot = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(spec.job_id))) + 1
    key = f"{keys.slot_dir(spec.job_id, slot)}v.{keys.crc(data)}.json"
    store.backend.put(key, data)
    return key


@pytest.mark.parametrize(
    "planted",
    [
        {"kind": "dispatched", "recurrence_id": "run-2", "attempt": 1, "batch_size": HUGE},
        {"kind": "dispatched", "recurrence_id": "run-2", "attempt": 1, "batch_size": "64"},
        {"kind": "dispatched", "recurrence_id": "run-2", "attempt": 1, "batch_size": 64, "stage": 3},
        {"kind": "finished", "recurrence_id": "run-1", "attempt": 1, "batch_size": 128, "status": "reached",
         "time_s": 1.0, "energy_j": 1.0, "num_epochs": 10**20, "cost": 1.0},
        {"kind": "begin", "recurrence_id": "run-2", "period_s": 0.0, "max_running": HUGE, "max_attempts": 2,
         "timeout_s": 60.0, "forced": False, "drift_detector": "none"},
        {"kind": "begin", "recurrence_id": "run-2", "period_s": 0.0, "max_running": 1, "max_attempts": 2,
         "timeout_s": 60.0, "forced": False, "drift_detector": "ks", "drift_stat": 0.5},  # no threshold to judge by
        {"kind": "finished", "recurrence_id": "run-2", "attempt": 1, "batch_size": 128, "status": "dispatched",
         "time_s": 1.0, "energy_j": 1.0, "num_epochs": 1, "cost": 1.0},  # would keep the trial out for ever
        {"kind": "snapshot", "snapshot": "x.parquet", "upto": "many"},
        {"kind": "profile", "recurrence_id": "run-1", "attempt": 1, "rows": "none"},
    ],
)  # fmt: skip
def test_a_planted_entry_of_the_wrong_type_is_reported_by_key_and_skipped(store, spec, planted):
    good(store, spec)
    store.begin_recurrence(spec.job_id, "run-2")
    before = trials_of(store.uri, spec)
    key = plant(store, spec, planted)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="not a valid log entry"):
        assert trials_of(store.uri, spec) == before
    reader.trials(spec.job_id)
    assert key in [p.key for p in reader.problems]
    reader.dispatch_trial(spec.job_id, "run-2", 1, EXPLORE)  # the job goes on past it
    reader.compact(spec.job_id)  # and compacts
    assert trials_of(store.uri, spec)[-1] == ("run-2", 1, 128, "dispatched")


def test_an_entry_of_a_newer_store_format_stops_the_read_and_says_to_upgrade(store, spec):
    good(store, spec)
    key = plant(store, spec, {"kind": "retried", "format": fields.FORMAT + 1, "recurrence_id": "run-1"})
    with pytest.raises(StoreFormatError, match="newer zeus-kfp") as info:
        open_store(store.uri).trials(spec.job_id)
    assert info.value.key == key
    assert open_store(store.uri).delete_job(spec.job_id) > 0  # delete still works


def test_delete_works_on_a_job_whose_spec_and_log_are_damaged(store, spec):
    good(store, spec)
    plant(store, spec, {"kind": "dispatched", "recurrence_id": "run-2", "attempt": 1, "batch_size": HUGE})
    for key in store.backend.list(keys.spec_dir(spec.job_id)):  # the value and its copy in the phase-2 block
        if key.endswith(".json"):
            store.backend.put(key, b"not the spec")
    with pytest.raises(CorruptObjectError):
        open_store(store.uri).get_job(spec.job_id)
    assert open_store(store.uri).delete_job(spec.job_id) > 0
    assert objects(store) == []
    with pytest.raises(UnknownJobError):
        open_store(store.uri).delete_job(spec.job_id)


def test_a_deleted_job_id_can_be_made_again_through_the_api(store, spec):
    good(store, spec)
    store.compact(spec.job_id)
    open_store(store.uri).delete_job(spec.job_id)
    assert open_store(store.uri).list_jobs().empty
    good(store, spec, rid="run-new")  # no "spec is gone but its log is not": no folder was left behind
    assert trials_of(store.uri, spec) == [("run-new", 1, 128, "reached")]
