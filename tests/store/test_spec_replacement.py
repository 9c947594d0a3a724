"""A job's spec is settled by its first reached trial, not its first run (zeus_kfp.store.gating, .specs), on both
backends: a changed spec replaces the job's while none of its trials has reached and nothing runs; after a reach it
is refused; two first runs with different specs still settle on one; nothing under the old spec reaches the new
one's history; a format-1 reader stops at a replacing begin; a format-1 snapshot still reads."""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pytest

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import GateRequest, JobSpecMismatchError, UnknownTrialError, fields, keys, open_store, strays
from zeus_kfp.store import snapshot as snapshots
from zeus_kfp.store.entries import FORMAT_1_COLUMNS, ROW_SCHEMA
from zeus_kfp.store.errors import StoreFormatError
from zeus_kfp.store.gating import spec_text


def ask(store, spec, rid: str, **reads) -> object:
    """A run's gate: present `spec` (and how its script reports), as zeus_kfp.steps.gate does."""
    request = GateRequest(period_s=0.0, max_running=1, max_attempts=2, timeout_s=86400.0,
                          spec=spec_text(spec.to_dict()), **reads)  # fmt: skip
    return store.open_recurrence(spec.job_id, rid, request)


def trial(store, spec, rid: str, attempt: int, status: str, batch_size: int = 128) -> None:
    store.dispatch_trial(spec.job_id, rid, attempt, Decision(batch_size, None, "exploration", "test"))
    result = TrialResult.build(spec, batch_size=batch_size, status=status, time_s=2.0, energy_j=100.0, num_epochs=3)
    store.finish_trial(spec.job_id, rid, attempt, result)


def test_a_changed_spec_replaces_one_no_trial_reached_under_and_the_history_starts_afresh(store, spec):
    typo = spec.with_changes(metric_name="acuracy")
    assert store.spec_change(typo) == {}  # the first run registers its spec
    assert ask(store, typo, "r1").why == "first"
    trial(store, typo, "r1", 1, "failed")  # the script never reported 'acuracy'
    assert store.spec_change(spec) == {"metric_name": ("acuracy", "accuracy")}  # not settled: may be taken
    with pytest.raises(JobSpecMismatchError, match="through its recurrence gate"):
        store.ensure_job(spec)  # only a run's gate takes it
    took = ask(store, spec, "r2")
    assert (took.opened, took.why, took.recurrence) == (True, "spec replaced", 2)
    assert store.get_job(spec.job_id) == spec and open_store(store.uri).get_job(spec.job_id) == spec
    assert store.trials(spec.job_id).empty and store.history(spec.job_id) == []  # the old trial compared nothing
    (left,) = store.replaced_trials(spec.job_id).itertuples()
    assert (left.recurrence, left.status) == (1, "failed")
    assert [(n, s.metric_name) for n, s in store.spec_history(spec.job_id)] == [(None, "acuracy"), (2, "accuracy")]
    trial(store, spec, "r2", 1, "reached")
    assert list(store.trials(spec.job_id)["trial"]) == [2]  # numbers never change
    begins = [json.loads(store.backend.get(k)) for k in store.backend.list(keys.log_dir(spec.job_id)) if "/v." in k]
    formats = {b["recurrence_id"]: b.get("format", 1) for b in begins if b["kind"] == "begin"}
    assert formats == {"r1": 1, "r2": fields.BEGIN_SPEC_FORMAT}  # a reader blind to `spec` stops at r2
    assert ask(store, spec, "r3").why == "time"  # the same spec again: an ordinary recurrence


def test_after_a_reached_trial_a_changed_spec_is_refused_naming_what_helps(store, spec):
    assert store.spec_change(spec) == {}
    assert ask(store, spec, "r1").why == "first"
    trial(store, spec, "r1", 1, "reached")
    changed = spec.with_changes(target_metric=0.95)
    with pytest.raises(JobSpecMismatchError) as info:
        store.spec_change(changed)
    message = str(info.value)
    assert "\n" not in message and "settled by its trial 1" in message and "target_metric: 0.9 -> 0.95" in message
    assert f"`zeus-kfp delete {spec.job_id}`" in message and "new --job-id" in message
    raced = ask(store, changed, "r2")  # a run that checked before the reach and asks after it
    assert (raced.opened, raced.why) == (False, "spec settled")
    assert store.get_job(spec.job_id) == spec


def test_a_changed_spec_waits_while_a_recurrence_runs(store, spec):
    store.spec_change(spec)
    assert ask(store, spec, "r1").why == "first"
    trial(store, spec, "r1", 1, "not_reached")  # one attempt of two: r1 still runs
    changed = spec.with_changes(max_epochs=5)
    assert store.spec_change(changed)  # not settled
    assert ask(store, changed, "r2").why == "spec in use"
    trial(store, spec, "r1", 2, "not_reached")  # its attempts are spent: nothing runs
    assert ask(store, changed, "r3").why == "spec replaced"
    with pytest.raises(UnknownTrialError, match="replaced"):  # r1 opened under the old spec: nothing more of it
        store.dispatch_trial(spec.job_id, "r1", 3, Decision(128, None, "exploration", "late"))


