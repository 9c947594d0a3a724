"""The store's edges: nothing a trial, a script or a planted object holds bricks a job, and a local store's
path is the directory it names.

- A value is refused or stored whole, never stored unreadable: the field table checks what Arrow and the JSON
  encoding need (UTF-8 text, numbers that fit their column), and what a trial or its script hands in (a reason,
  a failure message) is made storable (escaped or cut, saying so) so the trial's figures are always stored.
- Reads report and skip, never raise raw: an entry, a snapshot's rows and its metadata each go through the field
  table; a kept Store moves only with the rows it built.
- Local paths and URIs round-trip, or are refused in one line.

Each test fails on c837984 (the release before): there a lone surrogate raised UnicodeEncodeError from Arrow on
every read, an integer too large for a float raised OverflowError, deep JSON RecursionError, snapshot metadata
that is not UTF-8 UnicodeDecodeError, a forged snapshot's `weird` status was shown, and `store.uri` of a
directory whose name is not UTF-8 opened another one. tests/store/reproduce_defects.py keeps the reproductions.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from zeus_kfp.cli import app
from zeus_kfp.job import Decision, JobSpec, TrialResult
from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes
from zeus_kfp.store import CorruptObjectError, StoreInputError, keys, open_store
from zeus_kfp.store.entries import checked

EXPLORE = Decision(128, None, "exploration", "default batch size first")
NOT_UTF8 = os.fsdecode(b"caf\xe9.csv")  # a file name that is not UTF-8, as os.fsdecode gives it
TRACEBACK = "Traceback (most recent call last):\n" + '  File "train.py", line 9, in step\n' * 400 + "OSError: disk"


def result(spec: JobSpec, energy_j: float = 1_000.0, reason: str = "", status: str = "reached") -> TrialResult:
    return TrialResult.build(spec, batch_size=128, status=status, time_s=60.0, energy_j=energy_j, num_epochs=4,
                             reason=reason)  # fmt: skip


def trial(store, spec: JobSpec, rid: str, **kwargs) -> None:
    store.begin_recurrence(spec.job_id, rid)
    store.dispatch_trial(spec.job_id, rid, 1, EXPLORE)
    store.finish_trial(spec.job_id, rid, 1, result(spec, **kwargs))


def shown(uri: str, spec: JobSpec, *columns: str) -> list[tuple]:
    frame = open_store(uri).trials(spec.job_id)
    return list(frame[["recurrence_id", "status", "energy_j", *columns]].itertuples(index=False, name=None))


def plant(store, spec: JobSpec, data: bytes) -> str:
    """Bytes with a valid checksum as the decided value of the slot after the last: a buggy or older writer's."""
    slot = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(spec.job_id))) + 1
    key = f"{keys.slot_dir(spec.job_id, slot)}v.{keys.crc(data)}.json"
    store.backend.put(key, data)
    return key


def canonical(entry: dict) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()


# -- what a trial or a script hands in is stored ------------------------------------------------------------


def test_a_reason_naming_a_file_that_is_not_utf8_is_stored_escaped_and_the_job_reads_on(store, spec):
    store.ensure_job(spec)
    trial(store, spec, "run-1", reason=f"could not read {NOT_UTF8}")
    expected = "could not read caf\\udce9.csv [zeus-kfp: characters that were not UTF-8 are shown as \\u escapes]"
    assert shown(store.uri, spec, "reason") == [("run-1", "reached", 1_000.0, expected)]
    trial(store, spec, "run-2", energy_j=2_000.0)  # the job goes on: dispatch, finish and compaction all read it
    open_store(store.uri).compact(spec.job_id)
    assert [row[:3] for row in shown(store.uri, spec)] == [("run-1", "reached", 1_000.0), ("run-2", "reached", 2_000.0)]
    store.finish_trial(spec.job_id, "run-1", 1, result(spec, reason=f"could not read {NOT_UTF8}"))  # a retry: no-op


def test_a_scripts_failure_message_over_the_limit_is_cut_saying_so_and_its_figures_are_stored(store, spec):
    store.ensure_job(spec)
    assert len(TRACEBACK) == 14_048
    trial(store, spec, "run-1", energy_j=3_500.0, status="failed", reason=TRACEBACK)
    [(rid, status, energy, reason)] = shown(store.uri, spec, "reason")
    assert (rid, status, energy, len(reason)) == ("run-1", "failed", 3_500.0, 10_000)
    assert reason.startswith("Traceback (most recent call last):\n") and reason.endswith("OSError: disk")
    note = " [zeus-kfp: 4,087 characters cut here] "  # 14,048 less the 9,961 kept beside the note's 39
    assert note in reason and len(reason.replace(note, "")) == 10_000 - 39


