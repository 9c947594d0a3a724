"""Benchmark: both policies on every workload x power trace through one simulator, plus decide() speed.

Prints, per cell, cumulative cost / oracle cost for each policy (mean over seeds), the ratio
default / zeus-nsdi23, mean regret (cumulative cost minus N x oracle, in oracle recurrences),
never-run (0-epoch quirk) trials per run, and the wall time of the whole run. Then the time of one
decide() over a 10,000-trial history (the store's read + decide budget is 1 s at 10k trials).

    .venv/bin/python benchmarks/policy.py                      # 12 cells x 5 seeds x 2 policies
    .venv/bin/python benchmarks/policy.py --seeds 1-20         # the issue's seeds
    .venv/bin/python benchmarks/policy.py --seeds 1-20 --fidelity   # zeus-nsdi23 vs Zeus's own simulator
    .venv/bin/python benchmarks/policy.py --power-trace my_gpu.csv --workloads squad
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from zeus.job import TrialRecord, TrialStatus
from zeus.policy import POLICY_NAMES, get_policy
from zeus.simulate.engine import SimulationResult
from zeus.simulate.reference import FIDELITY_TOLERANCE, ZEUS_SIMULATOR_REFERENCE
from zeus.simulate.runner import build_simulator, simulate_seeds
from zeus.simulate.trace import SHIPPED_POWER_TRACES, shipped_trace
from zeus.simulate.workloads import WORKLOADS

BASELINE, OURS = "zeus-nsdi23", "default"


def parse_seeds(text: str) -> list[int]:
    """'1-5' or '1,2,7'."""
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def quirk_trials(r: SimulationResult) -> int:
    return sum(1 for t in r.history if t.time_s == 0 and t.status is not TrialStatus.REACHED)


def run_cells(workloads: list[str], power_traces: list[str], seeds: list[int]) -> list[dict]:
    cells = []
    for power in power_traces:
        path = shipped_trace(power) if power in SHIPPED_POWER_TRACES else power
        for workload in workloads:
            sim = build_simulator(workload, power_trace=path)
            cell = {"cell": f"{workload}/{power}", "n": sim.default_num_recurrences()}
            for name in (BASELINE, OURS):
                results = simulate_seeds(sim, name, seeds)
                cell[name] = {
                    "ratio": float(np.mean([r.cost_over_oracle for r in results])),
                    "regret": float(np.mean([r.regret() for r in results])),
                    "quirk": float(np.mean([quirk_trials(r) for r in results])),
                }
            cells.append(cell)
    return cells


def print_fidelity(cells: list[dict]) -> None:
    """zeus-nsdi23 here vs Zeus's own simulator (shipped traces only; reference uses seeds 1-20)."""
    print(f"\nfidelity: zeus-nsdi23 cost / oracle, ours vs Zeus's simulator (tolerance {FIDELITY_TOLERANCE:.0%})")
    for c in cells:
        workload, gpu = c["cell"].split("/")
        ref = ZEUS_SIMULATOR_REFERENCE.get((workload, gpu))
        if ref is None:
            continue
        ours = c[BASELINE]["ratio"]
        ok = "ok" if abs(ours / ref[0] - 1) < FIDELITY_TOLERANCE else "OUT"
        print(f"{c['cell']:<22}{ref[0]:>8.3f}{ours:>8.3f}{100 * (ours / ref[0] - 1):>+8.2f} %  {ok}")


def decide_speed(num_trials: int = 10_000) -> dict[str, float]:
    """Seconds for one decide() over a synthetic `num_trials` history on the librispeech/V100 job."""
    sim = build_simulator("librispeech")
    spec = sim.spec
    seed_run = sim.run(get_policy(BASELINE), seed=1)
    rng = np.random.default_rng(0)
    arms = sorted({t.batch_size for t in seed_run.history[-50:]})
    history = list(seed_run.history)
    while len(history) < num_trials:
        b = int(rng.choice(arms))
        cost = float(rng.normal(1.0, 0.05)) * sim.oracle.cost / seed_run.num_recurrences
        history.append(TrialRecord(len(history), len(history), b, TrialStatus.REACHED, cost, cost / 300, cost))
    out = {}
    for name in POLICY_NAMES:
        policy = get_policy(name)
        policy.decide(spec, history, 1)
        t0 = time.perf_counter()
        for _ in range(5):
            policy.decide(spec, history, 1)
        out[name] = (time.perf_counter() - t0) / 5
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-5", help="seeds, '1-5' or '1,2,7' (default 1-5)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="workload names (default: all six)")
    parser.add_argument(
        "--power-trace",
        nargs="*",
        default=list(SHIPPED_POWER_TRACES),
        help="shipped GPU names (v100, a40) or paths of power-trace CSVs (default: v100 a40)",
    )
    parser.add_argument("--fidelity", action="store_true", help="also compare zeus-nsdi23 with Zeus's simulator")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    t0 = time.perf_counter()
    cells = run_cells(args.workloads, args.power_trace, seeds)
    wall = time.perf_counter() - t0
    print(f"cost / oracle, mean over seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} seeds); regret in oracle recurrences")
    head = f"{'cell':<22}{'N':>5}{BASELINE:>13}{OURS:>10}{'ratio':>8}{'regret zeus':>13}{'regret ours':>13}"
    print(head + f"{'never-run/run z|o':>19}")
    for c in cells:
        z, o = c[BASELINE], c[OURS]
        print(
            f"{c['cell']:<22}{c['n']:>5}{z['ratio']:>13.4f}{o['ratio']:>10.4f}{o['ratio'] / z['ratio']:>8.4f}"
            f"{z['regret']:>13.2f}{o['regret']:>13.2f}{z['quirk']:>10.1f} | {o['quirk']:<6.1f}"
        )
    rz = np.mean([c[BASELINE]["regret"] for c in cells])
    ro = np.mean([c[OURS]["regret"] for c in cells])
    wins = sum(c[OURS]["ratio"] < c[BASELINE]["ratio"] for c in cells)
    print(f"mean regret: {BASELINE} {rz:.3f}, {OURS} {ro:.3f} ({100 * (1 - ro / rz):.1f} % less)")
    print(f"{OURS} cheaper on {wins} of {len(cells)} cells")
    runs = len(cells) * len(seeds) * 2
    print(f"simulation wall time: {wall:.1f} s for {len(cells)} cells x {len(seeds)} seeds x 2 policies ({runs} runs)")
    if args.fidelity:
        print_fidelity(cells)
    speed = decide_speed()
    print("decide() over a 10,000-trial history: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in speed.items()))
    print("reproduce: .venv/bin/python benchmarks/policy.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
