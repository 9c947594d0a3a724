"""Benchmark: regret with K recurrences in flight, with the mid-trial early stop and without it (simulated).

Issue 24's bar: K = 4 regret within 1.25x of K = 1 for `turning-walk`, eta 0.5, the V100 and A40 traces,
seeds 1-20 and 21-40 (the check against tuning); K = 8 reported. Each simulation is
`Simulator.run(policy, seed, None, K, live_stop=...)`: with `live_stop` a running trial reads beta x the
cheapest reached recurrence at every epoch end on the simulated clock (zeus_kfp.simulate.engine), as the
pipeline's train step does (zeus_kfp.steps.threshold_feed); without it each trial keeps the threshold it was
dispatched with (the project before issue 24 item 2).

Where the excess goes (`--breakdown`): per K, each trial's cost over the oracle's recurrence cost, summed
per simulation and averaged over seeds and cells, split by why the trial ran (the decision's stage) and
whether it was dispatched with no threshold (nothing had reached yet: only a live read can stop it).
`--compare` runs each simulation without the live stop too and prints, per (stage, status), the cost with,
without and the difference: which trials the live stop cut, and what that changed downstream.

    .venv/bin/python benchmarks/overlap.py --seeds 1-20 --jobs 2
    .venv/bin/python benchmarks/overlap.py --seeds 21-40 --jobs 2
    .venv/bin/python benchmarks/overlap.py --seeds 1-20 --no-live-stop --policies turning-walk
    .venv/bin/python benchmarks/overlap.py --seeds 1-20 --policies turning-walk --in-flight 2 4 --compare
    .venv/bin/python benchmarks/overlap.py --smoke
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from itertools import product

import numpy as np

from zeus_kfp.policy import get_policy
from zeus_kfp.policy.turning_walk import DEFAULT, TurningWalkPolicy
from zeus_kfp.seeds import seed_list
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES
from zeus_kfp.simulate.workload_runs import build_simulator
from zeus_kfp.simulate.workloads import WORKLOADS

POLICIES = ("zeus-nsdi23", "turning-walk")
SMALLEST = ["--seeds", "1", "--workloads", "cifar100", "--gpus", "v100", "--in-flight", "1", "2"]
SMALLEST += ["--breakdown", "--compare"]


def parse_seeds(text: str) -> list[int]:
    """'1-20' or '1,2,7' (zeus_kfp.seeds.seed_list over the comma-separated words)."""
    return seed_list(text.split(","))


def make_policy(name: str, first_wave_size: int | None):
    """The policy by name; turning-walk with its first wave's size changed when asked (a what-if, not the default)."""
    if name != "turning-walk" or first_wave_size is None:
        return get_policy(name)
    return TurningWalkPolicy(replace(DEFAULT, first_wave=first_wave_size))


def run_task(task: tuple) -> tuple[tuple, dict]:
    """One (workload, gpu, policy, K, seeds, live, first wave size) task: mean regret and the mean excess
    per trial kind."""
    workload, gpu, policy, k, seeds, live, first_wave_size = task
    sim = build_simulator(workload, power_trace=gpu, eta=0.5)
    per = sim.oracle.cost  # one oracle recurrence (the simulator keeps it per recurrence)
    regrets, parts, outcomes = [], defaultdict(float), defaultdict(float)
    for seed in seeds:
        result = sim.run(make_policy(policy, first_wave_size), seed, None, k, live_stop=live)
        regrets.append(result.regret())
        for rec in result.rows:
            for t in rec.trials:
                kind = f"{t.stage}{'' if t.cost_threshold is not None else ' (no threshold at dispatch)'}"
                parts[kind] += t.cost / per / len(seeds)
                outcomes[f"{t.stage} {t.status.value}"] += t.cost / per / len(seeds)
                outcomes[f"{t.stage} {t.status.value} (trials)"] += 1 / len(seeds)
            parts["minus the oracle"] -= 1.0 / len(seeds)
    summary = {"regret": float(np.mean(regrets)), "parts": dict(parts), "outcomes": dict(outcomes)}
    return task[:6], summary  # keyed by (workload, gpu, policy, K, seeds, live): the first wave is one per run


def run_tasks(tasks: list[tuple], jobs: int) -> dict[tuple, dict]:
    if jobs <= 1:
        return dict(map(run_task, tasks))
    with ProcessPoolExecutor(jobs) as pool:
        return dict(pool.map(run_task, tasks, chunksize=1))


