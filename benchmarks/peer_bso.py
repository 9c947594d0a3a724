"""zeus-kfp's bandit and feedback steps against Zeus 0.16's batch-size optimizer server (BSO), in one run.

Both sides get the same history: BSO decides N trials (10,000 by default) of a simulated job
and is told each result (a deterministic model of epochs, time and energy per batch size);
the very same trials are then seeded into zeus-kfp (benchmarks/seed.py: one snapshot) on a local
directory and on an S3 server (moto, in this process on 127.0.0.1). Then, on each side:
- decision: zeus-kfp `bandit()` (open the store, read the history, the `default` policy's
  decision, record the dispatch) against BSO's `GET /jobs/batch_size`; median.
- whole cycle: decision + `feedback()` (record the result) against GET + `POST /report` +
  `PATCH /trials`; median. The pipeline's other store steps run around it, untimed: preprocess's
  `begin_recurrence` before, the report step's `compact` after.
- 8 clients, one job: cycles/s of 8 processes (zeus-kfp) or 8 HTTP clients (BSO) cycling at once
  (zeus-kfp's cycles here include the begin and the compaction).
- memory a decision adds: peak RSS (VmHWM) of the deciding process before and after one
  decision on the big job, after a warm-up decision on a small one (BSO: its server process).
- cold start (zeus-kfp only): a fresh `python` process, from start to its first decision.

Simulated: the trial results (no GPU, no training). Measured: every time and memory figure.
Zeus's server runs in its own throwaway virtualenv (bso_server.py); nothing leaves 127.0.0.1.

Reproduce: .venv/bin/python benchmarks/peer_bso.py                  (about 10 minutes)
           .venv/bin/python benchmarks/peer_bso.py --trials 1000 --venv /tmp/bso-venv
           .venv/bin/python benchmarks/peer_bso.py --smoke                  (zeus-kfp's side only, seconds)
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pandas as pd
from bso_server import BsoClient, BsoServer, bso_job, ensure_venv
from seed import SPEC, history_frame, moto_server, outcome, seed_job, simulated_history

from zeus_kfp.job import TrialResult
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.steps.feedback import feedback
from zeus_kfp.store import open_store

COMMAND = ".venv/bin/python benchmarks/peer_bso.py"
POLICY = "default"
WARM_JOB = "warm-job"
SMOKE = {"trials": 100, "cycles": 2, "clients": 2, "client_cycles": 2, "backends": ["local"]}


def seed_bso(server: BsoServer, count: int, seed: int = 0) -> pd.DataFrame:
    """BSO decides `count` trials and is told each result; the same trials as a frame for zeus-kfp."""
    rng = np.random.default_rng(seed)
    outcomes = {b: [list(outcome(b, rng)) for _ in range(count)] for b in SPEC.batch_sizes}
    return history_frame(server.seed(SPEC.job_id, SPEC.target_metric, outcomes, count))


def _result_json(batch: int, rng: np.random.Generator) -> str:
    reached, time_s, energy_j, epochs = outcome(batch, rng)
    status = "reached" if reached else "not_reached"
    result = TrialResult.build(SPEC, batch_size=batch, status=status, time_s=time_s, energy_j=energy_j,
                               num_epochs=epochs)  # fmt: skip
    return json.dumps(result.to_dict())


def kfp_cycle(uri: str, rid: str, rng: np.random.Generator, store=None) -> tuple[float, float]:
    """One zeus-kfp cycle as the pipeline runs it: (decision seconds, whole cycle seconds). The preprocess
    step's begin and the report step's compaction are around it, untimed: reads stay a snapshot + a tail."""
    store = store or open_store(uri)
    store.begin_recurrence(SPEC.job_id, rid)
    started = time.perf_counter()
    choice = bandit(store_uri=uri, job_id=SPEC.job_id, recurrence_id=rid, attempt=1, policy=POLICY)
    decided = time.perf_counter()
    feedback(store_uri=uri, job_id=SPEC.job_id, recurrence_id=rid, attempt=1,
             result_json=_result_json(choice.batch_size, rng), profile_path="")  # fmt: skip
    ended = time.perf_counter()
    store.compact(SPEC.job_id)
    return decided - started, ended - started


def bso_cycle(client: BsoClient, rng: np.random.Generator) -> tuple[float, float]:
    started = time.perf_counter()
    trial = client.decide(SPEC.job_id)
    decided = time.perf_counter()
    reached, time_s, energy_j, epochs = outcome(trial["batch_size"], rng)
    client.report(trial, time_s, energy_j, SPEC.target_metric + (0.01 if reached else -0.1), epochs)
    client.end(trial)
    return decided - started, time.perf_counter() - started


def _kfp_client(uri: str, env: dict, worker: int, cycles: int, barrier, out) -> None:
    os.environ.update(env)
    store, rng = open_store(uri), np.random.default_rng(100 + worker)
    kfp_cycle(uri, f"warm-{worker}-{uuid.uuid4().hex[:6]}", rng, store)  # imports and caches, untimed
    barrier.wait()
    started = time.time()
    for i in range(cycles):
        kfp_cycle(uri, f"tp-{worker}-{i}-{uuid.uuid4().hex[:6]}", rng, store)
    out.put((started, time.time()))


def _bso_client(port: int, worker: int, cycles: int, barrier, out) -> None:
    client, rng = BsoClient(port), np.random.default_rng(100 + worker)
    barrier.wait()
    started = time.time()
    for _ in range(cycles):
        bso_cycle(client, rng)
    out.put((started, time.time()))


def throughput(target, args_of, clients: int, cycles: int) -> float:
    """Cycles per second of `clients` processes cycling at once on one job."""
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(clients), context.Queue()
    processes = [context.Process(target=target, args=(*args_of(w), cycles, barrier, out)) for w in range(clients)]
    for process in processes:
        process.start()
    spans = [out.get(timeout=1800) for _ in processes]
    for process in processes:
        process.join()
    return clients * cycles / (max(end for _, end in spans) - min(start for start, _ in spans))


MEMORY_PROBE = """
import json, sys, uuid
from pathlib import Path
def peak():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.store import open_store
uri, job, warm = sys.argv[1:4]
store = open_store(uri)
for job_id in (warm, job):
    rid = "mem-" + uuid.uuid4().hex[:8]
    store.begin_recurrence(job_id, rid)
    before = peak()
    bandit(store_uri=uri, job_id=job_id, recurrence_id=rid, attempt=1, policy="default")
