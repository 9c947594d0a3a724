"""Device check on a real NVIDIA GPU: our NVML backend, energy, power limits, one Zeus-aware trial.

Needs only torch, nvidia-ml-py, numpy, pandas and this repository on PYTHONPATH (no install):

    PYTHONPATH=. python benchmarks/gpu_check.py --out gpu_check.json

Steps (each one's failure is caught, reported, and the next step still runs):
1. devices: names, power-limit constraints and current limit through zeus_kfp.power's NVML backend;
2. energy: a ~2 s busy matmul loop measured by the hardware energy counter and, over the same
   window, by the power-sampling fallback (the path for GPUs without a counter);
3. limit: set a lower power limit, read it back, restore the original (a permission error is
   reported as the measure-only path, which is what a Kubeflow pod without SYS_ADMIN gets);
4. trial: zeus_kfp.train.run_trial on the Zeus-aware example with gpu="nvml", on CUDA, one short
   trial; prints the TrialResult and the profile table, and checks the power limits are the
   same after the trial as before (setting them back if not: the device is left as found).
   It reaches the target in one epoch, so it profiles only the first few limits;
5. profiling: the same example with an unreachable target (0.999) and --profile-epochs epochs,
   so JIT profiling covers every limit. Reports the profile table, the chosen limit, how many
   windows were void (the energy counter had not moved) and the total profiling time. Pass
   --min-window-s 0 to see what windows shorter than the counter's ~100 ms steps read.
6. sweep (`--sweep`): benchmarks/gpu_sweep.py: a compute-bound plain script (examples/train_gpu_plain.py) swept
   over every limit from outside, then run through `zeus-kfp run` for three recurrences: the pipeline's pick
   against the sweep's optimum, and the profiling windows it spent. Built and tested on the stand-in H200
   (`--sweep --standin`, every figure SIMULATED there).
Everything is written as JSON to --out. All figures here are MEASURED (simulated=False), but those of
`--standin`. What it measured on an H200: benchmarks/RESULTS.md, "On a real GPU".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUSY_S = 2.0
PROFILE_TARGET = 0.999  # unreachable for the example: the trial runs its epochs until profiling is done
PROFILE_EPOCHS = 30  # 21 limits of >= 1 s each fit in ~22 epochs of >= 1 s (H200 at batch 16: ~1.9 s)
SMOKE = {"skip_trial": True}  # without a GPU, each step reports its failure


def run_step(report: dict[str, Any], name: str, fn: Callable[[], Any]) -> Any:
    """Run one step; record its output or its error, never raise."""
    started = time.monotonic()
    try:
        value = fn()
        report[name] = {"ok": True, "seconds": round(time.monotonic() - started, 2), "result": value}
        print(f"[{name}] ok: {json.dumps(value, default=str)[:2000]}", flush=True)
        return value
    except Exception as exc:
        report[name] = {
            "ok": False,
            "seconds": round(time.monotonic() - started, 2),
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:],
        }
        print(f"[{name}] FAILED: {type(exc).__name__}: {exc}", flush=True)
        return None


def environment() -> dict[str, Any]:
    info: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        import torch

        info.update(torch=torch.__version__, cuda_available=torch.cuda.is_available(), cuda=torch.version.cuda)
        if torch.cuda.is_available():
            info["cuda_device"] = torch.cuda.get_device_name(0)
    except Exception as exc:
        info["torch_error"] = repr(exc)
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        info["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        pynvml.nvmlShutdown()
    except Exception as exc:
        info["nvml_error"] = repr(exc)
    return info


def devices(gpu) -> list[dict[str, Any]]:
    out = []
    for i, name in enumerate(gpu.names()):
        c = gpu.constraints(i)
        out.append(
            {
                "index": i,
                "name": name,
                "min_w": c.min_w,
                "max_w": c.max_w,
                "default_w": c.default_w,
                "limit_w": gpu.get_power_limit(i),
                "energy_counter": gpu.has_energy_counter(i),
            }
        )
    return out


def busy_loop(seconds: float) -> int:
    """Matmuls on the GPU (or the CPU when there is none, for tests) for about `seconds`; returns iterations."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    n = 8192 if device == "cuda" else 256
    a = torch.randn(n, n, device=device)
    iterations, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        a = torch.tanh(a @ a / n)
        iterations += 1
        if device == "cuda" and iterations % 10 == 0:
            torch.cuda.synchronize()
    if device == "cuda":
        torch.cuda.synchronize()
    return iterations


