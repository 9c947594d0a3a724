"""Store speed: append one trial, and read the whole history + decide the next batch size.

At 100, 1,000 and 10,000 trials of one job, on the S3 protocol (moto's server, in its own
process on 127.0.0.1) and on a local directory, after compaction. Target: read + decide
under 1 s at 10,000 trials.

Setup imports the history as compaction would have left it (zeus.store.bulk), then appends
trials through the normal API (timed), compacts, and times the real read path:
`store.history()` (list + snapshot + newer events -> DataFrame -> TrialRecords) followed by
`get_policy("default").decide()`.

Reproduce: .venv/bin/python benchmarks/store.py            (about a minute)
           .venv/bin/python benchmarks/store.py --sizes 100 1000 --backends local
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

import numpy as np
import pandas as pd

from zeus.job import JobSpec, TrialResult
from zeus.policy import get_policy
from zeus.store import open_store
from zeus.store.bulk import import_trials

SPEC = JobSpec(
    job_id="bench-job",
    batch_sizes=(32, 64, 128, 256, 512, 1024),
    default_batch_size=256,
    target_metric=0.9,
    max_epochs=30,
)
REPEATS = 5
COMMAND = "  .venv/bin/python benchmarks/store.py"


def _serve_moto(conn) -> None:  # runs in a child process, so the server does not share our GIL
    """moto's S3 server on 127.0.0.1, with conditional PUTs decided one at a time as MinIO and S3
    do (the tests' server: tests/conftest.py says why racing clients need it)."""
    import logging

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from conftest import _atomic_conditional_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = _atomic_conditional_server()
    server.start()
    conn.send(server.get_host_and_port())
    conn.recv()  # until told to stop
    server.stop()


def synthetic_history(count: int, seed: int = 0) -> pd.DataFrame:
    """A plausible long history: recurrences of 1-3 attempts, cost lowest at batch size 256."""
    rng = np.random.default_rng(seed)
    rows, recurrence = [], 0
    while len(rows) < count:
        recurrence += 1
        for attempt in range(1, 4):
            batch = int(rng.choice(SPEC.batch_sizes, p=[0.05, 0.1, 0.2, 0.4, 0.15, 0.1]))
            epochs = int(rng.integers(3, 10)) + abs(int(np.log2(batch / 256))) * 2
            reached = rng.random() < 0.85
            time_s = epochs * 60.0 * (256 / batch) ** 0.3
            rows.append(
                {
                    "recurrence": recurrence,
                    "recurrence_id": f"hist-{recurrence}",
                    "attempt": attempt,
                    "batch_size": batch,
                    "status": "reached" if reached else "not_reached",
                    "time_s": time_s,
                    "energy_j": time_s * rng.uniform(180, 260),
                    "num_epochs": epochs,
                }
            )
            if reached or len(rows) >= count:
                break
    return pd.DataFrame(rows[:count])


def timed(fn: Callable[[], object], repeats: int = REPEATS) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def bench(uri: str, count: int) -> dict[str, float]:
    store = open_store(uri)
    import_trials(store, SPEC, synthetic_history(count))
    policy = get_policy("default")

    appends = []
    for i in range(REPEATS):
        rid = f"bench-{uuid.uuid4().hex[:8]}"
        started = time.perf_counter()
        store.begin_recurrence(SPEC.job_id, rid)
        decision = policy.decide(SPEC, store.history(SPEC.job_id), seed=i)
        store.dispatch_trial(SPEC.job_id, rid, 1, decision)
        done = TrialResult.build(
            SPEC, batch_size=decision.batch_size, status="reached", time_s=300.0, energy_j=60_000.0, num_epochs=5
        )
        store.finish_trial(SPEC.job_id, rid, 1, done)
        appends.append(time.perf_counter() - started)
    append_only = []
    for _ in range(REPEATS):  # the write path alone: dispatch + finish one trial
        rid = f"bench-w-{uuid.uuid4().hex[:8]}"
        store.begin_recurrence(SPEC.job_id, rid)
        started = time.perf_counter()
        store.dispatch_trial(SPEC.job_id, rid, 1, decision)
        store.finish_trial(SPEC.job_id, rid, 1, done)
        append_only.append(time.perf_counter() - started)

    loose_read, _ = timed(lambda: store.history(SPEC.job_id))
    started = time.perf_counter()
    store.compact(SPEC.job_id)
    compact_s = time.perf_counter() - started
    read_s, history = timed(lambda: store.history(SPEC.job_id))
    assert len(history) == count + 2 * REPEATS, len(history)
    decide_s, _ = timed(lambda: policy.decide(SPEC, history, seed=0))
    both_s, _ = timed(lambda: policy.decide(SPEC, store.history(SPEC.job_id), seed=0))
    return {
        "append_trial_s": statistics.median(append_only),
        "decide_and_append_s": statistics.median(appends),
        "read_before_compact_s": loose_read,
        "compact_s": compact_s,
        "read_s": read_s,
        "decide_s": decide_s,
        "read_decide_s": both_s,
    }


def start_moto() -> tuple[object, object]:
    """Start the S3 server in its own process and point ZEUS_S3_* at it. Returns (pipe, process)."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve_moto, args=(child,), daemon=True)
    server.start()
    host, port = parent.recv()
    os.environ.update(
        {
            "ZEUS_S3_ENDPOINT": f"{host}:{port}",
            "ZEUS_S3_SECURE": "false",
            "ZEUS_S3_ACCESS_KEY": "bench",
            "ZEUS_S3_SECRET_KEY": "bench-secret",
        }
    )
    return parent, server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--backends", nargs="+", default=["s3", "local"], choices=["s3", "local"])
    args = parser.parse_args()

    server = None
    if "s3" in args.backends:
        parent, server = start_moto()
    print(f"zeus-kfp store benchmark: {REPEATS} repeats, medians, one job; policy 'default'")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; S3 = moto server on 127.0.0.1 (separate process)")
    header = (
        f"{'backend':8} {'trials':>7} {'append':>8} {'decide+append':>14} {'read(loose)':>12} {'compact':>8} "
        f"{'read':>8} {'decide':>8} {'read+decide':>12}"
    )
    print(
        "append: dispatch + finish one trial | decide+append: begin recurrence, read history, decide, dispatch,\n"
        "finish | read(loose): history with 10 trials not yet compacted | compact: merge them | read, decide,\n"
        "read+decide: after compaction (the target)"
    )
    print(header)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            for count in args.sizes:
                uri = f"s3://zeus-bench-{uuid.uuid4().hex[:12]}/p" if backend == "s3" else f"{tmp}/{count}"
                r = bench(uri, count)
                print(
                    f"{backend:8} {count:>7} {r['append_trial_s']:>7.3f}s {r['decide_and_append_s']:>13.3f}s "
                    f"{r['read_before_compact_s']:>11.3f}s {r['compact_s']:>7.3f}s {r['read_s']:>7.3f}s "
                    f"{r['decide_s']:>7.3f}s {r['read_decide_s']:>11.3f}s",
                    flush=True,
                )
                if count >= 10_000 and r["read_decide_s"] >= 1.0:
                    failed = True
    if server is not None:
        parent.send("stop")
        server.join(timeout=10)
    print("target: read + decide < 1 s at 10,000 trials:", "MISSED" if failed else "met")
    print("reproduce:\n" + COMMAND)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
