"""Lost, damaged, misplaced and hostile objects: detected, reported by key, and never read as something else.

Each damage is done behind the store's back, to the objects themselves, on both backends; the
store under test is then opened afresh (a new step's process), so nothing it remembers can help.
"""

from __future__ import annotations

import errno
import math
import os
import subprocess
import sys

import pandas as pd
import pytest

from zeus_kfp.job import Decision, JobSpec, JobSpecError, TrialResult
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store import (
    CorruptObjectError,
    JobSpecMismatchError,
    StoreError,
    StoreInputError,
    StoreUnavailableError,
    keys,
    open_store,
)
from zeus_kfp.store.backend import TEMP_MARK

EXPLORE = Decision(128, None, "exploration", "default batch size first")
PROFILE = pd.DataFrame(
    {"phase": ["train", "eval"], "power_limit_w": [300.0, 300.0], "average_power_w": [250.0, 240.0],
     "throughput": [900.0, 2400.0], "simulated": [True, True]}
)  # fmt: skip


def result(spec: JobSpec, energy_j: float = 5_000.0) -> TrialResult:
    return TrialResult.build(spec, batch_size=128, status="reached", time_s=60.0, energy_j=energy_j, num_epochs=4)


def filled(store, spec: JobSpec, recurrences: int = 2) -> None:
    store.ensure_job(spec)
    for r in range(1, recurrences + 1):
        rid = f"run-{r}"
        store.begin_recurrence(spec.job_id, rid)
        store.dispatch_trial(spec.job_id, rid, 1, EXPLORE)
        store.finish_trial(spec.job_id, rid, 1, result(spec, energy_j=1_000.0 * r))
        store.write_profile(spec.job_id, rid, 1, PowerProfile(PROFILE))


def slot_keys(store, spec: JobSpec, kind: str, recurrence_id: str) -> tuple[int, list[str]]:
    """The slot holding the `kind` entry of `recurrence_id`, and its keys."""
    import json

    for key in store.backend.list(keys.log_dir(spec.job_id)):
        if keys.basename(key).startswith("v."):
            entry = json.loads(store.backend.get(key))
            if entry["kind"] == kind and entry.get("recurrence_id") == recurrence_id:
                slot = keys.slot_of(key)
                assert slot is not None
                return slot, store.backend.list(keys.slot_dir(spec.job_id, slot))
    raise AssertionError(f"no {kind} entry of {recurrence_id}")


def expected(spec: JobSpec) -> list[tuple]:
    return [(1, 1, 128, "reached", 1_000.0), (2, 2, 128, "reached", 2_000.0)]


def read_back(uri: str, spec: JobSpec) -> list[tuple]:
    return read_back_with(open_store(uri), spec)


def test_a_lost_decided_value_is_found_again_from_its_blocks(store, spec):
    filled(store, spec)
    _, found = slot_keys(store, spec, "finished", "run-2")
    value = next(k for k in found if keys.basename(k).startswith("v."))
    store.backend.delete(value)
    assert read_back(store.uri, spec) == expected(spec)  # the phase-2 block holds the same entry
    assert value in store.backend.list(keys.log_dir(spec.job_id))  # and the reader wrote it back


def test_a_damaged_decided_value_is_reported_and_read_from_its_block(store, spec):
    filled(store, spec)
    _, found = slot_keys(store, spec, "finished", "run-1")
    value = next(k for k in found if keys.basename(k).startswith("v."))
    store.backend.put(value, store.backend.get(value).replace(b"1000.0", b"9000.0"))
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="checksum"):
        assert len(reader.trials(spec.job_id)) == 2
    assert [p.key for p in reader.problems] == [value]
    assert read_back(store.uri, spec) == expected(spec)