def test_an_end_reason_is_made_storable_too(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-1")
    store.end_recurrence(spec.job_id, "run-1", f"the step failed reading {NOT_UTF8}")
    entry = json.loads(store.backend.get(max(store.backend.list(keys.log_dir(spec.job_id)))))
    assert entry["kind"] == "end" and entry["reason"].startswith("the step failed reading caf\\udce9.csv [zeus-kfp:")


def test_text_no_trial_hands_in_is_refused_naming_the_field_and_nothing_is_stored(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-1")
    before = store.backend.list(keys.job_dir(spec.job_id))
    with pytest.raises(StoreInputError) as info:
        store.dispatch_trial(spec.job_id, "run-1", 1, Decision(128, None, f"stage {NOT_UTF8}", "x"))
    assert info.value.field == "stage" and "UTF-8" in str(info.value)
    assert store.backend.list(keys.job_dir(spec.job_id)) == before


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"kind": "finished", "recurrence_id": "r", "attempt": 1, "batch_size": 1, "status": "reached",
          "time_s": 10**400, "energy_j": 1.0, "num_epochs": 1, "cost": 1.0}, "time_s"),  # beyond a float64
        ({"kind": "begin", "recurrence_id": "r", "period_s": 10**309, "max_running": 0, "max_attempts": 2,
          "timeout_s": 1.0, "forced": False, "drift_detector": "none"}, "period_s"),
        ({"kind": "end", "recurrence_id": "r", "at": 10**5000}, "at"),  # more digits than Python prints
    ],
)  # fmt: skip
def test_a_number_that_does_not_fit_its_column_is_refused_naming_it(entry, field):
    with pytest.raises(StoreInputError) as info:
        checked(entry)
    assert info.value.field == field


def test_the_int64_maximum_is_printed_exactly(store, spec):
    store.ensure_job(spec)
    store.begin_recurrence(spec.job_id, "run-1")
    with pytest.raises(StoreInputError) as info:
        store.dispatch_trial(spec.job_id, "run-1", 1, Decision(2**70, None, "exploration", "x"))
    assert "from 1 to 9223372036854775807" in str(info.value) and "808" not in str(info.value)


# -- reads report and skip ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "planted",
    [
        canonical({"kind": "finished", "recurrence_id": "run-1", "attempt": 1, "batch_size": 128, "status":
                   "reached", "time_s": 10**400, "energy_j": 1.0, "num_epochs": 1, "cost": 1.0}),
        b'{"kind":"noop","deep":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"kind":"dispatched","recurrence_id":"run-2","attempt":1,"batch_size":' + b"9" * 5_000 + b"}",
    ],
    ids=["an integer too large for a float", "JSON nested 200,000 deep", "an integer of 5,000 digits"],
)  # fmt: skip
def test_a_planted_entry_is_reported_by_key_and_skipped_and_delete_still_works(store, spec, planted):
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    key = plant(store, spec, planted)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="not"):
        assert reader.trials(spec.job_id)["recurrence_id"].tolist() == ["run-1"]
    assert key in [p.key for p in reader.problems]
    trial(open_store(store.uri), spec, "run-2", energy_j=2_000.0)  # the job goes on past it
    assert [row[:3] for row in shown(store.uri, spec)] == [("run-1", "reached", 1_000.0), ("run-2", "reached", 2_000.0)]
    assert open_store(store.uri).delete_job(spec.job_id) > 0


