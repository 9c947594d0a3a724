"""The six store defects an adversarial run found at the edges, each as a reproduction that says whether it
still reproduces. Kept apart from the suite (pytest collects only test_*.py): the suite's tests of the same
behaviours are tests/store/test_store_edges.py, test_store_lifecycle.py and test_store_upgrade.py.

1. a lone surrogate in a trial's reason (a file name that is not UTF-8) bricks the job;
2. a compaction while its job is deleted and made again stamps the old job's rows as the new job's;
3. a local store path that is not UTF-8 opens another directory; `%00` and `~nosuchuser` raise raw errors;
4. planted objects (an integer too large for a float field, JSON nested 200,000 deep, snapshot metadata that
   is not UTF-8) end reads in raw errors;
5. a reader during a delete writes into the job being deleted, so the id cannot be made again;
6. an entry an older zeus-kfp wrote (a result reason over 10,000 characters) reads as a noop, and a script's
   long failure reason is refused, so its trial's figures are never stored.

Run:     .venv/bin/python tests/store/reproduce_defects.py        (seconds; exit status 1 if any reproduces)
Against another checkout's store code, e.g. the release before the fix (its zeus/ under the name zeus_kfp):
         mkdir -p /tmp/old/site && git archive c837984 | tar -x -C /tmp/old
         ln -s /tmp/old/zeus /tmp/old/site/zeus_kfp
         PYTHONPATH=/tmp/old/site .venv/bin/python tests/store/reproduce_defects.py
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

import zeus_kfp
from zeus_kfp.job import Decision, JobSpec, TrialResult
from zeus_kfp.parquet_bytes import parquet_bytes, read_parquet_bytes
from zeus_kfp.store import Store, StoreWarning, keys, open_store
from zeus_kfp.store.backend import LocalBackend

SPEC = JobSpec(job_id="edges", batch_sizes=(32, 64, 128), default_batch_size=128, target_metric=0.9, max_epochs=5)
EXPLORE = Decision(128, None, "exploration", "default batch size first")


def result(energy_j: float = 1_000.0, reason: str = "", status: str = "reached") -> TrialResult:
    return TrialResult.build(SPEC, batch_size=128, status=status, time_s=60.0, energy_j=energy_j, num_epochs=4,
                             reason=reason)  # fmt: skip


def trial(store: Store, rid: str, energy_j: float = 1_000.0, reason: str = "") -> None:
    store.begin_recurrence(SPEC.job_id, rid)
    store.dispatch_trial(SPEC.job_id, rid, 1, EXPLORE)
    store.finish_trial(SPEC.job_id, rid, 1, result(energy_j, reason))


def seen(uri: str) -> list[tuple]:
    frame = open_store(uri).trials(SPEC.job_id)
    return list(frame[["recurrence_id", "status", "energy_j"]].itertuples(index=False, name=None))


def plant(store: Store, entry: dict | bytes) -> str:
    """An object with a valid checksum in the slot after the last, as a buggy or older writer got it agreed."""
    data = entry if isinstance(entry, bytes) else json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    slot = max(keys.slot_of(k) or 0 for k in store.backend.list(keys.log_dir(SPEC.job_id))) + 1
    key = f"{keys.slot_dir(SPEC.job_id, slot)}v.{keys.crc(data)}.json"
    store.backend.put(key, data)
    return key


def raw(call: Callable[[], object]) -> str | None:
    """The raw error (not one of the store's own) a call raised, or None."""
    from zeus_kfp.store import StoreError
    from zeus_kfp.store.errors import JobSpecError

    try:
        call()
    except (StoreError, JobSpecError, LookupError):
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:100]}"
    return None


