"""One truth, shown: the same trace-backed job through kfp.local and through the simulator, side by side.

For each workload: `run_local` (the real components, kfp.local subprocesses, a real local store) runs
N recurrences of the job on the trial backend "trace:<workload>/<gpu>"; the simulator runs the same
spec, policy and seed. Every trial is printed from both, with "=" where the two rows are identical
(recurrence, attempt, batch size, power limit, status, cost to the last bit) and "!" where they differ.
It ends with the cumulative figures of both, the default config's and the oracle's.

Run:  .venv/bin/python benchmarks/equivalence.py [--recurrences 10] [--workloads librispeech/a40@0 movielens-1m/v100@4]
(WORKLOAD/GPU[@SEED]; the defaults are the test's pairs, each with a retry and reused profiles.)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from zeus_kfp.pipelines.local import run_local
from zeus_kfp.report.units import duration, si
from zeus_kfp.simulate.replay import compare, live_rows, simulated_rows
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.store import open_store

COMMAND = "python benchmarks/equivalence.py"
SMOKE = {"recurrences": 1, "workloads": ["movielens-1m/v100@4"]}


def _row(row: tuple) -> str:
    rec, attempt, batch, limit, status, cost = row
    return f"{rec:>3} {attempt:>2} {batch:>5} {limit:>5.0f} W {status:>13} {cost:>18.6f}"


def one(workload: str, gpu: str, recurrences: int, seed: int, policy: str, root: Path) -> bool:
    backend = TraceBackend(workload, gpu)
    spec = backend.spec(f"eq-{workload}-{gpu}", max_attempts=5, seed=seed)
    store = str(root / f"{workload}-{gpu}")
    started = time.perf_counter()
    run_local(spec, recurrences=recurrences, store=store, policy=policy, trial_backend=backend.name, runs_dir=root)
    wall = time.perf_counter() - started
    trials = open_store(store).trials(spec.job_id)
    c = compare(trials, spec, backend, policy)
    live, simulated = live_rows(trials), simulated_rows(c.simulation)
    print(f"\n{backend.name}, policy {policy}, seed {seed}, {recurrences} recurrences ({wall:.0f} s through kfp.local)")
    print(f"{'kfp.local: rec att batch limit status cost':<52}   simulator")
    for i in range(max(len(live), len(simulated))):
        a = _row(live[i]) if i < len(live) else "-"
        b = _row(simulated[i]) if i < len(simulated) else "-"
        print(f"{a:<52} {'=' if a == b else '!'} {b}")
    for name, fig in (("kfp.local", c.live), ("simulator", c.simulated), ("default", c.default), ("oracle", c.oracle)):
        print(
            f"  {name:<10} cost {si(fig.cost, 'J'):>9}  energy {si(fig.energy_j, 'J'):>9}  time {duration(fig.time_s)}"
        )
    print(f"  identical trial by trial: {c.identical} {c.first_difference}")
    return c.identical


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recurrences", type=int, default=10)
    parser.add_argument("--workloads", nargs="+", default=["librispeech/a40@0", "movielens-1m/v100@4"])
    parser.add_argument("--seed", type=int, default=0, help="for workloads given without @SEED")
    parser.add_argument("--policy", default="default")
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    with tempfile.TemporaryDirectory(prefix="zeus-eq-") as root:
        ok = []
        for item in args.workloads:
            name, _, seed = item.partition("@")
            workload, gpu = name.split("/")
            ok.append(one(workload, gpu, args.recurrences, int(seed or args.seed), args.policy, Path(root)))
    print(
        f"\nall identical: {all(ok)}  (reproduce: {COMMAND} --recurrences {args.recurrences} "
        f"--workloads {' '.join(args.workloads)} --seed {args.seed} --policy {args.policy})"
    )
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
