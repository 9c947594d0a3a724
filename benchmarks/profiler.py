"""Benchmark the JIT power-limit profiler on the example job (CPU, simulated GPU).

Two questions:
1. What does profiling cost the first epoch? First-epoch time with profiling over without,
   as a ratio: real wall time (hook and measurement overhead on this CPU) and simulated GPU
   time (which also counts running some steps at low power limits).
2. Does it choose well? The chosen limit against the exhaustive optimum of the simulated
   model, for several eta, with the model's per-sample cost regret of the choice.

All GPU figures are SIMULATED (the V100-shaped model in zeus/zeus_kfp/power/simulated.py).

    .venv/bin/python benchmarks/profiler.py [--repeats 5] [--batch-size 32] [--profile-iters 40] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "examples")]

import torch  # noqa: E402

from zeus_kfp.job import JobSpec  # noqa: E402
from zeus_kfp.power import PowerModel, SimulatedGPU, candidate_limits  # noqa: E402
from zeus_kfp.train import TrialEnv, example_spec  # noqa: E402
from zeus_kfp.train.dataloader import ZeusDataLoader  # noqa: E402

COMMAND = "benchmarks/profiler.py"
SMOKE = {"repeats": 1, "profile_iters": 5}


def first_epoch(batch_size: int, *, profile: bool, eta: float = 0.5, profile_iters: int = 40) -> dict:
    """Run the example's first epoch once; wall and simulated seconds, and the chosen limit."""
    import task  # examples/task.py

    spec = example_spec()
    train_set, eval_set = task.datasets(None)
    with tempfile.TemporaryDirectory() as log_dir:
        env = TrialEnv.for_trial(
            spec.with_changes(eta_knob=eta, target_metric=2.0), batch_size=batch_size, log_dir=log_dir
        )
        env = dataclasses.replace(env, max_epochs=1, use_optimal_limit=profile, profile_iters=profile_iters)
        torch.manual_seed(0)
        loader = ZeusDataLoader(train_set, env=env, gpu=SimulatedGPU(), shuffle=True)
        evals = ZeusDataLoader(eval_set, split="eval", trial=loader.trial, batch_size=1024)
        model, opt = task.build(torch.device("cpu"))
        started = time.perf_counter()
        for _ in loader.epochs():
            for x, y in loader:
                task.train_step(model, opt, x, y)
            with torch.no_grad():
                for x, _y in evals:
                    model(x)
            loader.report_metric(0.0)
        wall = time.perf_counter() - started
        result = loader.trial.result
        chosen = loader.trial.profiler.chosen_limit if loader.trial.profiler else None
    return {"wall_s": wall, "simulated_s": result.time_s, "chosen_limit_w": chosen}


def step_cost(model: PowerModel, spec: JobSpec, limit_w: float, samples: int) -> float:
    """The job's cost of one simulated step of `samples` at `limit_w` (what optimal_limit minimizes)."""
    seconds, joules = model.step(limit_w, samples)
    return spec.cost_model.cost(joules, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--profile-iters", type=int, default=40, help="profiled steps per limit (Zeus: 40)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    torch.set_num_threads(1)
    first_epoch(args.batch_size, profile=False)  # warm caches and lazy imports

    iters = args.profile_iters
    runs = {
        mode: [first_epoch(args.batch_size, profile=mode, profile_iters=iters) for _ in range(args.repeats)]
        for mode in (False, True)
    }
    med = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("wall_s", "simulated_s")} for m in runs}
    overhead = {
        "batch_size": args.batch_size,
        "profile_iters": iters,
        "repeats": args.repeats,
        "wall_s_without": med[False]["wall_s"],
        "wall_s_with": med[True]["wall_s"],
        "wall_ratio": med[True]["wall_s"] / med[False]["wall_s"],
        "simulated_s_without": med[False]["simulated_s"],
        "simulated_s_with": med[True]["simulated_s"],
        "simulated_ratio": med[True]["simulated_s"] / med[False]["simulated_s"],
    }

    model, limits, spec = PowerModel(), candidate_limits(SimulatedGPU()), example_spec()
    choices = []
    for eta in (0.0, 0.25, 0.5, 0.75, 1.0):
        picks = [
            first_epoch(args.batch_size, profile=True, eta=eta, profile_iters=iters)["chosen_limit_w"]
            for _ in range(args.repeats)
        ]
        priced = spec.with_changes(eta_knob=eta)
        best = model.optimal_limit(limits, priced.cost_model.cost, samples=args.batch_size)
        opt_cost = step_cost(model, priced, best, args.batch_size)
        regrets = [step_cost(model, priced, p, args.batch_size) / opt_cost - 1 for p in picks]
        choices.append(
            {
                "eta": eta,
                "optimum_w": best,
                "chosen_w": picks,
                "matches": sum(p == best for p in picks),
                "max_cost_regret_pct": 100 * max(regrets),
            }
        )

    report = {"simulated": True, "first_epoch": overhead, "choice": choices, "command": f".venv/bin/python {COMMAND}"}
    print("JIT profiler benchmark (example job, CPU; GPU figures SIMULATED, V100-shaped model)")
    print(
        f"first epoch, batch {args.batch_size}, {iters} profiled steps per limit, median of {args.repeats}: "
        f"wall {overhead['wall_s_with']:.3f} s with / {overhead['wall_s_without']:.3f} s without "
        f"= {overhead['wall_ratio']:.2f}x;  simulated GPU time {overhead['simulated_s_with']:.3f} / "
        f"{overhead['simulated_s_without']:.3f} s = {overhead['simulated_ratio']:.2f}x"
    )
    for c in choices:
        print(
            f"eta={c['eta']:.2f}: exhaustive optimum {c['optimum_w']:g} W, chosen {c['chosen_w']} "
            f"({c['matches']}/{len(c['chosen_w'])} match), worst cost regret {c['max_cost_regret_pct']:.2f}%"
        )
    print(
        f"reproduce: .venv/bin/python {COMMAND} --repeats {args.repeats} --batch-size {args.batch_size} "
        f"--profile-iters {iters}"
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
