"""A plain script swept over every power limit, then run through `zeus-kfp run`: the pipeline's pick against the sweep.

On a lent NVIDIA GPU (NVML, limits settable: root or SYS_ADMIN), figures MEASURED:

    PYTHONPATH=. python benchmarks/gpu_sweep.py --out gpu_sweep.json        (also: gpu_check.py --sweep)

With `--standin` the same runs on the stand-in H200 (zeus_kfp.simulate.nvml_standin: a simulated H200 fitted to a
real one's sweep, reached through the same NVML code), every figure SIMULATED: how it is built and tested here.

1. sweep: the script runs once, and from outside every limit from the maximum down in `--step-w` steps (then
   back up, so drift cancels) is set, `--warmup-s` of training let pass, and a `--window-s` window measured
   between the script's `step=N` lines (evaluations left out): samples per second (steps x batch size), power, and
   Zeus's cost per sample (eta 0.5, time priced at the maximum limit). The reference is the least cost per
   sample over the limits, each limit's windows averaged: the sweep of shared/traces/h200, in code.
2. pipeline: `zeus-kfp run --command <the same script>` for `--recurrences` recurrences of a job with that one
   batch size, on a store of its own: per recurrence the limit its trial trained at, and the windows its
   stored profile holds.
3. compare: each pick's cost per sample in the sweep over the sweep's least (R), and the windows spent.

The script: examples/train_gpu_plain.py on a GPU (compute-bound, bf16), zeus_kfp.simulate.standin_train on the
stand-in; `--command` names another (`{python}` and `{batch_size}` are filled in). The GPU is left at its
default limit, whatever happens.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

COMMAND = "PYTHONPATH=. python benchmarks/gpu_sweep.py"
ETA = 0.5
GPU_SCRIPT = "{python} " + str(ROOT / "examples" / "train_gpu_plain.py") + " --batch-size {batch_size}"
STANDIN_SCRIPT = "{python} -m zeus_kfp.simulate.standin_train --batch-size {batch_size}"
SMOKE = {"standin": True, "passes": 1, "step_w": 100.0, "window_s": 1.0, "recurrences": 1}
STEP = re.compile(r"\bstep=(\d+)")
READ_TIMEOUT_S = 300.0  # real seconds without a step line before the sweep gives up on the script


@dataclass(frozen=True)
class Stamp:
    """A line as it arrived: the step it names (None: an evaluation's line), and the GPU's clock and energy then."""

    step: int | None
    clock_s: float
    energy_j: float


class StepLines:
    """Reads the script's lines as they arrive (a thread), stamping each with the GPU's clock and energy. A window is
    the training between consecutive `step=N` lines: an interval that holds an evaluation (a line without a step
    between them, `epoch=E accuracy=A`) is left out, as the sweep of shared/traces/h200 measured training alone."""

    def __init__(self, proc: subprocess.Popen, gpu: Any) -> None:
        self.proc, self.gpu = proc, gpu
        self.stamps: list[Stamp] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            found = STEP.search(line) if "epoch" not in line else None
            stamp = Stamp(int(found.group(1)) if found else None, self.gpu.clock(), self._energy())
            with self._cond:
                self.stamps.append(stamp)
                self._cond.notify_all()

    def _energy(self) -> float:
        return sum(self.gpu.energy_j(i) for i in range(self.gpu.device_count()))

    def window(self, after_s: float, seconds: float) -> tuple[int, float, float]:
        """(steps, seconds, joules) of `seconds` of training that begins at the first step line stamped at
        `after_s` or later (GPU clock), summed over the intervals between step lines that hold no evaluation."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        with self._cond:
            while True:
                later = [s for s in self.stamps if s.clock_s >= after_s]
                steps, time_s, joules = 0, 0.0, 0.0
                for a, b in itertools.pairwise(later):
                    if a.step is not None and b.step is not None and b.step > a.step:
                        steps, time_s, joules = steps + b.step - a.step, time_s + b.clock_s - a.clock_s, joules + (
                            b.energy_j - a.energy_j)  # fmt: skip
                    if time_s >= seconds:
                        return steps, time_s, joules
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the script printed too few step lines after {after_s:.1f} s of the GPU's clock"
                    )
                self._cond.wait(0.5)


