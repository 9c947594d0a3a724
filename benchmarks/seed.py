"""Seed a store with a job's history of N trials in seconds: one snapshot instead of N API cycles.

Why: the store benchmarks need jobs with 10,000 and 100,000 trials. Through the API each trial is
three log appends (begin_recurrence, dispatch_trial, finish_trial), each a Disk Paxos round of PUTs
and LISTs plus a read of the log: several ms locally and more on S3, so 100,000 trials would take
hours. Bulk import is no part of the store any more (it was zeus_kfp.store.bulk), so it lives here, for
benchmarks only. It writes what compaction would have written for the same log: the rows of its
entries (`begin`, `dispatched`, `finished`, in slot order, the very dicts Store.begin_recurrence,
dispatch_trial and finish_trial append; zeus_kfp.store.entries.rows/table) as one Parquet snapshot of
slots 1..upto (zeus_kfp.store.snapshot.write), into a job whose log is empty; a job that already has
slots or snapshots is refused. The next append takes slot upto+1, so recurrence and trial numbers go
on from the seeded ones. Never for a real job: the seeded slots exist only in that snapshot (no log
objects behind them), whereas the log is a real store's truth. Compaction keeps them (its snapshot
holds the seeded rows too before it deletes the seeded one).

The history is a deterministic model (`simulated_history`: batch sizes drawn uniformly with a fixed
seed, epochs, time and energy from `outcome`), and every result says so: `simulated` is true and
`source` names this model. Nothing of it was measured.

Seed a store (ZEUS_S3_* for an s3:// store), then check what a read returns against what was seeded:

    .venv/bin/python benchmarks/seed.py --store /tmp/zeus-bench --trials 10000
    .venv/bin/python benchmarks/seed.py --check                    # local and moto, 1,000 trials
    .venv/bin/python benchmarks/seed.py --check --trials 10000 --backends local
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zeus_kfp.job import Decision, JobSpec, TrialResult, TrialStatus
from zeus_kfp.store import Store, StoreError, catalog, entries, keys, open_store, snapshot, strays
from zeus_kfp.trials import Trial, trial_columns

SPEC = JobSpec(
    job_id="bench-job",
    batch_sizes=(32, 64, 128, 256, 512, 1024),
    default_batch_size=256,
    target_metric=0.9,
    max_epochs=30,
)
SOURCE = "simulated (benchmarks/seed.py outcome model)"
STAGE = "seeded"
COMMAND = ".venv/bin/python benchmarks/seed.py"
SMOKE = {"check": True, "trials": 100}
REQUIRED = trial_columns("recurrence_id", "attempt", "batch_size", "status", "time_s", "energy_j", "num_epochs")


# -- the simulated history ---------------------------------------------------------------------------


def outcome(batch: int, rng: np.random.Generator, spec: JobSpec = SPEC) -> tuple[bool, float, float, int]:
    """(reached, time_s, energy_j, epochs) of one simulated trial: cheapest around batch 256."""
    epochs = int(rng.integers(3, 10)) + abs(int(math.log2(batch / 256))) * 2
    reached = bool(rng.random() < (0.9 if 64 <= batch <= 512 else 0.6)) and epochs <= spec.max_epochs
    time_s = epochs * 60.0 * (256 / batch) ** 0.3
    return reached, time_s, time_s * float(rng.uniform(180, 260)), epochs


def history_frame(trials: Iterable[tuple[int, bool, float, float, int]], spec: JobSpec = SPEC) -> pd.DataFrame:
    """(batch size, reached, time_s, energy_j, epochs) of each trial in order, as the rows `seed_job`
    takes: a new recurrence after a reach or after max_attempts."""
    rows, recurrence, attempt = [], 1, 0
    for batch, reached, time_s, energy_j, epochs in trials:
        attempt += 1
        rows.append(
            {"recurrence": recurrence, "recurrence_id": f"hist-{recurrence}", "attempt": attempt,
             "batch_size": batch, "status": "reached" if reached else "not_reached",
             "time_s": time_s, "energy_j": energy_j, "num_epochs": epochs}
        )  # fmt: skip
        if reached or attempt == spec.max_attempts:
            recurrence, attempt = recurrence + 1, 0
    return pd.DataFrame(rows)


def simulated_history(count: int, seed: int = 0, spec: JobSpec = SPEC) -> pd.DataFrame:
    """`count` finished trials at uniformly drawn batch sizes, results from `outcome` (deterministic per seed)."""
    rng = np.random.default_rng(seed)
    batches = [int(b) for b in rng.choice(spec.batch_sizes, size=count)]
    return history_frame(((batch, *outcome(batch, rng, spec)) for batch in batches), spec)


# -- seeding -------------------------------------------------------------------------------------


class SeedError(StoreError):
    """The job cannot be seeded (it has a log or snapshots already, or the history is malformed)."""


def profile_rows(batch: int) -> list[dict[str, Any]]:
    """A simulated power profile of one trial (three limits while training, one while evaluating), as
    Store.write_profile stores it: drawing less and slowing down below 250 W."""
    speed = 1000.0 * (batch / 256) ** 0.7
    train = [
        {"phase": "train", "power_limit_w": w, "average_power_w": min(w, 240.0),
         "throughput": speed * min(1.0, w / 250), "simulated": True}
        for w in (300.0, 250.0, 200.0)
    ]  # fmt: skip
    return [*train, {"phase": "eval", "power_limit_w": 300.0, "average_power_w": 200.0, "throughput": 2 * speed,
                     "simulated": True}]  # fmt: skip


def log_entries(
    spec: JobSpec, trials: pd.DataFrame, at_us: int | None = None, profiled: int = 0
) -> list[dict[str, Any]]:
    """The job's log for `trials` (REQUIRED columns, one row per trial in trial order): per recurrence a
    `begin` at its first trial, then `dispatched` and `finished` per attempt, the entries Store writes, and a
    `profile` after each of the first `profiled` trials. `at` stamps one second apart, ending at `at_us`
    (default: now)."""
    missing = [c for c in REQUIRED if c not in trials.columns]
    if missing:
        raise SeedError(f"the history lacks columns {missing}; it needs {list(REQUIRED)}")
    if trials.duplicated(["recurrence_id", "attempt"]).any():
        raise SeedError("the history has a (recurrence_id, attempt) twice: one row per trial")
    begun: dict[str, int] = {}
    found: list[dict[str, Any]] = []
    slots = len(set(trials["recurrence_id"])) + 2 * len(trials) + min(profiled, len(trials))
    at = (at_us if at_us is not None else entries.now_us()) - slots * 1_000_000
    for row in trials.itertuples(index=False):
        rid, attempt = keys.check_recurrence_id(str(row.recurrence_id)), keys.check_attempt(int(row.attempt))
        if rid not in begun:
            begun[rid] = len(begun) + 1
            if "recurrence" in trials.columns and int(row.recurrence) != begun[rid]:
                raise SeedError(f"recurrence {rid!r} is numbered {row.recurrence}, but begins as number {begun[rid]}")
            at += 1_000_000
            found.append({"kind": "begin", "recurrence_id": rid, "at": at})
        batch = int(row.batch_size)
        if batch not in spec.batch_sizes:
            raise SeedError(f"batch size {batch} of {rid}.{attempt} is not one of the job's {list(spec.batch_sizes)}")
        result = TrialResult.build(spec, batch_size=batch, status=str(row.status), time_s=float(row.time_s),
                                   energy_j=float(row.energy_j), num_epochs=int(row.num_epochs), simulated=True,
                                   source=SOURCE)  # fmt: skip
        decision = Decision(batch, None, STAGE, "seeded by benchmarks/seed.py (a simulated history)")
        at += 1_000_000
        found.append({"kind": "dispatched", "recurrence_id": rid, "attempt": attempt, "at": at,
                      "batch_size": decision.batch_size, "cost_threshold": decision.cost_threshold,
                      "stage": decision.stage, "decision_reason": decision.reason, "kfp_run_id": ""})  # fmt: skip
        given = {name: getattr(result, name) for name in entries.RESULT_FIELDS} | {"status": result.status.value}
        at += 1_000_000
        found.append({"kind": "finished", "recurrence_id": rid, "attempt": attempt, "at": at} | given)
        if profiled > 0:
            profiled -= 1
            at += 1_000_000
            found.append({"kind": "profile", "recurrence_id": rid, "attempt": attempt, "at": at,
                          "rows": profile_rows(batch)})  # fmt: skip
    return found


def seed_job(store: Store, spec: JobSpec, trials: pd.DataFrame, at_us: int | None = None, profiled: int = 0) -> str:
    """Store `spec` and write `trials` (the first `profiled` with a power profile) as the snapshot of the job's
    first slots; returns its key. SeedError if the job already has slots or snapshots (seed only a new job)."""
    catalog.register(store.backend, spec, "")  # not store.ensure_job: it reads the log, and `store` would keep the
    backend, job_id = store.backend, spec.job_id  # empty prefix it read, blind to the snapshot written below
    if backend.list(keys.log_dir(job_id)) or snapshot.listed(backend, job_id):
        raise SeedError(f"job {job_id!r} already has a log or snapshots in {backend.location}; seed only a new job")
    found = log_entries(spec, trials, at_us, profiled)
    rows = [row for slot, entry in enumerate(found, start=1) for row in entries.rows(slot, entries.checked(entry))]
    key = snapshot.write(backend, job_id, len(found), entries.table(rows), strays.incarnation(backend, job_id))
    assert key is not None  # the spec was just stored
    return key


# -- moto (in this process, as tests/conftest.py starts it, or in a child) -------------------------------------------


@dataclass
class Moto:
    """moto's S3 server on 127.0.0.1, and the ZEUS_S3_* variables that point a store at it."""

    server: Any
    endpoint: str  # host:port
    env: dict[str, str]

    def bucket(self, name: str | None = None) -> str:
        """A new bucket, made with the minio client directly (the store is never asked to create one)."""
        from minio import Minio

        name = name or f"zeus-bench-{uuid.uuid4().hex[:12]}"
        Minio(self.endpoint, access_key=self.env["ZEUS_S3_ACCESS_KEY"], secret_key=self.env["ZEUS_S3_SECRET_KEY"],
              secure=False).make_bucket(name)  # fmt: skip
        return name