def test_two_first_runs_with_different_specs_still_settle_on_one(store, spec):
    other = spec.with_changes(max_epochs=99)
    outcomes: dict[int, object] = {}
    barrier = threading.Barrier(2)

    def first_run(i: int, candidate) -> None:
        mine = open_store(store.uri)
        barrier.wait()
        mine.spec_change(candidate)
        outcomes[i] = ask(mine, candidate, f"run-{i}")

    threads = [threading.Thread(target=first_run, args=(i, s)) for i, s in enumerate((spec, other))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    opened = [i for i, o in outcomes.items() if o.opened]
    assert len(opened) == 1 and outcomes[1 - opened[0]].why == "spec in use"
    assert store.get_job(spec.job_id) == (spec, other)[opened[0]]  # the one that runs is the job's


def test_a_late_result_under_a_replaced_spec_is_kept_apart_priced_by_its_own_spec(store, spec):
    cheap = spec.with_changes(eta_knob=1.0)  # another cost function: its results price differently
    store.spec_change(spec)
    store.open_recurrence(spec.job_id, "r1", GateRequest(0.0, 1, 2, 0.0, spec=spec_text(spec.to_dict())))
    store.dispatch_trial(spec.job_id, "r1", 1, Decision(128, None, "exploration", "test"))
    # r1 went quiet (timeout 0 at the next ask): a changed spec takes the job while r1's trial still trains
    took = store.open_recurrence(spec.job_id, "r2", GateRequest(0.0, 1, 2, 0.0, spec=spec_text(cheap.to_dict())))
    assert took.why == "spec replaced"
    late = TrialResult.build(spec, batch_size=128, status="reached", time_s=2.0, energy_j=100.0, num_epochs=3)
    store.finish_trial(spec.job_id, "r1", 1, late)  # priced by r1's spec: accepted, kept
    assert store.trials(spec.job_id).empty
    assert store.replaced_trials(spec.job_id)["status"].tolist() == ["reached"]


def test_a_reader_of_store_format_1_stops_at_a_replacing_begin(store, spec, monkeypatch):
    store.spec_change(spec)
    ask(store, spec, "r1")
    with monkeypatch.context() as older:
        older.setattr(fields, "FORMAT", 1)
        open_store(store.uri).trials(spec.job_id)  # no replacing begin: format 1 reads it all
    trial(store, spec, "r1", 1, "failed")
    ask(store, spec.with_changes(max_epochs=3), "r2")
    with monkeypatch.context() as older, pytest.raises(StoreFormatError, match="newer zeus-kfp"):
        older.setattr(fields, "FORMAT", 1)
        open_store(store.uri).trials(spec.job_id)


def test_a_snapshot_in_store_format_1_reads_with_the_new_columns_null(store, spec):
    store.spec_change(spec)
    ask(store, spec, "r1")
    trial(store, spec, "r1", 1, "reached")
    store.compact(spec.job_id)
    (key,) = store.backend.list(keys.snapshots_dir(spec.job_id))
    upto = keys.parse_snapshot_key(key)[0]
    made = strays.incarnation(store.backend, spec.job_id)
    table = snapshots.decode(key, store.backend.get(key), spec.job_id, made)
    old = table.select(ROW_SCHEMA.names[:FORMAT_1_COLUMNS]).cast(pa.schema(list(ROW_SCHEMA)[:FORMAT_1_COLUMNS]))
    data = snapshots.encode(old, spec.job_id, upto, made)
    store.backend.delete(key)
    store.backend.put(keys.snapshot_key(spec.job_id, upto, keys.crc(data)), data)
    reader = open_store(store.uri)
    assert reader.trials(spec.job_id)["status"].tolist() == ["reached"] and reader.problems == []
    assert reader.get_job(spec.job_id) == spec  # the begin's spec read as null: the spec in force is the first


def test_how_the_script_reports_is_the_latest_recurrences(store, spec):
    store.spec_change(spec)
    assert store.reads(spec.job_id) is None
    ask(store, spec, "r1", zeus_aware=False, metric_pattern=r"acc=(?P<value>\S+)", metrics_collector="", keep="ck/*")
    trial(store, spec, "r1", 1, "reached")
    ask(store, spec, "r2")  # a run that did not say (an older writer): the job's stays
    assert store.reads(spec.job_id) == {"zeus_aware": False, "metric_pattern": r"acc=(?P<value>\S+)",
                                        "metrics_collector": "", "keep": "ck/*", "recurrence": 1}  # fmt: skip
    trial(store, spec, "r2", 1, "reached")
    ask(store, spec, "r3", zeus_aware=False, metric_pattern="", metrics_collector="", keep="")
    assert store.reads(spec.job_id)["keep"] == "" and store.reads(spec.job_id)["recurrence"] == 3
