"""Replay the JIT power-limit profiler on the H200 curve measured for a ResNet-18, trial after trial (issue 37).

A job's trials at one batch size (256) run on the simulated H200 fitted to the measured sweep
(zeus_kfp.simulate.h200: every figure SIMULATED, the curve it follows measured), for as long as the
pipeline's trials on the real H200 trained (6-20 s: traces/h200_trials.csv, in that order, repeated).
Each trial hands its profile to the next, as the store does. Two profilers:

- before: the profiler as it was when the H200 ran it (Zeus's sweep of every limit from 700 W down, 1 s
  windows, the exact minimum, and a partial profile reused as final: the next trial trains at its pick);
- now: this project's (zeus_kfp.power.search: the draw first, coarse-to-fine below it, windows sized to
  their noise, ties to the lower limit, an unfinished profile continued by the next trial).

On the measured curve and on two derived from it that bind higher (workloads drawing 450 and 650 W
uncapped), over several seeds of the window noise, it prints each trial's pick, R (the curve's cost per
sample at the pick over its least, Zeus's cost at eta 0.5) and the windows spent; then T, the trials until
the pick stopped changing, and W, the windows at that batch size. Last, one line:
`h200 resnet18 bs256: pick/optimum cost ratio R after T trials; windows W` (the worst over the seeds, now).

    .venv/bin/python benchmarks/power_replay.py [--seeds 20] [--trials 6] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import pandas as pd  # noqa: E402

from zeus_kfp.power import PowerLimitProfiler, ProfileParams, ZeusCost  # noqa: E402
from zeus_kfp.profiles import PowerProfile  # noqa: E402
from zeus_kfp.simulate.h200 import H200Curve, SimulatedH200, fitted, train_for  # noqa: E402

COMMAND = "benchmarks/power_replay.py"
ETA = 0.5
DRAWS = (None, 450.0, 650.0)  # None: the measured curve


def trial_lengths() -> list[float]:
    """How long the pipeline's trials trained on the real H200 (seconds), in order."""
    with resources.files("zeus_kfp.simulate").joinpath("traces", "h200_trials.csv").open() as handle:
        return pd.read_csv(handle)["time_s"].tolist()


@dataclass
class Trial:
    pick: float
    ratio: float  # the curve's cost at the pick over its least
    windows: int  # profile windows at this batch size so far
    complete: bool


def run(curve: H200Curve, *, how: str, seed: int, trials: int) -> list[Trial]:
    """`trials` trials at batch size 256, each handed the profile the one before stored."""
    gpu = SimulatedH200(curve, seed=seed)
    cost_rate = lambda power, throughput: (ETA * power + (1 - ETA) * curve.max_w) / throughput  # noqa: E731
    least = curve.cost_per_sample(curve.optimum(eta=ETA), ETA)
    lengths = trial_lengths()
    stored: PowerProfile | None = None
    out: list[Trial] = []
    for number in range(trials):
        if how == "before" and stored is not None:  # a stored profile, even a partial one, was final
            pick = ZeusCost(cost_rate).choose(stored)
            out.append(Trial(pick, curve.cost_per_sample(pick, ETA) / least, len(stored), out[-1].complete))
            continue
        params = ProfileParams.zeus() if how == "before" else ProfileParams()
        profiler = PowerLimitProfiler(gpu, cost_rate=cost_rate, params=params, reuse=stored)
        train_for(gpu, profiler, lengths[number % len(lengths)])
        profiler.restore()
        stored = PowerProfile.of(profiler.profile().rows.query("phase == 'train'"))
        pick = profiler.best_limit()
        assert pick is not None
        windows = len(stored)
        out.append(Trial(pick, curve.cost_per_sample(pick, ETA) / least, windows, profiler.done))
    return out


def settled_after(trials: list[Trial]) -> int:
    """The trials until the pick stopped changing (1-based)."""
    last = trials[-1].pick
    at = len(trials)
    while at > 1 and trials[at - 2].pick == last:
        at -= 1
    return at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.trials = 2, 3
    base = fitted()
    print(f"# {COMMAND} --seeds {args.seeds} --trials {args.trials}  (all figures SIMULATED on the fitted H200)")
    print(f"trial lengths (s, measured): {trial_lengths()}")
    summary = {}
    for draw in DRAWS:
        curve = base if draw is None else base.scaled(draw)
        name = f"draws {curve.draw_w:.0f} W" + (" (measured)" if draw is None else " (derived)")
        optimum = curve.optimum(eta=ETA)
        saving = 1 - curve.cost_per_sample(optimum, ETA) / curve.cost_per_sample(curve.max_w, ETA)
        print(f"\n## {name}: optimum {optimum:g} W, {saving:.1%} below {curve.max_w:g} W")
        for how in ("before", "now"):
            runs = [run(curve, how=how, seed=seed, trials=args.trials) for seed in range(args.seeds)]
            second = [r[min(1, len(r) - 1)].ratio for r in runs]
            final = [r[-1].ratio for r in runs]
            settled = [settled_after(r) for r in runs]
            windows = [r[-1].windows for r in runs]
            picks = sorted({r[-1].pick for r in runs})
            complete = sum(r[-1].complete for r in runs)
            within = sum(ratio <= 1.01 for ratio in second)
            print(
                f"{how:>6}: R <= 1.01 after trial 2 in {within}/{len(runs)} seeds; "
                f"R after trial 2 median {statistics.median(second):.3f} max {max(second):.3f}; "
                f"final R median {statistics.median(final):.3f} max {max(final):.3f}; picks {picks} W; "
                f"settled after max {max(settled)} trials; "
                f"windows median {statistics.median(windows):g} max {max(windows)}; "
                f"complete {complete}/{len(runs)}"
            )
            trials = ", ".join(f"{t.pick:g} W (R {t.ratio:.3f}, {t.windows} windows)" for t in runs[0])
            print(f"        seed 0: {trials}")
            summary[(draw, how)] = (max(final), max(settled), max(windows))
    r, t, w = summary[(None, "now")]
    print(f"\nh200 resnet18 bs256: pick/optimum cost ratio {r:.3f} after {t} trials; windows {w}")


if __name__ == "__main__":
    main()