def energy(gpu, seconds: float | None = None, index: int = 0) -> dict[str, Any]:
    """Counter vs sampled energy over the same busy window on GPU `index` (BUSY_S seconds by default)."""
    from zeus_kfp.power.monitor import EnergyMonitor
    from zeus_kfp.power.nvml import _PowerSampler

    sampler = _PowerSampler(lambda: gpu.power_w(index))
    monitor = EnergyMonitor(gpu, indices=[index])
    e_sampled0 = sampler.energy_j()
    monitor.begin_window("busy")
    iterations = busy_loop(seconds or BUSY_S)
    m = monitor.end_window("busy")
    sampled = sampler.energy_j() - e_sampled0
    sampler.stop()
    counter = m.energy_j[index]
    return {
        "iterations": iterations,
        "time_s": m.time_s,
        "counter_j": counter if gpu.has_energy_counter(index) else None,
        "sampled_j": sampled,
        "average_power_w": m.average_power_w,
        "sampled_vs_counter_pct": 100 * (sampled - counter) / counter if counter else None,
        "simulated": m.simulated,
    }


def power_limit(gpu, index: int = 0) -> dict[str, Any]:
    """Set a lower limit, read it back, restore the original; report measure-only on a permission error."""
    c = gpu.constraints(index)
    original = gpu.get_power_limit(index)
    target = max(c.min_w, c.max_w - 50.0)
    out: dict[str, Any] = {"original_w": original, "target_w": target}
    try:
        gpu.set_power_limit(index, target)
        out["can_set_limits"] = gpu.can_set_limits
        out["read_back_w"] = gpu.get_power_limit(index)
        if not gpu.can_set_limits:
            out["measure_only"] = gpu.measure_only_reason
    finally:
        if gpu.can_set_limits:
            gpu.set_power_limit(index, original)
        out["restored_w"] = gpu.get_power_limit(index)
    out["restored_ok"] = out["restored_w"] == original
    return out


def _limits() -> list[float]:
    from zeus_kfp.power.nvml import NvmlGPU

    gpu = NvmlGPU()
    try:
        return [gpu.get_power_limit(i) for i in range(gpu.device_count())]
    finally:
        gpu.close()


def _restore(limits: list[float]) -> None:
    from zeus_kfp.power.nvml import NvmlGPU

    gpu = NvmlGPU()
    try:
        for i, watts in enumerate(limits):
            gpu.set_power_limit(i, watts)
    finally:
        gpu.close()


def _run_example(
    spec: Any, batch_size: int, timeout_s: float, gpu: str, min_window_s: float | None = None
) -> dict[str, Any]:
    """Run the Zeus-aware example as one trial; leave the device's limits as found; return what it reported."""
    from zeus_kfp.train import example_command, run_trial
    from zeus_kfp.train.artifacts import read_result_json
    from zeus_kfp.train.runner import LOG_SUBDIR

    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    before = _limits()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zeus-gpu-check-") as work:
        out = run_trial(
            spec,
            batch_size=batch_size,
            cost_threshold=None,
            command=example_command("zeus"),
            work_dir=Path(work),
            gpu=gpu,
            env={"PYTHONPATH": pythonpath},
            timeout_s=timeout_s,
            min_window_s=min_window_s,
        )
        written = read_result_json(Path(work) / LOG_SUBDIR) or {}
    wall_s = time.monotonic() - started
    print(out.result, flush=True)
    print(out.profile.rows.to_string(), flush=True)
    after = _limits()
    if after != before:  # leave the device as we found it, whatever the trial did
        _restore(before)
    return {
        "wall_s": round(wall_s, 2),
        "limits_before_w": before,
        "limits_after_w": after,
        "limits_final_w": _limits(),
        "result": out.result.to_dict(),
        "profile": out.profile.rows.to_dict("records"),
        "profiling": written.get("profiling"),
        "model_saved": out.model_path is not None,
        "log_tail": out.log_tail[-2000:],
    }