def test_a_slot_lost_whole_is_reported_never_silently_skipped(store, spec):
    filled(store, spec)
    slot, found = slot_keys(store, spec, "finished", "run-1")
    for key in found:
        store.backend.delete(key)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="no objects"):
        trials = reader.trials(spec.job_id)
    assert keys.slot_dir(spec.job_id, slot) in [p.key for p in reader.problems]
    assert trials["status"].tolist() == ["dispatched", "reached"]  # what is left of the log, nothing invented


@pytest.mark.parametrize("damage", ["lost", "emptied", "garbled"])
def test_a_lost_or_damaged_snapshot_is_reported_and_the_log_read_instead(store, spec, damage):
    filled(store, spec)
    written = store.compact(spec.job_id).written
    assert written is not None
    if damage == "lost":
        store.backend.delete(written)
    else:
        store.backend.put(written, b"" if damage == "emptied" else store.backend.get(written)[::-1])
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="gone" if damage == "lost" else "checksum"):
        assert read_back_with(reader, spec) == expected(spec)
    assert [p.key for p in reader.problems] == [written]
    store.compact(spec.job_id)  # a new snapshot, from the log
    assert read_back(store.uri, spec) == expected(spec)


def read_back_with(store, spec: JobSpec) -> list[tuple]:
    trials = store.trials(spec.job_id)[["recurrence", "trial", "batch_size", "status", "energy_j"]]
    return [tuple(row) for row in trials.astype(object).where(trials.notna(), None).itertuples(index=False)]


def test_an_entry_that_is_not_one_is_reported_by_key(store, spec):
    """Bytes whose checksum matches their key but that are no entry (a hand-made object): skipped, named."""
    filled(store, spec, recurrences=1)
    garbage = b'{"kind": "nonsense"}'
    slot = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(spec.job_id))) + 1
    key = f"{keys.slot_dir(spec.job_id, slot)}v.{keys.crc(garbage)}.json"
    store.backend.put(key, garbage)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="not a valid log entry"):
        assert len(reader.trials(spec.job_id)) == 1
    assert key in [p.key for p in reader.problems]


def test_bad_results_are_refused_naming_the_field_and_nothing_stored_changes(store, spec):
    filled(store, spec, recurrences=1)
    store.begin_recurrence(spec.job_id, "run-9")
    store.dispatch_trial(spec.job_id, "run-9", 1, EXPLORE)
    before = read_back(store.uri, spec)
    good = result(spec)
    for field, bad in (("energy_j", math.nan), ("time_s", -1.0), ("energy_j", math.inf), ("cost", -1e9)):
        with pytest.raises(JobSpecError) as info:
            TrialResult(**{**good.__dict__, field: bad})
        assert info.value.field == field
    with pytest.raises(JobSpecError) as info:
        TrialResult(**{**good.__dict__, "status": "dispatched"})
    assert info.value.field == "status"
    wrong_cost = TrialResult(**{**good.__dict__, "cost": good.cost / 2})  # well-formed, but not this job's cost
    with pytest.raises(JobSpecError) as info:
        store.finish_trial(spec.job_id, "run-9", 1, wrong_cost)
    assert info.value.field == "cost" and "\n" not in str(info.value)
    assert read_back(store.uri, spec) == before
    for frame, field in ((PROFILE.assign(average_power_w=[math.nan, 1.0]), "average_power_w"),
                         (PROFILE.assign(throughput=[0.0, 1.0]), "throughput")):  # fmt: skip
        with pytest.raises(JobSpecError) as info:
            store.write_profile(spec.job_id, "run-9", 1, PowerProfile(frame))
        assert info.value.field == field
    assert len(open_store(store.uri).profiles(spec.job_id)) == len(PROFILE)  # only run-1's


def test_a_lost_spec_is_reported_never_replaced(store, spec):
    filled(store, spec, recurrences=1)
    for key in store.backend.list(keys.spec_dir(spec.job_id)):
        store.backend.delete(key)
    reader = open_store(store.uri)
    with pytest.raises(CorruptObjectError) as info:
        reader.get_job(spec.job_id)
    assert info.value.key == keys.spec_dir(spec.job_id) and "log" in info.value.reason
    with pytest.raises(CorruptObjectError):
        reader.ensure_job(spec.with_changes(max_epochs=99))  # a changed spec does not slip in
    assert store.backend.list(keys.spec_dir(spec.job_id)) == []


