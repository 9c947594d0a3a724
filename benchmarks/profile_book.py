"""How long the bandit step takes to find the profiles to reuse, as a job's stored profiles grow (issue 39).

`ProfileBook.from_frame` reads the store's profiles table every attempt. It used to build every stored
profile through pandas (about 3.5 ms each: 7 s a step at 2,000 profiles); now only each batch size's latest
usable one. This builds a profiles table of N trials (3 limits each, 4 batch sizes), times the book, and
prints the figures with the command that reproduces them. Not a test: the machine is shared and noisy.

    .venv/bin/python benchmarks/profile_book.py [--profiles 2000] [--repeats 5] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pandas as pd  # noqa: E402

from zeus_kfp.power.reuse import ProfileBook  # noqa: E402

COMMAND = "benchmarks/profile_book.py"
SIZES = (32, 64, 128, 256)


def profiles_table(count: int) -> pd.DataFrame:
    """`count` trials' profiles as the store's profiles table holds them (one per recurrence's first trial)."""
    rows = [
        {"job_id": "bench", "recurrence_id": f"r{t}", "attempt": 1, "recurrence": t, "trial": t,
         "batch_size": SIZES[t % len(SIZES)], "phase": "train", "power_limit_w": float(limit),
         "average_power_w": 0.8 * limit, "throughput": 1000.0 + t % 7, "simulated": True}
        for t in range(1, count + 1)
        for limit in (250, 225, 200)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        args.profiles, args.repeats = 100, 1
    table = profiles_table(args.profiles)
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        book = ProfileBook.from_frame(table)
        times.append(time.perf_counter() - started)
    latest = {size: profile.trial for size, profile in sorted(book.latest.items())}
    print(f"# {COMMAND} --profiles {args.profiles} --repeats {args.repeats}")
    print(f"profile book of {args.profiles} stored profiles: median {statistics.median(times) * 1000:.1f} ms; "
          f"latest trial per batch size {latest}")  # fmt: skip


if __name__ == "__main__":
    main()
