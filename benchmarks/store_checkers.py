"""The store's randomized interleaving checkers at full size (the suite runs them small, with fixed seeds).

Four checkers (tests/store/checkers.py), each run a function of its seed (tests/store/interleave.py: a
seeded scheduler orders every request of real consensus, log and Store code over an in-memory object
store, injecting lost answers, late PUTs, failed GETs and LISTs, slow LISTs and crashes):
- consensus: 2-6 proposers (some learning, yielding, `fresh` or retrying) on one register: one value, a
  proposed one, in every `v.*` object, learned by a learner after the run.
- log: 4 appenders x 4 entries and 2 readers on one log: every read slots 1..upto, no slot differing between
  reads, every acknowledged append at its slot after the run, no entry where its appender never proposed it.
- store: 4 twin Stores dispatching and finishing the same 3 attempts with different batch sizes and results,
  a bystander beginning recurrences, a compactor on half the seeds: every caller told the decision the store
  keeps (store_workers.py's check), every result accepted stored and every one refused not, numbers dense.
- lifecycle: a job deleted and made again 3 times (2 trials a making; on half the seeds it ends deleted) while a
  compactor and 3 readers work on it (tests/store/lifecycle_checker.py; no late PUTs): every read of one
  making, trials numbered alike by every read, the last making's trials all there, or nothing left of a
  deleted job and its id made again.
Printed: runs, requests, faults injected, violations (each with its seed) and the command that replays
them. Seeds start at 1,000,000 so they are not the suite's.

Reproduce: nice .venv/bin/python benchmarks/store_checkers.py        (full size: about 10 minutes on 2 busy cores)
           .venv/bin/python benchmarks/store_checkers.py --checkers log --seeds 1000017   (replay one seed)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "store")]
from checkers import CHECKERS, SIZES, run  # noqa: E402

COMMAND = ".venv/bin/python benchmarks/store_checkers.py"
RUNS = {"consensus": 50_000, "log": 8_000, "store": 2_000, "lifecycle": 2_000}
FIRST_SEED = 1_000_000
SMOKE_RUNS = {"consensus": 20, "log": 5, "store": 2, "lifecycle": 2}
FAULTS = ("lost answers", "late PUTs", "failed gets", "failed lists", "slow lists", "crashes")


def check(checker: str, seeds: list[int], size: str) -> tuple[Counter[str], list[tuple[int, str]], float]:
    """(counts summed over the runs, (seed, violation) pairs, seconds)."""
    started, counts, found = time.perf_counter(), Counter(), []
    for seed in seeds:
        outcome = run(checker, seed, size)
        counts.update(outcome.counts)
        found += [(seed, violation) for violation in outcome.violations]
    return counts, found, time.perf_counter() - started


def report(checker: str, seeds: list[int], counts: Counter[str], found: list[tuple[int, str]], seconds: float) -> None:
    requests = sum(n for kind, n in counts.items() if kind.endswith(" requests"))
    faults = sum(counts[kind] for kind in FAULTS)
    span = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else " ".join(map(str, seeds))
    print(f"{checker}: {counts['runs']:,} runs (seeds {span}), {requests:,} requests, {faults:,} faults injected,"
          f" {len(found)} violations, {seconds:.0f} s", flush=True)  # fmt: skip
    print(f"  faults: {', '.join(f'{kind} {counts[kind]:,}' for kind in FAULTS)}; late PUTs landed"
          f" {counts['late PUTs landed']:,}", flush=True)  # fmt: skip
    said = {*FAULTS, "runs", "late PUTs landed"}
    done = {k: n for k, n in sorted(counts.items()) if k not in said and not k.endswith(" requests")}
    print(f"  operations: {', '.join(f'{kind} {n:,}' for kind, n in done.items())}", flush=True)
    for seed, violation in found[:10]:
        print(f"  VIOLATION seed {seed}: {violation[:400]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkers", nargs="+", default=list(CHECKERS), choices=list(CHECKERS))
    parser.add_argument("--runs", type=int, help="runs per checker (default: consensus 50,000, log 8,000, store and "
                        "lifecycle 2,000)")  # fmt: skip
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument("--seeds", type=int, nargs="+", help="replay these seeds only")
    parser.add_argument("--size", choices=list(SIZES), default="full", help="small: the suite's size")
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    failed = False
    for checker in args.checkers:
        runs = SMOKE_RUNS[checker] if args.smoke else args.runs or RUNS[checker]
        seeds = args.seeds or list(range(args.first_seed, args.first_seed + runs))
        counts, found, seconds = check(checker, seeds, args.size)
        report(checker, seeds, counts, found, seconds)
        failed |= bool(found)
        if found:
            print(f"  replay: {COMMAND} --checkers {checker} --size {args.size} --seeds {found[0][0]}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print("result:", "VIOLATIONS FOUND" if failed else "0 violations")
    print("reproduce:\n  " + " ".join([COMMAND, *sys.argv[1:]]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