def _fill(command: str, batch_size: int) -> list[str]:
    return [part.replace("{python}", sys.executable).replace("{batch_size}", str(batch_size))
            for part in shlex.split(command)]  # fmt: skip


def sweep(gpu: Any, command: str, batch_size: int, *, step_w: float, warmup_s: float, window_s: float,
          passes: int) -> list[dict[str, Any]]:  # fmt: skip
    """Step 1 (the module docstring): one window per limit and pass, between two step lines."""
    from zeus_kfp.power.gpu import rest_limits
    from zeus_kfp.power.profile_params import candidate_limits

    limits = candidate_limits(gpu, step_w)
    order = [(limit, p) for p in range(passes) for limit in (limits if p % 2 == 0 else limits[::-1])]
    max_w = max(gpu.constraints(i).max_w for i in range(gpu.device_count()))
    proc = subprocess.Popen([*_fill(command, batch_size), "--epochs", "100000"], stdout=subprocess.PIPE, text=True)
    lines, rows = StepLines(proc, gpu), []
    try:
        for limit, p in order:
            for i in range(gpu.device_count()):
                gpu.set_power_limit(i, limit)
            steps, seconds, joules = lines.window(gpu.clock() + warmup_s, window_s)
            samples = steps * batch_size
            power = joules / seconds
            rows.append({"power_limit_w": limit, "pass": p, "window_s": round(seconds, 3), "samples": samples,
                         "samples_per_s": samples / seconds, "average_power_w": power,
                         "cost_per_sample": (ETA * power + (1 - ETA) * max_w) / (samples / seconds)})  # fmt: skip
            print(f"sweep {limit:5.0f} W (pass {p}): {samples / seconds:9.1f} samples/s at {power:6.1f} W", flush=True)
    finally:
        proc.kill()
        proc.wait()
        rest_limits(gpu)
    return rows


def pipeline(command: str, batch_size: int, recurrences: int, workdir: Path) -> list[dict[str, Any]]:
    """Step 2: `zeus-kfp run` (the console script's code, so no install is needed) on a store of its own."""
    (workdir / "job.yaml").write_text(
        f"job_id: gpu-sweep\nbatch_sizes: [{batch_size}]\ndefault_batch_size: {batch_size}\n"
        "target_metric: 0.95\nmax_epochs: 20\n"
    )
    cli = [sys.executable, "-c", "from zeus_kfp.cli import main; main()"]
    run = subprocess.run([*cli, "run", "--command", command, "--spec", "job.yaml", "-r", str(recurrences),
                          "--store", "store", "--runs-dir", "runs", "--plots-dir", "plots"],
                         cwd=workdir, capture_output=True, text=True, check=False)  # fmt: skip
    print(run.stdout[-3000:], flush=True)
    if run.returncode != 0:
        raise RuntimeError(f"zeus-kfp run failed ({run.returncode}): {run.stderr[-2000:]}")
    from zeus_kfp.store import open_store

    store = open_store(str(workdir / "store"))
    trials, profiles = store.trials("gpu-sweep"), store.profiles("gpu-sweep")
    out = []
    for row in trials.itertuples():
        held = profiles[profiles["trial"] <= row.trial]
        latest = held[held["trial"] == held["trial"].max()] if not held.empty else held
        out.append({"recurrence": int(row.recurrence), "status": row.status, "pick_w": float(row.power_limit_w),
                    "windows": len(latest), "energy_j": row.energy_j, "time_s": row.time_s, "reason": row.reason,
                    "source": row.source})  # fmt: skip
    return out