def trial(max_power_w: float | None, batch_size: int, timeout_s: float) -> dict[str, Any]:
    from zeus_kfp.train import example_spec

    spec = example_spec()
    if max_power_w:
        spec = spec.with_changes(max_power_w=max_power_w)
    return _run_example(spec, batch_size, timeout_s, "nvml")


def profiling(
    max_power_w: float | None,
    batch_size: int,
    timeout_s: float,
    *,
    epochs: int = PROFILE_EPOCHS,
    gpu: str = "nvml",
    min_window_s: float | None = None,
) -> dict[str, Any]:
    """JIT profiling across every limit with windows the meter can resolve; a summary first, details after.

    Why a separate step: the short trial above reaches its target in one epoch, long before 21 windows
    of >= 1 s each are done. With an unreachable target the trial trains `epochs` epochs, and profiling
    (which spans or restarts windows at epoch ends) finishes inside them.
    """
    from zeus_kfp.train import example_spec

    spec = example_spec().with_changes(target_metric=PROFILE_TARGET, max_epochs=epochs)
    if max_power_w:
        spec = spec.with_changes(max_power_w=max_power_w)
    run = _run_example(spec, batch_size, timeout_s, gpu, min_window_s)
    summary = run.get("profiling") or {}
    train = [r for r in run["profile"] if r["phase"] == "train"]
    return {
        "done": summary.get("done"),
        "chosen_limit_w": summary.get("chosen_limit_w"),
        "limits_profiled": len(train),
        "limits_total": len(summary.get("limits_w") or []),
        "zero_power_rows": sum(1 for r in run["profile"] if not r["average_power_w"] > 0),
        "invalid_windows": summary.get("invalid_windows"),
        "cancelled_windows": summary.get("cancelled_windows"),
        "spanned_epochs": summary.get("spanned_epochs"),
        "min_window_s": summary.get("min_window_s"),
        "profiling_s": summary.get("profiling_s"),
        "gave_up": summary.get("gave_up"),
        **run,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="zeus-kfp device check on a real NVIDIA GPU")
    parser.add_argument("--out", default="gpu_check.json")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--trial-timeout", type=float, default=120.0)
    parser.add_argument("--skip-trial", action="store_true", help="skip both trial steps (trial, profiling)")
    parser.add_argument("--profile-epochs", type=int, default=PROFILE_EPOCHS)
    parser.add_argument("--profile-timeout", type=float, default=150.0)
    parser.add_argument("--min-window-s", type=float, default=None, help="override NVML's 1 s (0: Zeus's count-only)")
    parser.add_argument("--sweep", action="store_true", help="also the sweep step (benchmarks/gpu_sweep.py)")
    parser.add_argument("--standin", action="store_true", help="the sweep on the stand-in H200 (simulated)")
    parser.add_argument("--sweep-args", default="", help="more options of gpu_sweep.py, e.g. '--passes 1'")
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)

    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    run_step(report, "environment", environment)
    from zeus_kfp.power.nvml import NvmlGPU

    gpu = run_step(report, "open_nvml", lambda: NvmlGPU())
    if gpu is not None:
        report["open_nvml"]["result"] = {"kind": gpu.kind, "count": gpu.device_count()}
        found = run_step(report, "devices", lambda: devices(gpu))
        run_step(report, "energy", lambda: energy(gpu))
        run_step(report, "power_limit", lambda: power_limit(gpu))
        max_w = found[0]["max_w"] if found else None
        gpu.close()
    else:
        max_w = None
    if not args.skip_trial:
        run_step(report, "trial", lambda: trial(max_w, args.batch_size, args.trial_timeout))
        run_step(
            report,
            "profiling",
            lambda: profiling(
                max_w, args.batch_size, args.profile_timeout, epochs=args.profile_epochs, min_window_s=args.min_window_s
            ),
        )
    if args.sweep:
        import shlex

        import gpu_sweep  # benchmarks/gpu_sweep.py, beside this script

        extra = [*shlex.split(args.sweep_args), *(["--standin"] if args.standin else [])]
        run_step(report, "sweep", lambda: gpu_sweep.main(["--out", str(Path(args.out).with_suffix(".sweep.json")),
                                                          *extra]))  # fmt: skip
    report["ok"] = all(v.get("ok", True) for v in report.values() if isinstance(v, dict))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {args.out}; all steps ok: {report['ok']}", flush=True)
    return report


if __name__ == "__main__":
    main()
