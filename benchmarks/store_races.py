"""The store under concurrency, at the sizes issue 11 asks for (the suite runs smaller versions).

1. 16 clients + a compactor, 3 rounds per backend: each client runs whole cycles (dispatch, read
   the history, finish) on one job while a compactor loops; any StoreWarning in a client is an
   error. Counted: errors, warnings, trials lost or doubled, trial numbers shared.
2. 8 processes dispatching the same 300 attempts of one recurrence while 2 compactors loop:
   odd and even processes decide different batch sizes. Counted: callers told something other
   than what the store keeps, and problems any read reports (the old "differs from the
   compacted event" among them).
Local directory and S3 (moto in its own process on 127.0.0.1, conditional PUTs decided atomically).

Reproduce: .venv/bin/python benchmarks/store_races.py                (several minutes)
           .venv/bin/python benchmarks/store_races.py --clients 16 --trials 10 --attempts 300 --backends local
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "store"))
from store import start_moto
from store_workers import (
    cycle_trials,
    dispatch_same_attempts,
    run_with_compactors,
    told_versus_stored,
)

from zeus.store import open_store

COMMAND = ".venv/bin/python benchmarks/store_races.py"


def clients_and_compactor(uri: str, clients: int, trials: int, rounds: int) -> dict[str, object]:
    job_ids = [f"clients-{r}" for r in range(rounds)]
    reports, compactors, seconds = run_with_compactors(
        cycle_trials, [(w, trials) for w in range(clients)], job_ids, uri, 1
    )
    errors = [r for r in reports if r[0] == "error"]
    warnings = [r for r in errors if "StoreWarning" in r[2]]
    store = open_store(uri)
    lost = doubled = shared = problems = 0
    for job_id in job_ids:
        frame = store.trials(job_id)
        problems += len(store.problems)
        expected = {(f"client-{r[1]}", a) for r in reports if r[0] == "worker" for a in range(1, trials + 1)}
        got = list(zip(frame["recurrence_id"], frame["attempt"], strict=True))
        lost += len(expected - set(got))
        doubled += len(got) - len(set(got))
        shared += int(frame["trial"].duplicated().sum())
    merged = sum(c[2] for c in compactors)
    return {"errors": len(errors) - len(warnings), "warnings": len(warnings) + problems, "lost": lost,
            "doubled": doubled, "shared numbers": shared, "merged by compactor": merged, "seconds": round(seconds, 1),
            "first error": errors[0][2].strip().splitlines()[-1] if errors else ""}  # fmt: skip


def same_attempts(uri: str, processes: int, attempts: int) -> dict[str, object]:
    job_ids = ["same-attempts"]
    reports, compactors, seconds = run_with_compactors(
        dispatch_same_attempts, [(w, attempts) for w in range(processes)], job_ids, uri, 2
    )
    errors = [r for r in reports if r[0] == "error"]
    store = open_store(uri)
    disagreements, rows = told_versus_stored(store, job_ids, [r for r in reports if r[0] == "worker"])
    store.trials(job_ids[0])
    return {
        "errors": len(errors),
        "told vs stored disagreements": len(disagreements),
        "read problems": len(store.problems),
        "attempts stored": rows,
        "merged by compactors": sum(c[2] for c in compactors),
        "seconds": round(seconds, 1),
        "first error": errors[0][2].strip().splitlines()[-1] if errors else "",
    }


def _uri(backend: str, tmp: str) -> str:
    return f"s3://zeus-races-{uuid.uuid4().hex[:12]}/p" if backend == "s3" else f"{tmp}/{uuid.uuid4().hex}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--trials", type=int, default=10, help="trials per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["local", "s3"], choices=["local", "s3"])
    args = parser.parse_args()
    moto = start_moto() if "s3" in args.backends else None
    failed = False
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="zeus-races-") as tmp:
        for backend in args.backends:
            first = clients_and_compactor(_uri(backend, tmp), args.clients, args.trials, args.rounds)
            print(
                f"{backend}: {args.clients} clients x {args.trials} trials + a compactor, {args.rounds} rounds:",
                first,
                flush=True,
            )
            second = same_attempts(_uri(backend, tmp), args.processes, args.attempts)
            print(
                f"{backend}: {args.processes} processes, the same {args.attempts} attempts, 2 compactors: {second}",
                flush=True,
            )
            failed |= any(first[k] for k in ("errors", "warnings", "lost", "doubled", "shared numbers"))
            failed |= any(second[k] for k in ("errors", "told vs stored disagreements", "read problems"))
    if moto is not None:
        moto[0].send("stop")
        moto[1].join(timeout=10)
    print("result:", "FAILED" if failed else "0 errors, 0 warnings, nothing lost or doubled, 0 disagreements")
    print("reproduce:\n  " + COMMAND + " " + " ".join(sys.argv[1:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