def compare(results: dict, cells: list, policies: list[str], ks: list[int], seeds: tuple) -> None:
    """Per policy and K: each (stage, status)'s cost in oracle recurrences per simulation and its trials, with
    the live stop, without it, and the difference (mean over cells and seeds)."""
    for p, k in product(policies, ks):
        mean = {live: defaultdict(float) for live in (True, False)}
        for (w, g), live in product(cells, (True, False)):
            for kind, value in results[(w, g, p, k, seeds, live)]["outcomes"].items():
                mean[live][kind] += value / len(cells)
        regret = {live: np.mean([results[(w, g, p, k, seeds, live)]["regret"] for w, g in cells]) for live in mean}
        print(f"\n{p}, K = {k}: regret {regret[True]:.3f} with the live stop, {regret[False]:.3f} without")
        for kind in sorted(set(mean[True]) | set(mean[False])):
            a, b = mean[True][kind], mean[False][kind]
            print(f"  {kind:<48}{a:>9.3f}{b:>9.3f}{a - b:>+9.3f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1-20", help="seeds, '1-20' or '1,2,7' (default 1-20)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="workload names (default: all six)")
    parser.add_argument("--gpus", nargs="*", default=list(SHIPPED_POWER_TRACES), help="shipped GPU traces")
    parser.add_argument("--policies", nargs="*", default=list(POLICIES), help="policy names")
    parser.add_argument("--in-flight", nargs="*", type=int, default=[1, 2, 4, 8], help="K values")
    parser.add_argument("--no-live-stop", action="store_true", help="each trial keeps its dispatched threshold")
    parser.add_argument("--breakdown", action="store_true", help="where the excess goes, per K (turning-walk)")
    parser.add_argument(
        "--compare", action="store_true", help="also without the live stop: each trial kind's cost, with minus without"
    )
    parser.add_argument("--first-wave-size", type=int, default=None, help="turning-walk's first-wave size (what-if)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--smoke", action="store_true", help="the smallest run: " + " ".join(SMALLEST))
    args = parser.parse_args(argv)
    return parser.parse_args([*(argv if argv is not None else sys.argv[1:]), *SMALLEST]) if args.smoke else args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seeds, live = tuple(parse_seeds(args.seeds)), not args.no_live_stop
    ks = sorted(set(args.in_flight) | {1})
    cells = list(product(args.workloads, args.gpus))
    wave = args.first_wave_size
    tasks = [(w, g, p, k, seeds, live, wave) for (w, g), p, k in product(cells, args.policies, ks)]
    if args.compare:
        tasks += [(w, g, p, k, seeds, False, wave) for (w, g), p, k in product(cells, args.policies, ks)]
    t0 = time.perf_counter()
    results = run_tasks(tasks, args.jobs)
    wall = time.perf_counter() - t0
    what = "mid-trial stop" if live else "dispatched threshold only"
    print(f"simulated: mean regret over {len(cells)} cells (eta 0.5), seeds {seeds[0]}-{seeds[-1]}, {what}")
    print(f"{'K':>3}" + "".join(f"{p:>16}{'x K=1':>8}" for p in args.policies))
    for k in ks:
        line = f"{k:>3}"
        for p in args.policies:
            mean = np.mean([results[(w, g, p, k, seeds, live)]["regret"] for w, g in cells])
            base = np.mean([results[(w, g, p, 1, seeds, live)]["regret"] for w, g in cells])
            line += f"{mean:>16.3f}{mean / base:>8.2f}"
        print(line)
    for p in args.policies:
        print(f"\nper cell, {p}: regret at K = " + ", ".join(map(str, ks)))
        for w, g in cells:
            print(f"  {w:>13}/{g:<5}" + "".join(f"{results[(w, g, p, k, seeds, live)]['regret']:>9.2f}" for k in ks))
    if args.breakdown:
        for p in args.policies:
            print(f"\nwhere the regret goes, {p} (oracle recurrences, mean over cells and seeds):")
            for k in ks:
                parts: dict[str, float] = defaultdict(float)
                for w, g in cells:
                    for kind, value in results[(w, g, p, k, seeds, live)]["parts"].items():
                        parts[kind] += value / len(cells)
                print(f"  K = {k}: " + "; ".join(f"{kind} {v:.2f}" for kind, v in sorted(parts.items())))
    if args.compare:
        compare(results, cells, args.policies, ks, seeds)
    print(f"\nsimulation wall time: {wall:.1f} s for {len(tasks) * len(seeds)} runs ({args.jobs} process(es))")
    print("reproduce: .venv/bin/python benchmarks/overlap.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