print(json.dumps(peak() - before))
"""

COLD_START = """
import sys
from zeus_kfp.steps.bandit import bandit
bandit(store_uri=sys.argv[1], job_id=sys.argv[2], recurrence_id=sys.argv[3], attempt=1, policy="default")
"""
# What bandit() needs, without the zeus_kfp.steps package (whose __init__ and trial.py import pandas
# for other steps): the store and the policy. The seed is irrelevant to the time.
COLD_START_STORE = """
import sys
from zeus_kfp.policy import get_policy
from zeus_kfp.store import open_store
uri, job_id, rid = sys.argv[1:4]
store = open_store(uri)
decision = get_policy("default").decide(store.get_job(job_id), store.history(job_id), 0)
store.dispatch_trial(job_id, rid, 1, decision)
"""


def kfp_memory_mb(uri: str) -> float:
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, uri, SPEC.job_id, WARM_JOB],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def kfp_cold_start_s(uri: str, script: str, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        rid = f"cold-{uuid.uuid4().hex[:8]}"
        open_store(uri).begin_recurrence(SPEC.job_id, rid)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", script, uri, SPEC.job_id, rid], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure_kfp(uri: str, history: pd.DataFrame, args) -> dict[str, float]:
    store = open_store(uri)
    seed_job(store, SPEC, history)
    seed_job(store, SPEC.with_changes(job_id=WARM_JOB), history.head(20))
    rng = np.random.default_rng(7)
    kfp_cycle(uri, f"warm-{uuid.uuid4().hex[:6]}", rng, store)
    cycles = [kfp_cycle(uri, f"bench-{i}-{uuid.uuid4().hex[:6]}", rng, store) for i in range(args.cycles)]
    env = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    return {
        "decision_ms": 1000 * statistics.median(d for d, _ in cycles),
        "cycle_ms": 1000 * statistics.median(c for _, c in cycles),
        "clients_per_s": throughput(_kfp_client, lambda w: (uri, env, w), args.clients, args.client_cycles),
        "memory_mb": kfp_memory_mb(uri),
        "cold_start_s": kfp_cold_start_s(uri, COLD_START),
        "cold_store_s": kfp_cold_start_s(uri, COLD_START_STORE),
    }


def measure_bso(server: BsoServer, args) -> dict[str, float]:
    server.stop()
    server.start()  # a fresh server process on the seeded database: its memory starts from idle
    client = BsoClient(server.port)
    warm = bso_job(SPEC, WARM_JOB)
    client.register(warm)
    bso_cycle_on(client, WARM_JOB)
    before = server.peak_rss_mb()
    client.decide(SPEC.job_id)
    memory = server.peak_rss_mb() - before
    rng = np.random.default_rng(7)
    cycles = [bso_cycle(client, rng) for _ in range(args.cycles)]
    return {
        "decision_ms": 1000 * statistics.median(d for d, _ in cycles),
        "cycle_ms": 1000 * statistics.median(c for _, c in cycles),
        "clients_per_s": throughput(_bso_client, lambda w: (server.port, w), args.clients, args.client_cycles),
        "memory_mb": memory,
        "cold_start_s": math.nan,
        "cold_store_s": math.nan,
    }


def bso_cycle_on(client: BsoClient, job_id: str) -> None:
    trial = client.decide(job_id)
    client.report(trial, 10.0, 100.0, SPEC.target_metric + 0.01, 1)
    client.end(trial)


def table(results: dict[str, dict[str, float]], trials: int) -> str:
    names = list(results)
    lines = [f"| at {trials:,} trials of history | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    rows = [
        ("decision (`bandit` vs `GET /jobs/batch_size`), median", "decision_ms", "{:.1f} ms"),
        ("whole cycle (decide + record), median", "cycle_ms", "{:.1f} ms"),
        ("8 clients, one job, cycles/s", "clients_per_s", "{:.2f}"),
        ("memory a decision adds", "memory_mb", "{:.1f} MB"),
        ("process start to first decision (`python -c` running `bandit`)", "cold_start_s", "{:.2f} s"),
        ("the same, store + policy only (no `zeus_kfp.steps`, which imports pandas)", "cold_store_s", "{:.2f} s"),
    ]
    for label, key, form in rows:
        cells = ["n/a (a long-lived server)" if math.isnan(results[n][key]) else form.format(results[n][key])
                 for n in names]  # fmt: skip
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=20, help="timed cycles per side (medians)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--client-cycles", type=int, default=15, help="cycles per client in the throughput run")
    parser.add_argument("--venv", type=Path, default=None, help="Zeus's server venv (made there if missing)")
    parser.add_argument("--backends", nargs="+", default=["local", "s3"], choices=["local", "s3"])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run (tests/test_benchmarks_smoke.py): zeus-kfp's side only, on seed.py's simulated "
        "history (Zeus's server needs zeus 0.16 from PyPI)",
    )
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    with tempfile.TemporaryDirectory(prefix="zeus-peer-") as tmp:
        server = None
        if args.smoke:
            history = simulated_history(args.trials)
        else:
            python = ensure_venv(args.venv or Path(tmp) / "bso-venv")
            server = BsoServer(python, Path(tmp) / "bso.db")
            server.start()
            client = BsoClient(server.port)
            client.register(bso_job(SPEC, SPEC.job_id))
            started = time.perf_counter()
            history = seed_bso(server, args.trials)
            print(f"seeded BSO with {len(history):,} trials in {time.perf_counter() - started:.0f} s", flush=True)
        results: dict[str, dict[str, float]] = {}
        with ExitStack() as stack:
            for backend in args.backends:
                local = backend == "local"
                uri = f"{tmp}/store" if local else f"s3://{stack.enter_context(moto_server()).bucket()}/p"
                name = "zeus-kfp local" if local else "zeus-kfp S3 (moto)"
                results[name] = measure_kfp(uri, history, args)
                print(f"measured zeus-kfp on {backend}", flush=True)
        if server is not None:
            results["Zeus BSO (SQLite)"] = measure_bso(server, args)
            server.stop()
    print(f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"policy '{POLICY}'; simulated trial results, measured times\n")  # fmt: skip
    print(table(results, args.trials))
    print("\nreproduce:\n  " + COMMAND + " " + " ".join(sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
