"""The store under concurrency at full size, on every object store it may meet (the suite runs small versions).

1. 16 client processes + a compaction loop, 3 rounds (one job a round): each client runs whole cycles
   (dispatch, read the history, finish) of its own recurrence; any StoreWarning in a client is an
   error. Counted: errors, warnings (and problems a later read reports), trials lost or doubled,
   trial numbers shared or not dense (1..N).
2. 8 processes dispatching the same attempts of one recurrence (a KFP retry while the first pod still
   runs, multiplied) + a compaction loop; odd and even processes decide different batch sizes.
   Counted: callers told something other than what the store keeps (trial number, batch size,
   reason), and problems any read reports.
The bodies are the suite's (tests/store/store_workers.py), the stores its stand-ins
(tests/s3_standins.py, in this process) in front of moto's S3 server, which runs on 127.0.0.1 in a
child process of its own (sharing this interpreter, it made each request several times slower):
`atomic` (moto itself, like AWS S3 and MinIO), `racy` (SeaweedFS 4.00's unlocked create-if-absent),
`ignored` (MinIO 2019, no conditional headers), `least-privilege` (the Kubeflow 1.11 namespace key:
object-level Get/Put/List under `mlpipeline/private/ns1/`, no DeleteObject), and a local directory.
The store makes no conditional request, so racy and ignored differ from atomic only by the proxy;
they stay here because they are what Kubeflow ships. least-privilege also reports the requests it
refused (compaction's deletes of superseded snapshots are expected: the store leaves them be).

Reproduce: .venv/bin/python benchmarks/store_races.py         (full size, every store: about an hour on
           2 busy cores; the local directory alone takes about 2 minutes)
           .venv/bin/python benchmarks/store_races.py --stores atomic --trials 2 --attempts 30   (a minute)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "store")]
from s3_standins import FLAVOURS, KUBEFLOW_BUCKET, StandIn, Upstream, start_standin  # noqa: E402
from seed import moto_server  # noqa: E402
from store_workers import cycle_trials, dispatch_same_attempts, run_clients, told_versus_stored  # noqa: E402

from zeus_kfp.store import open_store  # noqa: E402

COMMAND = ".venv/bin/python benchmarks/store_races.py"
STORES = ("local", *FLAVOURS)
SMOKE = {
    "stores": ["local", "racy"],
    "clients": 2,
    "trials": 1,
    "rounds": 1,
    "processes": 2,
    "attempts": 2,
    "timeout": 120,
}


def _errors(reports: list, compactors: list) -> tuple[list[str], list[str]]:
    """(errors, StoreWarnings) the clients and compactors reported, as their last traceback lines."""
    failed = [r[2] for r in [*reports, *compactors] if r[0] == "error"]
    warned = [t for t in failed if "StoreWarning" in t]
    return [t.strip().splitlines()[-1] for t in failed if t not in warned], [t.strip().splitlines()[-1] for t in warned]


def clients_and_compactor(uri: str, clients: int, trials: int, rounds: int, timeout_s: float) -> dict[str, object]:
    job_ids = [f"clients-{r}" for r in range(rounds)]
    started = time.perf_counter()
    reports, compactors = run_clients(
        cycle_trials, [(w, trials) for w in range(clients)], job_ids, uri, 1, True, timeout_s
    )
    seconds = time.perf_counter() - started
    errors, warned = _errors(reports, compactors)
    store = open_store(uri)
    lost = doubled = shared = not_dense = problems = 0
    expected = {(f"client-{r[1]}", a) for r in reports if r[0] == "worker" for a in range(1, trials + 1)}
    for job_id in job_ids:
        frame = store.trials(job_id)
        problems += len(store.problems)
        got = list(zip(frame["recurrence_id"], frame["attempt"], strict=True))
        lost += len(expected - set(got))
        doubled += len(got) - len(set(got))
        shared += int(frame["trial"].duplicated().sum())
        not_dense += int(sorted(frame["trial"]) != list(range(1, len(frame) + 1)))
    return {"errors": len(errors), "warnings": len(warned) + problems, "lost": lost, "doubled": doubled,
            "shared numbers": shared, "jobs not numbered 1..N": not_dense,
            "snapshots written": sum(c[2] for c in compactors if c[0] == "compactor"), "seconds": round(seconds, 1),
            "first error": (errors + warned)[0] if errors or warned else ""}  # fmt: skip


def same_attempts(uri: str, processes: int, attempts: int, timeout_s: float) -> dict[str, object]:
    job_ids = ["same-attempts"]
    started = time.perf_counter()
    reports, compactors = run_clients(
        dispatch_same_attempts, [(w, attempts) for w in range(processes)], job_ids, uri, 1, True, timeout_s
    )
    seconds = time.perf_counter() - started
    errors, warned = _errors(reports, compactors)
    store = open_store(uri)
    disagreements, rows = told_versus_stored(store, [r for r in reports if r[0] == "worker"])
    store.trials(job_ids[0])
    found = errors + warned + disagreements
    return {"errors": len(errors), "warnings": len(warned), "told vs stored disagreements": len(disagreements),
            "read problems": len(store.problems), "attempts stored": rows,
            "snapshots written": sum(c[2] for c in compactors if c[0] == "compactor"), "seconds": round(seconds, 1),
            "first error": found[0] if found else ""}  # fmt: skip


def store_uri(name: str, tmp: str, upstream: Upstream | None, standins: dict[str, StandIn]) -> str:
    """A fresh store on `name`, with ZEUS_S3_* in os.environ pointing at its stand-in (clients inherit them)."""
    for key in [k for k in os.environ if k.startswith("ZEUS_S3_")]:
        del os.environ[key]
    if name == "local":
        return f"{tmp}/{uuid.uuid4().hex}"
    assert upstream is not None
    if name not in standins:
        standins[name] = start_standin(name, upstream)
    os.environ.update(standins[name].env)
    if name == "least-privilege":  # its key may not create buckets: mlpipeline exists (start_standin made it)
        return f"s3://{KUBEFLOW_BUCKET}/private/ns1/{uuid.uuid4().hex[:16]}"
    bucket = f"zeus-races-{uuid.uuid4().hex[:12]}"
    upstream.ensure_bucket(bucket)  # on the server itself, never through a stand-in
    return f"s3://{bucket}/store"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", nargs="+", default=list(STORES), choices=STORES)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--trials", type=int, default=10, help="trials per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=300)
    parser.add_argument("--parts", nargs="+", default=["clients", "same"], choices=["clients", "same"])
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for each client's report")
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    failed = False
    standins: dict[str, StandIn] = {}
    saved = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    with tempfile.TemporaryDirectory(prefix="zeus-races-") as tmp, ExitStack() as stack:
        upstream = None
        if any(name != "local" for name in args.stores):
            moto = stack.enter_context(moto_server(own_process=True))
            env = moto.env
            upstream = Upstream(env["ZEUS_S3_ENDPOINT"], env["ZEUS_S3_ACCESS_KEY"], env["ZEUS_S3_SECRET_KEY"])
        for name in args.stores:
            if "clients" in args.parts:
                uri = store_uri(name, tmp, upstream, standins)
                first = clients_and_compactor(uri, args.clients, args.trials, args.rounds, args.timeout)
                print(f"{name}: {args.clients} clients x {args.trials} trials + a compactor, {args.rounds} rounds:"
                      f" {first}  (load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
                failed |= any(first[k] for k in ("errors", "warnings", "lost", "doubled", "shared numbers",
                                                  "jobs not numbered 1..N"))  # fmt: skip
            if "same" in args.parts:
                uri = store_uri(name, tmp, upstream, standins)
                second = same_attempts(uri, args.processes, args.attempts, args.timeout)
                print(f"{name}: {args.processes} processes on the same {args.attempts} attempts + a compactor:"
                      f" {second}  (load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
                counted = ("errors", "warnings", "told vs stored disagreements", "read problems")
                failed |= any(second[k] for k in counted)
                failed |= second["attempts stored"] != args.attempts
            if name == "least-privilege":
                refused = Counter(f"{r.method} {r.reason.split(' ')[0]}" for r in standins[name].refused)
                print(f"least-privilege: requests refused, by kind: {dict(refused) or 'none'}", flush=True)
        for standin in standins.values():
            standin.stop()
    for key in [k for k in os.environ if k.startswith("ZEUS_S3_")]:
        del os.environ[key]
    os.environ.update(saved)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print("result:", "FAILED" if failed else "0 errors, 0 warnings, nothing lost or doubled, 0 disagreements")
    print("reproduce:\n  " + " ".join([COMMAND, *sys.argv[1:]]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
