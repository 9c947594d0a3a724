"""Orchestration overhead of one local recurrence through kfp.local (target: < 2 s per attempt).

overhead = the recurrence's wall time - the seconds spent inside the training script (measured
by the train step around the script and logged as the `wall_s` metric). The same split is
printed in CPU seconds (all child processes, minus the script's `script_cpu_s`), which a shared,
loaded machine inflates far less than wall time. It is what the pipeline
adds: a Python process per step (imports of zeus, pandas, pyarrow), store reads and writes, the
pass-through steps, preprocess and the report.

The job is the example with batch sizes (128, 1024) and default 1024, 3 epochs: 1024 misses
the target, so the recurrence runs two attempts (the retry loop), then the bandit's choice.

Run:  .venv/bin/python benchmarks/pipeline.py [--recurrences 2] [--s3]
(--s3 runs the store on an in-process moto S3 server on 127.0.0.1 instead of a local directory.)
"""

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

COMMAND = "python benchmarks/pipeline.py"
TARGET_S = 2.0
SMOKE = {"recurrences": 1}
TASK_LINE = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) - \w+ - (Executing task|Task) \W*\[\d+m'([\w-]+)'")


def _step_seconds(log_text: str) -> dict[str, float]:
    """Seconds per step kind (bandit, train, ...) from kfp.local's task start/finish lines."""
    started, totals = {}, defaultdict(float)
    for line in log_text.splitlines():
        m = TASK_LINE.match(line.strip())
        if not m:
            continue
        stamp = datetime.strptime(m.group(1), "%H:%M:%S.%f")
        task = m.group(3)
        if m.group(2) == "Executing task":
            started[task] = stamp
        elif task in started and "finished with status" in line:
            # attempt-2-train -> train, report-after-attempt-2 -> report
            kind = re.sub(r"^attempt-\d+-|-after-attempt-\d+$", "", task)
            totals[kind] += (stamp - started.pop(task)).total_seconds()
    return dict(totals)


def _training(outputs: Path) -> tuple[float, float]:
    """The train steps' own measurements of the script: (wall seconds, CPU seconds)."""
    wall = cpu = 0.0
    for path in outputs.rglob("executor_output.json"):
        if re.fullmatch(r"(attempt-\d+-)?train(-\d+)?", path.parent.name):  # kfp.local names it attempt-N-train
            meta = json.loads(path.read_text())["artifacts"]["metrics"]["artifacts"][0]["metadata"]
            wall += float(meta["wall_s"])
            cpu += float(meta["script_cpu_s"])
    return wall, cpu


def _cpu_s() -> float:
    """CPU seconds of this process and every finished child (kfp.local's steps and their scripts)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _import_floor() -> list[tuple[str, float]]:
    """CPU seconds a fresh step process spends importing, before any work: the per-step floor."""
    import subprocess

    out = []
    for label, code in (
        ("python + kfp.dsl (every step)", "import kfp.dsl"),
        (
            "+ zeus store, policy, steps (bandit/feedback)",
            "import kfp.dsl, zeus_kfp.steps, zeus_kfp.store, zeus_kfp.policy",
        ),
    ):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        # as the component command runs it: _KFP_RUNTIME=true skips kfp's client (and kubernetes) imports
        subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, _KFP_RUNTIME="true"))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append((label, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recurrences", type=int, default=2, help="recurrences to time (each reported)")
    parser.add_argument("--s3", action="store_true", help="store on an in-process moto S3 server (127.0.0.1)")
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)

    from zeus_kfp.pipelines.local import run_local
    from zeus_kfp.train import example_spec

    spec = example_spec("bench-pipeline").with_changes(batch_sizes=(128, 1024), default_batch_size=1024, max_epochs=3)
    server = None
    with tempfile.TemporaryDirectory(prefix="zeus-bench-") as tmp:
        store = str(Path(tmp) / "store")
        if args.s3:
            from moto.server import ThreadedMotoServer

            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            os.environ.update(
                ZEUS_S3_ENDPOINT=f"{host}:{port}",
                ZEUS_S3_ACCESS_KEY="bench",
                ZEUS_S3_SECRET_KEY="bench",
                ZEUS_S3_SECURE="false",
                ZEUS_S3_REGION="us-east-1",
                ZEUS_S3_CREATE_BUCKET="true",
            )
            store = "s3://zeus-bench/store"
        runs = Path(tmp) / "runs"
        cpu_marks = [_cpu_s()]
        try:
            started = time.perf_counter()
            summaries = run_local(
                spec,
                recurrences=args.recurrences,
                store=store,
                attempts=3,
                runs_dir=runs,
                on_recurrence=lambda _: cpu_marks.append(_cpu_s()),
            )
            total_wall = time.perf_counter() - started
        finally:
            if server is not None:
                server.stop()
        print(
            "orchestration overhead of a local recurrence (kfp.local SubprocessRunner, "
            f"store {'S3 (moto, in this process)' if args.s3 else 'local dir'})"
        )
        print(
            f"{'rec':>3} {'attempts':>8} {'wall s':>7} {'script s':>8} {'overhead s':>10} {'per attempt':>11} "
            f"{'per recurrence':>14} {'kfp.local':>9} {'overhead CPU s':>14}  steps wall (s)"
        )
        worst = 0.0
        for k, s in enumerate(summaries):
            script_wall, script_cpu = _training(runs / spec.job_id / s.recurrence_id)
            steps = _step_seconds((runs / spec.job_id / f"{s.recurrence_id}.log").read_text())
            n = len(s.trials)
            # per attempt: the attempt's own steps (bandit, feedback, the train step around the script)
            per_attempt = (steps.get("bandit", 0) + steps.get("feedback", 0) + steps.get("train", 0) - script_wall) / n
            # per recurrence, whatever the attempts: preprocess and the report
            fixed = sum(steps.get(name, 0) for name in ("preprocess", "report"))
            between = s.wall_s - sum(steps.values())  # kfp.local itself, between and around steps
            worst = max(worst, per_attempt)
            over_cpu = cpu_marks[k + 1] - cpu_marks[k] - script_cpu
            breakdown = ", ".join(f"{name} {v:.1f}" for name, v in sorted(steps.items()))
            print(
                f"{s.recurrence:>3} {n:>8} {s.wall_s:>7.1f} {script_wall:>8.1f} {s.wall_s - script_wall:>10.1f} "
                f"{per_attempt:>11.2f} {fixed:>14.2f} {between:>9.2f} {over_cpu:>14.1f}  {breakdown}"
            )
        for label, cpu in _import_floor():
            print(f"per-step import floor, {label}: {cpu:.2f} CPU s")
        load = os.getloadavg()[0]
        print(
            f"machine: {os.cpu_count()} CPUs, 1-min load average {load:.1f} (wall figures inflate with load; CPU less)"
        )
        verdict = "meets" if worst < TARGET_S else "MISSES"
        print(
            f"worst orchestration overhead per attempt: {worst:.2f} s wall ({verdict} the < {TARGET_S:.0f} s target); "
            f"all recurrences {total_wall:.1f} s"
        )
        print(f"reproduce: {COMMAND} --recurrences {args.recurrences}{' --s3' if args.s3 else ''}")


if __name__ == "__main__":
    main()