def lone_surrogate(root: Path) -> list[str]:
    store = open_store(str(root))
    store.ensure_job(SPEC)
    trial(store, "run-1")
    kept = open_store(store.uri)
    kept.trials(SPEC.job_id)  # a Store kept open across the error (the live-threshold feed)
    name = os.fsdecode(b"caf\xe9.csv")  # a file name that is not UTF-8, as os.fsdecode gives it
    found = []
    try:
        trial(store, "run-2", 2_000.0, reason=f"could not read {name}")
    except Exception as exc:
        found.append(f"finish_trial raised {type(exc).__name__}")
    calls = {
        "a fresh read": lambda: seen(store.uri),
        "a kept Store's read": lambda: kept.trials(SPEC.job_id),
        "compaction": lambda: open_store(store.uri).compact(SPEC.job_id),
    }
    for what, call in calls.items():
        if error := raw(call):
            found.append(f"{what} raised {error}")
    again = raw(lambda: kept.trials(SPEC.job_id))
    if not again and ("run-2", "reached", 2_000.0) not in list(
        kept.trials(SPEC.job_id)[["recurrence_id", "status", "energy_j"]].itertuples(index=False, name=None)
    ):
        found.append("the kept Store passed run-2's slots without their rows")
    if not found and ("run-2", "reached", 2_000.0) not in seen(store.uri):
        found.append(f"run-2's figures were not stored: {seen(store.uri)}")
    if error := raw(lambda: open_store(store.uri).delete_job(SPEC.job_id)):
        found.append(f"delete raised {error}")
    return found


class _BetweenReadAndStamp(LocalBackend):
    """A local store that runs `then` once, when a job's spec is listed after its log was: a compaction between
    its read of the log and the incarnation it stamps the snapshot with."""

    def __init__(self, root: Path, then: Callable[[], None]) -> None:
        super().__init__(root)
        self.then, self.read_log, self.fired = then, False, False

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        if self.read_log and not self.fired and prefix == keys.spec_dir(SPEC.job_id):
            self.fired = True
            self.then()
        self.read_log = self.read_log or prefix == keys.log_dir(SPEC.job_id)
        return super().list(prefix, start_after)


def compaction_during_delete(root: Path) -> list[str]:
    store = open_store(str(root))
    store.ensure_job(SPEC)
    for n in (1, 2, 3):
        trial(store, f"old-{n}", 500.0)

    def delete_and_make_again() -> None:
        other = open_store(store.uri)
        other.delete_job(SPEC.job_id)
        other.ensure_job(SPEC)
        trial(other, "new-1", 7.0)

    compactor = _BetweenReadAndStamp(root, delete_and_make_again)
    error = raw(lambda: Store(compactor).compact(SPEC.job_id))  # the compaction may be told the job went
    trial(open_store(store.uri), "new-2", 8.0)
    shown = seen(store.uri)
    expected = [("new-1", "reached", 7.0), ("new-2", "reached", 8.0)]
    found = [f"the compaction raised {error}"] if error else []
    found += [] if compactor.fired else ["the job was not deleted and made again during the compaction"]
    return found + ([] if shown == expected else [f"the new job shows {shown}, not {expected}"])


def local_paths(root: Path) -> list[str]:
    found = []
    path = root / os.fsdecode(b"st-caf\xe9")  # a directory name the OS accepts that is not UTF-8
    store = open_store(str(path))
    store.ensure_job(SPEC)
    trial(store, "run-1")
    again = open_store(store.uri)  # what `zeus-kfp run` hands its steps
    if again.backend.location != store.backend.location:
        found.append(f"store.uri opens {again.backend.location!r}, not {store.backend.location!r}")
    for uri in ("file:///tmp/a%00b", "~nosuchuser-zeus/store"):
        if error := raw(lambda u=uri: open_store(u)):
            found.append(f"open_store({uri!r}) raised {error}")
    return found


