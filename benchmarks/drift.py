"""Benchmark: what a drift signal is worth to the bandit, and the gate and cap, in the trace simulator.

Drift (issue 24): on each V100/A40 cell at eta 0.5 (and on jobs generated from them, zeus_kfp.simulate.perturb)
the cost minimum moves halfway through Zeus's number of recurrences to another size, at the same level
(zeus_kfp.simulate.shifted_job). Per policy, the regret over the recurrences from the shift on, against the oracle
after it (in post-shift oracle recurrences; mean over seeds, each seed drawing its own new minimum):
without the signal (the reaction does nothing then), and with it under each drift_reaction. Then a false
alarm: the signal with no shift, what forgetting costs when nothing changed.

Gate and cap: runs arrive every P simulated seconds (P = the oracle recurrence's time x --period), as many
as Zeus's number of recurrences, and open a recurrence only under the cap K (zeus_kfp.simulate.recurrence_gate): skipped
runs and regret per opened recurrence, per K.

    .venv/bin/python benchmarks/drift.py --seeds 1-10 --perturbed 30 --jobs 2   # RESULTS.md's figures
    .venv/bin/python benchmarks/drift.py --smoke                                # every part at its smallest
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import product

import numpy as np

from zeus_kfp.job import DRIFT_REACTIONS
from zeus_kfp.policy import get_policy
from zeus_kfp.seeds import seed_list
from zeus_kfp.simulate.recurrence_gate import simulate_gated
from zeus_kfp.simulate.shifted_job import drift_cell, drift_job, run_drift
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES
from zeus_kfp.simulate.workload_runs import build_simulator
from zeus_kfp.simulate.workloads import WORKLOADS

POLICIES = ("zeus-nsdi23", "turning-walk")
REACTIONS = tuple(r for r in DRIFT_REACTIONS if r != "none")
# (label, signal, reaction): told nothing, `none` is what every reaction does.
VARIANTS = (("no signal", False, "none"), *((f"signal, {r}", True, r) for r in REACTIONS))


def parse_seeds(text: str) -> list[int]:
    """'1-20' or '1,2,7' (zeus_kfp.seeds.seed_list over the comma-separated words)."""
    return seed_list(text.split(","))


def drift_task(task: tuple) -> tuple[tuple, dict]:
    """One (source, policy, seed, level): source ("cell", workload, gpu) or ("job", seed, index); the post-shift
    regret per variant, and per reaction on the false alarm. Empty when the source has one reaching size."""
    source, policy, seed, level = task
    if source[0] == "cell":
        job = drift_cell(source[1], source[2], 0.5, seed, level=level)
    else:
        job = drift_job(source[1], source[2], level=level)
    if job is None:
        return task, {}
    chosen = get_policy(policy)
    out = {label: run_drift(job, chosen, seed, signal=s, reaction=r).regret for label, s, r in VARIANTS}
    for reaction in REACTIONS:
        out[f"false alarm, {reaction}"] = run_drift(
            job.false_alarm(), chosen, seed, signal=True, reaction=reaction
        ).regret
    out["false alarm, none"] = run_drift(job.false_alarm(), chosen, seed, signal=False, reaction="none").regret
    return task, out


def gate_task(task: tuple) -> tuple[tuple, dict]:
    """One (workload, gpu, policy, seed, cap, period factor): skipped runs, opened recurrences, regret per opened."""
    workload, gpu, policy, seed, cap, factor = task
    sim = build_simulator(workload, power_trace=gpu, eta=0.5)
    n = sim.default_num_recurrences()
    gated = simulate_gated(sim, get_policy(policy), seed, arrivals=n, period_s=sim.oracle.time_s * factor, cap=cap)
    return task, {"skipped": gated.skipped / n, "regret": gated.result.regret() / gated.opened}


def run_all(fn, tasks: list[tuple], jobs: int) -> dict:
    if jobs <= 1:
        return dict(map(fn, tasks))
    with ProcessPoolExecutor(jobs) as pool:
        return dict(pool.map(fn, tasks, chunksize=4))


def print_drift(title: str, sources: list[tuple], results: dict, seeds_of, level: bool) -> None:
    labels = [v[0] for v in VARIANTS]
    alarms = ["false alarm, none", *(f"false alarm, {r}" for r in REACTIONS)]
    print(f"\n{title}")
    print(f"{'policy':<14}{'n':>5}" + "".join(f"{x:>24}" for x in labels + alarms))
    for policy in POLICIES:
        runs = [results[(s, policy, seed, level)] for s in sources for seed in seeds_of(s)]
        runs = [r for r in runs if r]
        means = [float(np.mean([r[x] for r in runs])) for x in labels + alarms]
        print(f"{policy:<14}{len(runs):>5}" + "".join(f"{m:>24.2f}" for m in means))


def print_per_cell(cells: list[tuple], results: dict, seeds: list[int], level: bool) -> None:
    labels = [v[0] for v in VARIANTS]
    print("\nper cell (mean over seeds): post-shift regret, " + " / ".join(labels))
    for cell in cells:
        row = []
        for policy in POLICIES:
            runs = [r for r in (results[(cell, policy, s, level)] for s in seeds) if r]
            row.append(" / ".join(f"{np.mean([r[x] for r in runs]):.2f}" for x in labels) if runs else "-")
        print(f"{cell[1] + '/' + cell[2]:<24}" + "".join(f"{p}: {v:<28}" for p, v in zip(POLICIES, row, strict=True)))


SMALLEST = ["--seeds", "1", "--workloads", "sentiment140", "--gpus", "v100", "--perturbed", "1",
            "--caps", "1", "2", "--gate-seeds", "1"]  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-10", help="simulation seeds of the drift cells, '1-10' (default)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="workload names (default: all six)")
    parser.add_argument("--gpus", nargs="*", default=list(SHIPPED_POWER_TRACES), help="shipped GPU traces")
    parser.add_argument("--perturbed", type=int, default=30, help="generated drift jobs (default 30; 0: none)")
    parser.add_argument("--perturb-seed", type=int, default=1, help="the generated jobs' seed (default 1)")
    parser.add_argument("--caps", nargs="*", type=int, default=[1, 2, 4], help="caps K for the gate (none: no gate)")
    parser.add_argument(
        "--raw-level",
        action="store_true",
        help="move the minimum without keeping its level (zeus_kfp.simulate.shifted_job)",
    )
    parser.add_argument("--period", type=float, default=0.5, help="arrival period / oracle recurrence time (0.5)")
    parser.add_argument("--gate-seeds", default="1-5", help="seeds of the gate runs (default 1-5)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--smoke", action="store_true", help="every part at its smallest: " + " ".join(SMALLEST))
    args = parser.parse_args(argv)
    return parser.parse_args([*(argv if argv is not None else sys.argv[1:]), *SMALLEST]) if args.smoke else args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    level = not args.raw_level
    seeds, gate_seeds = parse_seeds(args.seeds), parse_seeds(args.gate_seeds)
    cells = [("cell", w, g) for g in args.gpus for w in args.workloads]
    jobs = [("job", args.perturb_seed, i) for i in range(args.perturbed)]
    t0 = time.perf_counter()
    tasks = [(c, p, s, level) for c, p, s in product(cells, POLICIES, seeds)]
    tasks += [(j, p, j[2] + 1, level) for j, p in product(jobs, POLICIES)]
    results = run_all(drift_task, tasks, args.jobs)
    gate_tasks = [(c[1], c[2], p, s, k, args.period) for c, p, s, k in product(cells, POLICIES, gate_seeds, args.caps)]
    gated = run_all(gate_task, gate_tasks, args.jobs)
    wall = time.perf_counter() - t0

    how = "at the same level" if level else "as moved (its level not kept)"
    print("drift: regret after the shift (post-shift oracle recurrences; simulated), eta 0.5, the minimum moved")
    print(f"halfway through Zeus's number of recurrences {how}; false alarm: the signal, no shift")
    print_drift(
        f"V100/A40 cells {', '.join(args.gpus)}, seeds {seeds[0]}-{seeds[-1]}", cells, results, lambda s: seeds, level
    )
    print_per_cell(cells, results, seeds, level)
    if jobs:
        print_drift(f"generated jobs: {len(jobs)} from seed {args.perturb_seed} (kind measured, then moved)", jobs,
                    results, lambda s: (s[2] + 1,), level)  # fmt: skip
    if not args.caps:
        print("reproduce: .venv/bin/python benchmarks/drift.py " + " ".join(sys.argv[1:] if argv is None else argv))
        return
    print(f"\ngate and cap: {len(cells)} cells, runs every {args.period} x the oracle recurrence's time, "
          f"seeds {gate_seeds[0]}-{gate_seeds[-1]} (simulated)")  # fmt: skip
    print(f"{'policy':<14}{'K':>3}{'skipped runs':>14}{'regret / opened recurrence':>28}")
    for policy, k in product(POLICIES, args.caps):
        rows = [gated[(c[1], c[2], policy, s, k, args.period)] for c in cells for s in gate_seeds]
        skipped, regret = np.mean([r["skipped"] for r in rows]), np.mean([r["regret"] for r in rows])
        print(f"{policy:<14}{k:>3}{100 * skipped:>13.1f}%{regret:>28.3f}")
    print(
        f"\nsimulation wall time: {wall:.1f} s ({len(tasks)} drift tasks, {len(gate_tasks)} gate runs, "
        f"{args.jobs} process(es))"
    )
    print("reproduce: .venv/bin/python benchmarks/drift.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