def test_a_damaged_spec_value_is_read_from_its_block_and_a_misplaced_one_refused(store, spec):
    filled(store, spec, recurrences=1)
    value = next(k for k in store.backend.list(keys.spec_dir(spec.job_id)) if keys.basename(k).startswith("v."))
    store.backend.delete(value)
    assert open_store(store.uri).get_job(spec.job_id) == spec  # found again from the accepted block
    other = spec.with_changes(job_id="other-job")
    open_store(store.uri).ensure_job(other)
    theirs = store.backend.list(keys.spec_dir(other.job_id))
    for key in store.backend.list(keys.spec_dir(spec.job_id)):
        store.backend.delete(key)
    for key in theirs:  # another job's spec copied into this one's place
        store.backend.put(key.replace(keys.spec_dir(other.job_id), keys.spec_dir(spec.job_id)), store.backend.get(key))
    with pytest.raises(CorruptObjectError, match="other-job"):
        open_store(store.uri).get_job(spec.job_id)
    with pytest.warns(UserWarning, match="other-job"):
        jobs = open_store(store.uri).list_jobs()
    assert jobs["job_id"].tolist() == ["other-job"]  # listed once, not twice
    with pytest.raises(JobSpecMismatchError):
        open_store(store.uri).ensure_job(other.with_changes(max_epochs=3))


@pytest.mark.parametrize("kind", ["file", "null device", "nul byte"])
def test_a_store_path_that_is_no_directory_is_refused_naming_it(tmp_path, kind):
    path = {"file": str(tmp_path / "a-file"), "null device": os.devnull, "nul byte": str(tmp_path / "a\x00b")}[kind]
    if kind == "file":
        (tmp_path / "a-file").write_text("not a store")
    with pytest.raises(StoreInputError) as info:
        open_store(path)
    assert info.value.field == "store"


def test_an_unreadable_local_object_is_reported_not_raised(tmp_path, spec, monkeypatch):
    store = open_store(str(tmp_path / "store"))
    filled(store, spec)
    _, found = slot_keys(store, spec, "finished", "run-2")
    value = next(k for k in found if keys.basename(k).startswith("v."))
    denied = os.path.join(store.backend.location, value)
    real_open = os.open

    def permission_denied(path, flags, *args, **kwargs):  # root ignores file modes: stand in for EACCES
        if os.fspath(path) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", permission_denied)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="permission denied"):
        assert read_back_with(reader, spec) == expected(spec)  # read from the accepted block instead
    assert [p.key for p in reader.problems] == [value]


def test_temp_files_of_a_killed_writer_anywhere_are_ignored_then_collected(tmp_path, spec):
    store = open_store(str(tmp_path / "store"))
    filled(store, spec, recurrences=1)
    strays = [
        tmp_path / "store" / "jobs" / spec.job_id / "spec" / f"{TEMP_MARK}dead",
        tmp_path / "store" / f"{TEMP_MARK}x",
    ]
    for stray in strays:
        stray.write_bytes(b"half")
        os.utime(stray, (1, 1))  # written long ago
    assert len(open_store(store.uri).trials(spec.job_id)) == 1
    assert not any(TEMP_MARK in key for key in store.backend.list(""))
    assert store.compact(spec.job_id).deleted >= 2
    assert not any(stray.exists() for stray in strays)


def test_a_symbolic_link_in_a_local_store_is_reported_not_followed(tmp_path, spec):
    store = open_store(str(tmp_path / "store"))
    filled(store, spec)
    _, found = slot_keys(store, spec, "finished", "run-2")
    value = next(k for k in found if keys.basename(k).startswith("v."))
    secret = tmp_path / "secret.json"
    secret.write_bytes(store.backend.get(value))
    path = tmp_path / "store" / value
    path.unlink()
    path.symlink_to(secret)
    reader = open_store(store.uri)
    with pytest.warns(UserWarning, match="symbolic link"):
        assert read_back_with(reader, spec) == expected(spec)


