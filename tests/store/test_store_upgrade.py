"""Upgrades never change what was stored: a store written by earlier releases reads as its writers were told.

tests/data/store-format-1/ was written by c837984 (job `released`) and by e4ec5d2, before the field table (job
`older`, whose failed trial's reason is 11,735 characters: more than writers now store), each with its own code
(tests/store/write_upgrade_fixture.py). Its MANIFEST holds every object's SHA-256. Read with this code, every
object is still those bytes (reading writes nothing), every entry decodes to what its JSON says, and the jobs
read as their writers were told. A limit tightened since (text of at most 10,000 characters) applies to new
writes only: c837984 read `older`'s result as a noop, its trial as dispatched, and refused a retry of it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from zeus_kfp.job import JobSpec, TrialResult
from zeus_kfp.store import entries, keys, open_store

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "store-format-1"
TRACE = "Traceback (most recent call last):\n" + '  File "train.py", line 7, in <module>\n' * 300  # as written


def manifest(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "MANIFEST"
    }


def spec(job_id: str) -> JobSpec:
    return JobSpec(job_id=job_id, batch_sizes=(32, 64, 128), default_batch_size=128, target_metric=0.9, max_epochs=5)


@pytest.fixture
def copied(tmp_path) -> Path:
    """The fixture copied, so that nothing a read might write could reach the repository's copy."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "store"))


def test_the_fixture_is_the_bytes_its_writers_wrote():
    lines = (FIXTURE / "MANIFEST").read_text().splitlines()
    recorded = {name: digest for digest, name in (line.split("  ", 1) for line in lines)}
    assert manifest(FIXTURE) == recorded and len(recorded) == 52
    assert json.loads((FIXTURE / "told-released.json").read_text())["compacted"].endswith(".parquet")


def test_every_entry_an_earlier_release_wrote_decodes_to_what_its_json_says(copied):
    values = [p for p in (copied / "jobs").rglob("*.json") if "/log/" in p.as_posix()]
    assert len(values) == 2 * 14  # each slot's value and its phase-2 copy
    for path in values:
        key = path.relative_to(copied).as_posix()
        data = path.read_bytes()
        assert entries.decode(key, data) == json.loads(data), key
    older = json.loads(next((copied / "jobs/older/log/000000/000000000003").glob("v.*.json")).read_bytes())
    assert older["reason"] == TRACE and len(TRACE) == 11_735


def test_the_jobs_read_as_their_writers_were_told_and_reading_changes_no_byte(copied):
    store = open_store(str(copied))
    trials = store.trials("released")
    columns = ["trial", "recurrence_id", "attempt", "batch_size", "status", "time_s", "energy_j", "power_limit_w",
               "metric", "simulated", "reason", "source", "stage", "decision_reason", "kfp_run_id",
               "cost_threshold"]  # fmt: skip
    rows = [tuple(None if v != v else v for v in row) for row in trials[columns].itertuples(index=False, name=None)]
    assert rows == [
        (1, "run-1", 1, 128, "reached", 61.5, 12_345.0, 250.0, 0.93, True, "café: reached at epoch 4",
         "simulated (GPU model)", "exploration", "first", "kfp-run-1", None),
        (2, "run-2", 1, 64, "failed", 3.0, 90.0, None, None, False, "the script exited 1", "", "exploration", "next",
         "", 5_000.0),
        (3, "run-2", 2, 32, "dispatched", None, None, None, None, False, "", "", "exploration", "again", "", None),
    ]  # fmt: skip
    assert store.problems == []  # the snapshot c837984 wrote is used, not reported
    told = json.loads((copied / "told-released.json").read_text())
    assert [store.recurrence_number("released", f"run-{n}") for n in (1, 2, 3)] == [told[f"run-{n}"] for n in (1, 2, 3)]
    profile = store.profiles("released")
    assert list(zip(profile["phase"], profile["power_limit_w"], strict=True)) == [
        ("train", 300.0), ("train", 250.0), ("train", 200.0), ("eval", 250.0)
    ]  # fmt: skip
    gate = store.recurrences("released").iloc[0]
    said = (gate["recurrence_id"], gate["opened"], gate["drift_stat"], gate["drift_threshold"])
    assert said == ("run-1", True, 0.31, 0.2)
    jobs = store.list_jobs()
    assert list(zip(jobs["job_id"], jobs["owner"], jobs["phase"], strict=True)) == [
        ("older", "fixture", "running"), ("released", "fixture", "completed")
    ]  # fmt: skip
    assert store.get_job("released") == spec("released")
    older = store.trials("older")
    assert list(zip(older["status"], older["energy_j"], older["reason"], strict=True)) == [("failed", 700.0, TRACE)]
    assert len(store.history("older")) == 1
    retried = TrialResult.build(spec("older"), batch_size=128, status="failed", time_s=5.0, energy_j=700.0,
                                num_epochs=1, reason=TRACE)  # fmt: skip
    store.finish_trial("older", "run-1", 1, retried)  # a feedback step retried across the upgrade: no conflict
    assert manifest(copied) == manifest(FIXTURE)  # not one byte written, changed or added


def test_a_job_an_earlier_release_wrote_goes_on_under_this_one(copied):
    store = open_store(str(copied))
    store.finish_trial("released", "run-2", 2, TrialResult.build(spec("released"), batch_size=32, status="reached",
                                                                 time_s=7.0, energy_j=80.0, num_epochs=2))  # fmt: skip
    assert store.compact("released").written
    again = open_store(str(copied))
    assert again.trials("released")["status"].tolist() == ["reached", "failed", "reached"] and again.problems == []
    assert keys.parse_snapshot_key(again.backend.list(keys.snapshots_dir("released"))[-1])[0] == 12