def compare(sweep_rows: list[dict[str, Any]], picks: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 3: each pick's cost per sample in the sweep over the sweep's least."""
    by_limit: dict[float, list[float]] = {}
    for row in sweep_rows:
        by_limit.setdefault(row["power_limit_w"], []).append(row["cost_per_sample"])
    cost = {limit: statistics.mean(values) for limit, values in by_limit.items()}
    optimum = min(cost, key=lambda limit: (cost[limit], -limit))
    for pick in picks:
        nearest = min(cost, key=lambda limit: abs(limit - pick["pick_w"]))
        pick["ratio"] = cost[nearest] / cost[optimum]
    return {"optimum_w": optimum, "least_cost_per_sample": cost[optimum], "picks": picks}


def standin_env(workdir: Path) -> None:
    """A fresh stand-in H200 for this process and its children (the module docstring's --standin)."""
    from zeus_kfp.simulate import nvml_standin

    state = nvml_standin.create(workdir / "node.json", seed=0, speedup=50.0)
    env = nvml_standin.shim_env(state, workdir / "shim")
    os.environ.update(env)
    sys.path.insert(0, str(workdir / "shim"))
    sys.modules.pop("pynvml", None)


def run(*, standin: bool, command: str | None, batch_size: int, step_w: float, warmup_s: float, window_s: float,
        passes: int, recurrences: int) -> dict[str, Any]:  # fmt: skip
    """The three steps; what gpu_check.py's --sweep step reports."""
    with tempfile.TemporaryDirectory(prefix="zeus-gpu-sweep-") as tmp:
        workdir = Path(tmp)
        if standin:
            standin_env(workdir)
        from zeus_kfp.power.nvml import NvmlGPU

        gpu = NvmlGPU()
        command = command or (STANDIN_SCRIPT if gpu.simulated else GPU_SCRIPT)
        try:
            rows = sweep(gpu, command, batch_size, step_w=step_w, warmup_s=warmup_s, window_s=window_s, passes=passes)
            picks = pipeline(command, batch_size, recurrences, workdir)
            left_at = [gpu.get_power_limit(i) for i in range(gpu.device_count())]
        finally:
            gpu.close()
    found = compare(rows, picks)
    label = "SIMULATED (stand-in H200)" if gpu.simulated else "MEASURED"
    for pick in found["picks"]:
        print(f"recurrence {pick['recurrence']}: {pick['status']}, trained at {pick['pick_w']:.0f} W, R "
              f"{pick['ratio']:.3f}, windows {pick['windows']}", flush=True)  # fmt: skip
    last = found["picks"][-1]
    print(f"gpu sweep ({label}): pick/optimum cost ratio by recurrence {last['recurrence']}: {last['ratio']:.3f} "
          f"(pick {last['pick_w']:.0f} W, sweep optimum {found['optimum_w']:.0f} W); windows {last['windows']}; "
          f"GPU left at {left_at} W", flush=True)  # fmt: skip
    return {"simulated": gpu.simulated, "command": command, "sweep": rows, **found, "left_at_w": left_at}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_sweep.json")
    parser.add_argument("--standin", action="store_true", help="the stand-in H200 (simulated) instead of a GPU")
    parser.add_argument("--command", default=None, help="the plain script ({python}, {batch_size} filled in)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--step-w", type=float, default=25.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--window-s", type=float, default=3.0)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--recurrences", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="the smallest run, on the stand-in")
    args = parser.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    found = run(standin=args.standin, command=args.command, batch_size=args.batch_size, step_w=args.step_w,
                warmup_s=args.warmup_s, window_s=args.window_s, passes=args.passes,
                recurrences=args.recurrences)  # fmt: skip
    Path(args.out).write_text(json.dumps(found, indent=2, default=str))
    print(f"wrote {args.out}; reproduce: {COMMAND}{' --standin' if args.standin else ''}", flush=True)
    return found


if __name__ == "__main__":
    main()