def test_a_full_disk_names_the_store_and_loses_nothing(tmp_path, spec, monkeypatch):
    store = open_store(str(tmp_path / "store"))
    filled(store, spec, recurrences=1)
    before = read_back(store.uri, spec)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(StoreError) as info:
        open_store(store.uri).begin_recurrence(spec.job_id, "run-2")
    assert str(tmp_path / "store") in str(info.value) and "no space" in str(info.value)
    monkeypatch.undo()
    assert read_back(store.uri, spec) == before
    assert not any(TEMP_MARK in name for _, _, files in os.walk(tmp_path / "store") for name in files)


class FlakyPuts:
    """A local store whose writes under `prefix` fail as an S3 store that did not answer would (an error, not a
    refusal), while `failing` holds: a fault this machine can stage, at the moment a reader closes a hole."""

    def __init__(self, inner, prefix: str) -> None:
        self.inner, self.prefix, self.failing = inner, prefix, True

    def put(self, key: str, data: bytes) -> None:
        if self.failing and key.startswith(self.prefix):
            raise StoreUnavailableError("flaky.example", "bucket", 3, "timed out")
        self.inner.put(key, data)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_read_cut_short_by_an_error_keeps_every_row_it_passed(tmp_path, spec):
    """The read once advanced its prefix slot by slot but added the rows only after its loop, so an error
    on a later slot (closing a crashed writer's hole, the store not answering) left a Store that never saw the
    slots before it again: a trial shown dispatched for ever while a fresh read shows it finished."""
    writer = open_store(str(tmp_path / "store"))
    filled(writer, spec, recurrences=1)
    reader = open_store(writer.uri)
    assert len(reader.trials(spec.job_id)) == 1
    writer.begin_recurrence(spec.job_id, "run-2")
    writer.dispatch_trial(spec.job_id, "run-2", 1, EXPLORE)
    writer.finish_trial(spec.job_id, "run-2", 1, result(spec, energy_j=2_000.0))
    writer.write_profile(spec.job_id, "run-2", 1, PowerProfile(PROFILE))
    hole, found = slot_keys(writer, spec, "finished", "run-2")  # a slot whose writer crashed: no objects left
    for key in found:
        writer.backend.delete(key)
    flaky = FlakyPuts(reader.backend, keys.slot_dir(spec.job_id, hole))
    reader.backend = flaky
    with pytest.raises(StoreUnavailableError):
        reader.trials(spec.job_id)  # the slots before the hole are passed, then closing it fails
    flaky.failing = False
    again = read_back_with(reader, spec)  # the same Store, used again after the error
    assert again == read_back(writer.uri, spec)  # what a fresh reader sees
    assert [row[3] for row in again] == ["reached", "dispatched"]  # run-2's finish was the hole, closed as noop


def test_a_named_pipe_at_a_values_key_is_reported_not_waited_on(tmp_path, spec):
    """Opening a FIFO for reading waits for a writer for ever, so one planted at a decided value's key once
    blocked every reader of the job. It is a damaged value like any other: reported, read from its block."""
    store = open_store(str(tmp_path / "store"))
    filled(store, spec)
    _, found = slot_keys(store, spec, "finished", "run-1")
    value = next(k for k in found if keys.basename(k).startswith("v."))
    path = store.backend.root / value
    path.unlink()
    os.mkfifo(path)
    done = subprocess.run(  # in a process of its own: were it to block, the suite would not hang with it
        [sys.executable, "-c", "import sys; from zeus_kfp.store import open_store; "
         "s = open_store(sys.argv[1]); print(len(s.trials(sys.argv[2])), [p.key for p in s.problems])",
         store.uri, spec.job_id],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == ["2", f"[{value!r}]\n"]
