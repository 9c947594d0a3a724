"""The real-meter power search through the whole pipeline, on the stand-in H200: pick/optimum by recurrence.

Every figure is SIMULATED: the GPU is the stand-in NVML (zeus_kfp.simulate.nvml_standin), a simulated H200 that
follows the curve fitted to a real H200's sweep (its window noise drawn from the seed), reached through NVML
(zeus_kfp.power.nvml) by every process of the run. What runs is the product: kfp.local and the components
(pipelines.run_local), the store, the plain-script runner reading the script's lines, the profiler's real-meter
search continued across trials and reused across recurrences. The script is zeus_kfp.simulate.standin_train at
batch size 256 (the sweep's), which reaches the target in about 7 epochs of about 2.2 s, 15 s a trial, as long as
the pipeline's trials on the real H200 trained (6-20 s: shared/traces/h200/trials.csv).

For each seed: a fresh node, then `--recurrences` recurrences. For each recurrence it prints the limit its trial
trained at, R (the fitted curve's Zeus cost per sample at that limit over its least; eta 0.5, time priced at
700 W) and the windows the stored profile holds. Last: the median and the worst R per recurrence over the seeds,
and `stand-in h200 pipeline: pick/optimum cost ratio by recurrence 3: median M, worst W over N seeds`.

    .venv/bin/python benchmarks/power_pipeline.py [--seeds 10] [--recurrences 3] [--jobs 2] [--style katib]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

COMMAND = "benchmarks/power_pipeline.py"
SMOKE = {"seeds": 1, "recurrences": 1}
ETA = 0.5


def one_seed(seed: int, recurrences: int, style: str, workdir: Path) -> list[dict]:
    """Run the pipeline on a fresh node of `seed` (in this process: kfp.local's steps inherit its environment)."""
    from zeus_kfp.job import JobSpec
    from zeus_kfp.simulate import nvml_standin
    from zeus_kfp.simulate.standin_train import METRIC

    state = nvml_standin.create(workdir / "node.json", seed=seed, speedup=20.0)
    os.environ.update(nvml_standin.shim_env(state, workdir / "shim"))
    from zeus_kfp.pipelines.local import run_local  # after the environment: its steps start with it

    spec = JobSpec(job_id=f"standin-{seed}", batch_sizes=(256,), default_batch_size=256, target_metric=0.95,
                   max_epochs=20, metric_name=METRIC[style], max_power_w=700.0, eta_knob=ETA)  # fmt: skip
    command = [sys.executable, "-m", "zeus_kfp.simulate.standin_train", "--batch-size", "{batch_size}",
               "--style", style]  # fmt: skip
    store = str(workdir / "store")
    run_local(spec, recurrences=recurrences, store=store, command=command, zeus_aware=False,
              runs_dir=workdir / "runs")  # fmt: skip
    from zeus_kfp.store import open_store

    opened = open_store(store)
    trials, profiles = opened.trials(spec.job_id), opened.profiles(spec.job_id)
    curve = nvml_standin.Node(state).curve()
    least = curve.cost_per_sample(curve.optimum(eta=ETA), ETA)
    out = []
    for row in trials.itertuples():
        held = profiles[profiles["trial"] <= row.trial]
        windows = len(held[held["trial"] == held["trial"].max()]) if not held.empty else 0
        pick = float(row.power_limit_w)
        out.append({"seed": seed, "recurrence": int(row.recurrence), "status": row.status, "pick_w": pick,
                    "ratio": curve.cost_per_sample(pick, ETA) / least, "windows": windows,
                    "final_limit_w": nvml_standin.Node(state).read()["limit_w"]})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--recurrences", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="seeds run at once, each in a process of its own")
    parser.add_argument("--style", default="katib", help="how the script prints (zeus_kfp.simulate.standin_train)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a seed, in a process of its own
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.seeds, args.recurrences = SMOKE["seeds"], SMOKE["recurrences"]
    if args.one is not None:
        with tempfile.TemporaryDirectory(prefix="power-pipeline-") as tmp:
            rows = one_seed(args.one, args.recurrences, args.style, Path(tmp))
        Path(args.out).write_text(json.dumps(rows))
        return

    def run(seed: int) -> list[dict]:
        with tempfile.TemporaryDirectory(prefix="power-pipeline-") as tmp:
            out = Path(tmp) / "rows.json"
            done = subprocess.run([sys.executable, __file__, "--one", str(seed), "--out", str(out), "--recurrences",
                                   str(args.recurrences), "--style", args.style], cwd=tmp, capture_output=True,
                                  text=True, check=False)  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"seed {seed} failed:\n{done.stderr[-3000:]}")
            return json.loads(out.read_text())

    print(f"SIMULATED: the stand-in NVML's H200 (fitted to a measured sweep), batch size 256, style {args.style}")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(run, range(args.seeds)))
    by_recurrence: dict[int, list[float]] = {}
    for rows in results:
        for row in rows:
            by_recurrence.setdefault(row["recurrence"], []).append(row["ratio"])
            print(f"seed {row['seed']:2d} recurrence {row['recurrence']}: {row['status']:>13}, trained at "
                  f"{row['pick_w']:5.0f} W, R {row['ratio']:.3f}, windows {row['windows']:2d}, GPU left at "
                  f"{row['final_limit_w']:.0f} W")  # fmt: skip
    for recurrence, ratios in sorted(by_recurrence.items()):
        print(f"recurrence {recurrence}: R median {statistics.median(ratios):.3f}, worst {max(ratios):.3f} "
              f"({len(ratios)} seeds)")  # fmt: skip
    last = max(by_recurrence)
    ratios = by_recurrence[last]
    print(f"stand-in h200 pipeline: pick/optimum cost ratio by recurrence {last}: median "
          f"{statistics.median(ratios):.3f}, worst {max(ratios):.3f} over {len(ratios)} seeds (SIMULATED)")  # fmt: skip
    print(f"reproduce: .venv/bin/python {COMMAND} --seeds {args.seeds} --recurrences {args.recurrences} "
          f"--jobs {args.jobs} --style {args.style}")  # fmt: skip


if __name__ == "__main__":
    main()