MOTO_PROCESS = """
import logging, sys, time
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
print(f"{host}:{port}", flush=True)
sys.stdin.read()  # until the parent closes it (or dies)
server.stop()
"""


@contextmanager
def moto_server(own_process: bool = False) -> Iterator[Moto]:
    """Start moto's ThreadedMotoServer on 127.0.0.1, port 0, and set ZEUS_S3_* in os.environ for it (child
    processes inherit them); stop it and restore the environment at the end. `own_process`: run it in a
    child process, so that its request handling does not share this process's interpreter lock with the
    benchmark's own threads (stand-in proxies, clients' readers); in this process otherwise, as the tests run it."""
    import logging
    import subprocess

    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    if own_process:
        child = subprocess.Popen([sys.executable, "-c", MOTO_PROCESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)  # fmt: skip
        endpoint, stop = child.stdout.readline().strip(), lambda: (child.stdin.close(), child.wait(timeout=30))
        server: Any = child
    else:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint, stop = f"{host}:{port}", server.stop
    env = {"ZEUS_S3_ENDPOINT": endpoint, "ZEUS_S3_SECURE": "false", "ZEUS_S3_ACCESS_KEY": "bench",
           "ZEUS_S3_SECRET_KEY": "bench-secret", "ZEUS_S3_REGION": "us-east-1"}  # fmt: skip
    saved = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    for name in saved:
        del os.environ[name]
    os.environ.update(env)
    try:
        yield Moto(server, endpoint, env)
    finally:
        stop()
        for name in env:
            os.environ.pop(name, None)
        os.environ.update(saved)


# -- the check --------------------------------------------------------------------------------------


def expected_history(spec: JobSpec, trials: pd.DataFrame) -> list[Trial]:
    numbers = {rid: n for n, rid in enumerate(dict.fromkeys(trials["recurrence_id"]), start=1)}
    return [
        Trial(numbers[r.recurrence_id], trial, int(r.batch_size), TrialStatus(r.status),
                    spec.cost_model.cost(float(r.energy_j), float(r.time_s)), float(r.time_s), float(r.energy_j))
        for trial, r in enumerate(trials.itertuples(index=False), start=1)
    ]  # fmt: skip


def check(uri: str, count: int, spec: JobSpec = SPEC) -> list[str]:
    """Seed `count` trials into a new job at `uri` and compare what reads return; returns what went wrong."""
    import warnings

    from zeus_kfp.policy import get_policy
    from zeus_kfp.store import StoreWarning

    failures: list[str] = []
    warnings.simplefilter("error", StoreWarning)  # any problem a read reports is a failure
    trials = simulated_history(count, spec=spec)
    started = time.perf_counter()
    seed_job(open_store(uri), spec, trials)
    seconds = time.perf_counter() - started
    reader = open_store(uri)
    history = reader.history(spec.job_id)
    if history != expected_history(spec, trials):
        failures.append(f"history: {len(history)} records read, not the {count} seeded")
    frame = reader.trials(spec.job_id)
    rows = [list(f[REQUIRED].itertuples(index=False, name=None)) for f in (frame, trials)]
    if rows[0] != rows[1]:
        failures.append("trials(): the frame's columns differ from the seeded history")
    if list(frame["trial"]) != list(range(1, count + 1)) or not (frame["simulated"].all() and frame["finished"].all()):
        failures.append("trials(): numbers not 1..N, or a trial not finished and simulated")
    if set(frame["source"]) != {SOURCE}:
        failures.append(f"trials(): sources {sorted(set(frame['source']))}")
    try:
        seed_job(open_store(uri), spec, trials.head(1))
        failures.append("a second seed into the same job was not refused")
    except SeedError:
        pass
    # The API carries on where the seed ended: the next recurrence and trial numbers.
    store, rid = open_store(uri), f"after-{uuid.uuid4().hex[:8]}"
    recurrences = trials["recurrence_id"].nunique()
    if (number := store.begin_recurrence(spec.job_id, rid)) != recurrences + 1:
        failures.append(f"begin_recurrence after the seed: number {number}, not {recurrences + 1}")
    decision = get_policy("default").decide(spec, history, 0)
    trial, recorded = store.dispatch_trial(spec.job_id, rid, 1, decision)
    if (trial, recorded) != (count + 1, decision):
        failures.append(f"dispatch_trial after the seed: trial {trial}, not {count + 1}")
    done = TrialResult.build(spec, batch_size=decision.batch_size, status="reached", time_s=60.0, energy_j=12_000.0,
                             num_epochs=3)  # fmt: skip
    store.finish_trial(spec.job_id, rid, 1, done)
    compacted = store.compact(spec.job_id)
    after = open_store(uri).history(spec.job_id)
    if after[:-1] != history or (after[-1].recurrence, after[-1].trial) != (recurrences + 1, count + 1):
        failures.append("after one more trial and a compaction, the history is not the seed plus that trial")
    if compacted.written is None or compacted.deleted < 1:
        failures.append(f"compaction after the seed wrote {compacted.written} and deleted {compacted.deleted}")
    print(f"  {uri}: seeded {count:,} trials in {seconds:.2f} s; read back {len(history):,};"
          f" {'ok' if not failures else 'FAILED'}", flush=True)  # fmt: skip
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="the store to seed: a directory or s3://bucket/prefix (ZEUS_S3_* set)")
    parser.add_argument("--trials", type=int, default=None, help="trials to seed (default 10,000; --check 1,000)")
    parser.add_argument("--job-id", default=SPEC.job_id)
    parser.add_argument("--seed", type=int, default=0, help="of the simulated history")
    parser.add_argument("--check", action="store_true", help="seed fresh stores and check what reads return")
    parser.add_argument("--backends", nargs="+", default=["local", "moto"], choices=["local", "moto"])
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    if args.check:
        count, failures = args.trials or 1_000, []
        print(f"seed check, {count:,} trials, load average {os.getloadavg()[0]:.1f}")
        with tempfile.TemporaryDirectory(prefix="zeus-seed-") as tmp:
            if "local" in args.backends:
                failures += check(f"{tmp}/store", count)
            if "moto" in args.backends:
                with moto_server() as moto:
                    failures += check(f"s3://{moto.bucket()}/store", count)
        for failure in failures:
            print("  FAILED:", failure)
        print("reproduce:\n  " + " ".join([COMMAND, *sys.argv[1:]]))
        return 1 if failures else 0
    if not args.store:
        parser.error("--store is required (or --check)")
    spec = SPEC.with_changes(job_id=args.job_id)
    started = time.perf_counter()
    trials = simulated_history(args.trials or 10_000, args.seed, spec)
    key = seed_job(open_store(args.store), spec, trials)
    print(f"seeded job {spec.job_id!r} with {len(trials):,} simulated trials in {time.perf_counter() - started:.1f} s"
          f" ({key})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