def test_an_older_writers_lone_surrogate_reads_escaped_and_a_kept_store_moves_only_with_its_rows(store, spec):
    """c837984 agreed such an entry (json escapes it as \\udce9); its readers then raised from Arrow, and a Store
    kept open across the error had moved past the slot without its rows: the trial showed dispatched for ever."""
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    kept = open_store(store.uri)
    kept.trials(spec.job_id)
    store.begin_recurrence(spec.job_id, "run-2")
    store.dispatch_trial(spec.job_id, "run-2", 1, EXPLORE)
    older = {
        "kind": "finished",
        "recurrence_id": "run-2",
        "attempt": 1,
        "at": 1_796_476_495_553_080,
        "reason": f"could not read {NOT_UTF8}",
    } | {k: v for k, v in result(spec, 2_000.0).to_dict().items() if k not in ("reached", "reason")}
    plant(store, spec, json.dumps(older, sort_keys=True, separators=(",", ":")).encode())
    expected = ("run-2", "reached", 2_000.0, "could not read caf\\udce9.csv [zeus-kfp: characters that were not "
                "UTF-8 are shown as \\u escapes]")  # fmt: skip
    assert shown(store.uri, spec, "reason")[-1] == expected
    frame = kept.trials(spec.job_id)
    assert (
        list(frame[["recurrence_id", "status", "energy_j", "reason"]].itertuples(index=False, name=None))[-1]
        == expected
    )


def test_snapshot_metadata_that_is_not_utf8_is_reported_and_the_log_read(store, spec):
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    written = store.compact(spec.job_id).written
    table = read_parquet_bytes(store.backend.get(written))
    data = parquet_bytes(table.replace_schema_metadata(dict(table.schema.metadata) | {b"zeus_kfp.job_id": b"\xff"}))
    forged = keys.snapshot_key(spec.job_id, keys.parse_snapshot_key(written)[0] + 1, keys.crc(data))
    store.backend.put(forged, data)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match=r"belongs to job '\\xff', not"):
        assert len(reader.trials(spec.job_id)) == 1
    assert forged in [p.key for p in reader.problems]


def forge(store, spec: JobSpec, change) -> str:
    """A snapshot with this job's metadata and a valid checksum whose rows `change` altered, covering one slot
    more than the newest (its key names it as the newest)."""
    written = store.compact(spec.job_id).written
    table = read_parquet_bytes(store.backend.get(written))
    rows = change(table.to_pylist())
    upto = keys.parse_snapshot_key(written)[0] + 1
    rows.append({"slot": upto, "kind": "noop"})
    meta = dict(table.schema.metadata) | {b"zeus_kfp.upto": str(upto).encode()}
    data = parquet_bytes(
        pa.Table.from_pylist(rows, schema=table.schema.remove_metadata()).replace_schema_metadata(meta)
    )
    key = keys.snapshot_key(spec.job_id, upto, keys.crc(data))
    store.backend.put(key, data)
    return key


def _set(rows: list[dict], of_kind: str, **values) -> list[dict]:
    return [row | values if row["kind"] == of_kind else row for row in rows]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda rows: _set(rows, "finished", status="weird"), "status"),
        (lambda rows: _set(rows, "finished", time_s=float("nan")), "time_s"),
        (lambda rows: _set(rows, "finished", energy_j=None), "energy_j"),
        (lambda rows: _set(rows, "dispatched", recurrence_id="not an id"), "recurrence_id"),
        (lambda rows: _set(rows, "dispatched", attempt=0), "attempt"),
        (lambda rows: _set(rows, "begin", kind="retried"), "kind"),
    ],
)
def test_a_forged_snapshots_rows_pass_the_field_table_or_the_log_is_read(store, spec, change, field):
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    key = forge(store, spec, change)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match=f"field table refuses: {field}="):
        history = reader.history(spec.job_id)  # c837984: a raw ValueError for `weird`, or `weird` shown
    assert key in [p.key for p in reader.problems]
    assert [(t.trial, t.status.value, t.energy_j) for t in history] == [(1, "reached", 1_000.0)]
    assert shown(store.uri, spec) == [("run-1", "reached", 1_000.0)]


@pytest.mark.parametrize(
    "record",
    [
        b'{"created_at":1,"job_id":"resnet-nightly","owner":"x","spec":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"created_at":' + str(2**62).encode() + b',"job_id":"resnet-nightly","owner":"x","spec":SPEC}',
        b'{"created_at":1,"job_id":"resnet-nightly","owner":7,"spec":SPEC}',
    ],
    ids=["nested 200,000 deep", "created after the year 9999", "an owner that is no text"],
)
def test_a_planted_spec_record_is_reported_never_a_raw_error(store, spec, record):
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    [value] = [k for k in store.backend.list(keys.spec_dir(spec.job_id)) if keys.basename(k).startswith("v.")]
    record = record.replace(b"SPEC", json.dumps(spec.to_dict()).encode())
    for key in store.backend.list(keys.spec_dir(spec.job_id)):
        store.backend.delete(key)
    planted = f"{keys.spec_dir(spec.job_id)}v.{keys.crc(record)}.json"
    store.backend.put(planted, record)
    with pytest.raises(CorruptObjectError, match="not a readable job spec"):
        open_store(store.uri).get_job(spec.job_id)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="not a readable job spec"):
        assert reader.list_jobs().empty
    assert [p.key for p in reader.problems] == [planted] and value != planted
    assert open_store(store.uri).delete_job(spec.job_id) > 0


