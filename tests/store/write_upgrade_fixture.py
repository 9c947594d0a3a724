"""Writes tests/data/store-format-1/: a store written by earlier zeus-kfp releases, which every later release of
store format 1 must read as it was written (tests/store/test_store_upgrade.py; docs/STORE.md, "Format").

Not part of the suite: the fixture is written once, by the old code, and kept. Each job is written by the
release named below, run as that checkout's zeus/ under the name zeus_kfp (the import must resolve to it,
which this script checks), through its public Store API only:

- job `released` by c837984 (the release before the store's edge fixes): a gated begin with a drift statistic,
  a dispatch, a power profile, a result whose reason is not ASCII, a compaction (a snapshot and its entry), a
  plain begin with a failed trial and a trial left dispatched, an ended recurrence, a phase;
- job `older` by e4ec5d2 (before the field table): a result whose reason is 11,735 characters, which
  c837984 reads as a noop, leaving its trial dispatched.

Then MANIFEST lists each object's key and SHA-256, and each job's folder holds what the writer was told.

    mkdir -p /tmp/rel/site && git archive c837984 | tar -x -C /tmp/rel && ln -s /tmp/rel/zeus /tmp/rel/site/zeus_kfp
    PYTHONPATH=/tmp/rel/site .venv/bin/python tests/store/write_upgrade_fixture.py released /tmp/fixture
    (the same with e4ec5d2 and `older`), then:
    .venv/bin/python tests/store/write_upgrade_fixture.py manifest /tmp/fixture
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

TRACE = "Traceback (most recent call last):\n" + '  File "train.py", line 7, in <module>\n' * 300  # 11,735 chars


def spec(job_id: str):  # the old release's JobSpec
    from zeus_kfp.job import JobSpec

    return JobSpec(job_id=job_id, batch_sizes=(32, 64, 128), default_batch_size=128, target_metric=0.9, max_epochs=5)


def released(root: Path) -> dict:
    """Job `released`, with c837984's API."""
    from zeus_kfp.job import Decision, TrialResult
    from zeus_kfp.profiles import PowerProfile
    from zeus_kfp.store import GateRequest, open_store

    job = spec("released")
    store = open_store(str(root))
    store.ensure_job(job, owner="fixture")
    request = GateRequest(0.0, 1, 2, 3600.0, False, "ks", 0.31, 0.2)
    told = {"run-1": store.open_recurrence(job.job_id, "run-1", request).recurrence}
    told["trial 1"] = store.dispatch_trial(job.job_id, "run-1", 1, Decision(128, None, "exploration", "first"),
                                           "kfp-run-1")[0]  # fmt: skip
    rows = [{"phase": "train", "power_limit_w": w, "average_power_w": w * 0.9, "throughput": w / 100.0,
             "simulated": True} for w in (300.0, 250.0, 200.0)]  # fmt: skip
    rows.append(
        {"phase": "eval", "power_limit_w": 250.0, "average_power_w": 180.0, "throughput": 4.0, "simulated": True}
    )
    store.write_profile(job.job_id, "run-1", 1, PowerProfile.of(rows))
    result = TrialResult.build(job, batch_size=128, status="reached", time_s=61.5, energy_j=12_345.0, num_epochs=4,
                               power_limit_w=250.0, metric=0.93, simulated=True, reason="café: reached at epoch 4",
                               source="simulated (GPU model)")  # fmt: skip
    store.finish_trial(job.job_id, "run-1", 1, result)
    told["compacted"] = store.compact(job.job_id).written
    told["run-2"] = store.begin_recurrence(job.job_id, "run-2")
    told["trial 2"] = store.dispatch_trial(job.job_id, "run-2", 1, Decision(64, 5_000.0, "exploration", "next"))[0]
    failed = TrialResult.build(job, batch_size=64, status="failed", time_s=3.0, energy_j=90.0, num_epochs=0,
                               reason="the script exited 1")  # fmt: skip
    store.finish_trial(job.job_id, "run-2", 1, failed)
    told["trial 3"] = store.dispatch_trial(job.job_id, "run-2", 2, Decision(32, None, "exploration", "again"))[0]
    told["run-3"] = store.begin_recurrence(job.job_id, "run-3")
    store.end_recurrence(job.job_id, "run-3", "the preprocess step failed")
    store.set_phase(job.job_id, "completed")
    return told


def older(root: Path) -> dict:
    """Job `older`, with e4ec5d2's API (no field table: a long reason is stored whole)."""
    from zeus_kfp.job import Decision, TrialResult
    from zeus_kfp.store import open_store

    job = spec("older")
    store = open_store(str(root))
    store.ensure_job(job, owner="fixture")
    told = {"run-1": store.begin_recurrence(job.job_id, "run-1")}
    told["trial 1"] = store.dispatch_trial(job.job_id, "run-1", 1, Decision(128, None, "exploration", "first"))[0]
    result = TrialResult.build(job, batch_size=128, status="failed", time_s=5.0, energy_j=700.0, num_epochs=1,
                               reason=TRACE)  # fmt: skip
    store.finish_trial(job.job_id, "run-1", 1, result)
    return told


def manifest(root: Path) -> None:
    lines = [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(root).as_posix()}"
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "MANIFEST"
    ]
    (root / "MANIFEST").write_text("\n".join(lines) + "\n")


def main() -> None:
    what, root = sys.argv[1], Path(sys.argv[2])
    if what == "manifest":
        manifest(root)
        return
    import zeus_kfp

    print(f"writing job {what!r} with the store code in {Path(zeus_kfp.__file__).parent}")
    told = {"released": released, "older": older}[what](root)
    (root / f"told-{what}.json").write_text(json.dumps(told, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