def planted_objects(root: Path) -> list[str]:
    found = []
    for name, planted in (
        ("an integer too large for a float field", {"kind": "finished", "recurrence_id": "run-1", "attempt": 1,
         "batch_size": 128, "status": "reached", "time_s": 10**400, "energy_j": 1.0, "num_epochs": 1, "cost": 1.0}),
        ("JSON nested 200,000 deep", b'{"kind":"noop","x":' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    ):  # fmt: skip
        store = open_store(str(root / name.split()[1]))
        store.ensure_job(SPEC)
        trial(store, "run-1")
        plant(store, planted)
        calls = {
            "a read": lambda s=store: seen(s.uri),
            "delete": lambda s=store: open_store(s.uri).delete_job(SPEC.job_id),
        }
        for what, call in calls.items():
            if error := raw(call):
                found.append(f"{name}: {what} raised {error}")
    store = open_store(str(root / "metadata"))
    store.ensure_job(SPEC)
    trial(store, "run-1")
    store.compact(SPEC.job_id)
    key = store.backend.list(keys.snapshots_dir(SPEC.job_id))[-1]
    table = read_parquet_bytes(store.backend.get(key))
    meta = dict(table.schema.metadata) | {b"zeus_kfp.job_id": b"\xff\xfe"}
    data = parquet_bytes(table.replace_schema_metadata(meta), compression="zstd")
    store.backend.put(keys.snapshot_key(SPEC.job_id, keys.parse_snapshot_key(key)[0] + 1, keys.crc(data)), data)
    if error := raw(lambda: seen(store.uri)):
        found.append(f"snapshot metadata that is not UTF-8: a read raised {error}")
    return found


class _ReadDuringDelete(LocalBackend):
    """A local store whose delete runs a fresh reader's read once, after half the job's log objects are gone."""

    def __init__(self, root: Path, total: int) -> None:
        super().__init__(root)
        self.left, self.fired = total // 2, False

    def delete(self, key: str) -> None:
        super().delete(key)
        if "/log/" in key:
            self.left -= 1
        if self.left <= 0 and not self.fired:
            self.fired = True
            raw(lambda: Store(LocalBackend(self.root)).trials(SPEC.job_id))  # what it leaves is the question


def reader_during_delete(root: Path) -> list[str]:
    store = open_store(str(root))
    store.ensure_job(SPEC)
    for n in (1, 2, 3):
        trial(store, f"run-{n}")
    logged = len(store.backend.list(keys.log_dir(SPEC.job_id)))
    Store(_ReadDuringDelete(root, logged)).delete_job(SPEC.job_id)
    left = store.backend.list(keys.job_dir(SPEC.job_id))
    found = [f"the delete left {len(left)} objects: {left[:3]}"] if left else []
    try:
        open_store(store.uri).ensure_job(SPEC)
    except Exception as exc:
        found.append(f"the id cannot be made again: {type(exc).__name__}: {str(exc)[:120]}")
    return found


def older_entries(root: Path) -> list[str]:
    found = []
    store = open_store(str(root))
    store.ensure_job(SPEC)
    store.begin_recurrence(SPEC.job_id, "run-1")
    store.dispatch_trial(SPEC.job_id, "run-1", 1, EXPLORE)
    long_reason = "Traceback (most recent call last):\n" + "  frame\n" * 2_000  # 16,035 characters
    entry = {"kind": "finished", "recurrence_id": "run-1", "attempt": 1, "at": 1796476495553080}
    plant(store, entry | {k: v for k, v in result(reason=long_reason).to_dict().items() if k != "reached"})
    if seen(store.uri) != [("run-1", "reached", 1_000.0)]:
        found.append(f"an older zeus-kfp's result with a long reason reads as {seen(store.uri)}")
    store.begin_recurrence(SPEC.job_id, "run-2")
    store.dispatch_trial(SPEC.job_id, "run-2", 1, EXPLORE)
    try:
        store.finish_trial(SPEC.job_id, "run-2", 1, result(2_000.0, long_reason, status="failed"))
    except Exception as exc:
        found.append(f"a script's long failure reason is refused: {type(exc).__name__}: {str(exc)[:100]}")
    if ("run-2", "failed", 2_000.0) not in seen(store.uri):
        found.append("the failed trial's figures were not stored")
    return found


DEFECTS = {
    "1. a lone surrogate in a reason": lone_surrogate,
    "2. compaction during delete + re-create": compaction_during_delete,
    "3. a local store path that is not UTF-8": local_paths,
    "4. planted objects end reads in raw errors": planted_objects,
    "5. a reader during delete": reader_during_delete,
    "6. upgrades change stored history": older_entries,
}


def main() -> int:
    logging.disable(logging.WARNING)  # the problems reads report: the reproductions judge what they leave
    print(f"store code: {Path(zeus_kfp.__file__).parent}; pyarrow {pa.__version__}")
    reproduced = 0
    for name, reproduce in DEFECTS.items():
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWarning)
            try:
                found = reproduce(Path(tmp))
            except Exception:
                found = [f"the reproduction itself raised: {traceback.format_exc(limit=3)[-600:]}"]
        reproduced += bool(found)
        print(f"{name}: {'REPRODUCES' if found else 'does not reproduce'}")
        for line in found:
            print(f"    {line}")
    print(f"result: {reproduced} of {len(DEFECTS)} reproduce")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