def test_a_snapshot_whose_spec_is_removed_is_not_called_an_earlier_jobs(store, spec):
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    written = store.compact(spec.job_id).written
    for key in store.backend.list(keys.spec_dir(spec.job_id)):
        store.backend.delete(key)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning):
        reader.trials(spec.job_id)
    [reason] = [p.reason for p in reader.problems if p.key == written]
    assert "no spec of it is listed" in reason and "earlier job" not in reason


def test_a_damaged_accepted_proposal_in_an_undecided_slot_stops_reads_naming_it_and_the_rule(store, spec):
    """No reader may close such a slot (its entry may have been decided): the read stops, saying how to recover."""
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    slot = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(spec.job_id)))
    hole = keys.slot_dir(spec.job_id, slot + 1)
    accepted = canonical({"kind": "begin", "recurrence_id": "run-2"})
    block = f"{hole}b.000001.{'a' * 16}.2.{keys.crc(accepted)}.json"
    store.backend.put(f"{hole}b.000001.{'a' * 16}.1", b"")
    store.backend.put(block, accepted.replace(b"run-2", b"run-3"))  # damaged: not the bytes its key names
    after = canonical({"kind": "noop"})
    store.backend.put(f"{keys.slot_dir(spec.job_id, slot + 2)}v.{keys.crc(after)}.json", after)
    with pytest.raises(CorruptObjectError) as info:
        open_store(store.uri).trials(spec.job_id)
    assert info.value.key == block and "rule R11" in str(info.value) and "checksum" in str(info.value)
    assert open_store(store.uri).delete_job(spec.job_id) > 0


def test_cli_delete_force_works_on_any_damage(tmp_path, spec):
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    store.compact(spec.job_id)
    plant(store, spec, b'{"kind":"noop","deep":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    for key in store.backend.list(keys.spec_dir(spec.job_id)):
        if key.endswith(".json"):
            store.backend.put(key, b"\xff not a spec")
    done = CliRunner().invoke(app, ["delete", spec.job_id, "--store", store.uri, "--force", "--yes"])
    assert done.exit_code == 0, done.output
    assert f"deleted job {spec.job_id}" in done.output
    assert store.backend.list("jobs/") == []


# -- local paths ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [b"st-caf\xe9", b"\xff\xfe", b"per%25cent", b"hash#and?query", b"sp ace"])
def test_a_local_store_directory_of_any_name_round_trips_through_its_uri(tmp_path, spec, name):
    path = tmp_path / os.fsdecode(name)
    store = open_store(str(path))
    store.ensure_job(spec)
    trial(store, spec, "run-1")
    again = open_store(store.uri)  # what `zeus-kfp run` hands its steps
    assert again.backend.root == path and again.uri == store.uri
    assert [row[:3] for row in shown(again.uri, spec)] == [("run-1", "reached", 1_000.0)]
    assert os.listdir(os.fsencode(tmp_path)) == [name]  # and no other directory was made


@pytest.mark.parametrize(
    ("uri", "said"),
    [("file:///tmp/a%00b", "no NUL characters (%00)"), ("~nosuchuser-zeus-kfp/store", "names no user here")],
)
def test_a_store_uri_that_names_no_directory_is_refused_in_one_line(uri, said):
    with pytest.raises(StoreInputError) as info:
        open_store(uri)
    assert info.value.field == "store" and said in str(info.value) and "\n" not in str(info.value)


def test_a_store_location_that_is_not_utf8_prints(tmp_path):
    store = open_store(str(tmp_path / os.fsdecode(b"st-caf\xe9")))
    assert store.backend.location.endswith("st-caf\\udce9")
    store.backend.location.encode("utf-8")  # a message naming it can be printed (c837984: UnicodeEncodeError)
