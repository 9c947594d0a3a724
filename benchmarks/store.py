"""Store speed on the agreed log: read + decide at 100 to 100,000 trials, and a bandit step from process start.

Why these two: a bandit step reads the job's whole history and the policy decides from all of it
(zeus_kfp.steps.train), so its cost grows with the history; the issue's bars are
- read + decide at 10,000 trials <= 0.1 s on a local directory and <= 0.2 s on S3 (moto), and at
  100,000 trials <= 1 s locally;
- a bandit step from process start at 10,000 trials <= 1.2x the same step at 10 trials (the history
  must not be what a step waits for: a step's start-up is about a second).

Read + decide: a fresh Store (`open_store`), `Store.read_trials(job)` (the newest snapshot + the slots
after it, settled), then `get_policy("default").decide(spec, history, seed)`. Each job is seeded by
benchmarks/seed.py (one snapshot, a simulated history) and then one recurrence is begun through the
API, so a read finds the snapshot and one slot after it, as the bandit step after a preprocess step
does. The bandit step: a fresh `python -c` running zeus_kfp.steps.bandit.bandit, timed from spawn to exit;
between runs (untimed) the trial is finished and the job compacted, as the feedback and report steps
would. The runs at 10 and at 10,000 trials alternate, so load drifts hit both alike.

moto runs in this process (ThreadedMotoServer on 127.0.0.1, port 0, as tests/conftest.py starts
it); its bucket is made with the minio client. Simulated: the trial results. Measured: every time.

Reproduce: .venv/bin/python benchmarks/store.py                          (several minutes)
           .venv/bin/python benchmarks/store.py --sizes 100 1000 --moto-sizes 100 --step-sizes
           .venv/bin/python benchmarks/store.py --sizes --moto-sizes --step-sizes --breakdown 10 10000 100000
                    (where the time goes, unprofiled; --profile / --profile-step N: cProfile of read + decide / bandit)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from seed import SPEC, moto_server, outcome, seed_job, simulated_history

from zeus_kfp.job import JobSpec, TrialResult
from zeus_kfp.policy import get_policy
from zeus_kfp.store import open_store

COMMAND = ".venv/bin/python benchmarks/store.py"
ROOT = Path(__file__).resolve().parent.parent
POLICY = "default"
READ_BARS = {("local", 10_000): 0.1, ("moto", 10_000): 0.2, ("local", 100_000): 1.0}
STEP_BAR = 1.2
SMOKE = {"sizes": [100], "moto_sizes": [100], "runs": 1, "step_sizes": [10], "step_runs": 1, "step_backends": ["local"],
         "step_profiles": [2, 20], "profile_trials": 20}  # fmt: skip
BANDIT_STEP = """
import sys
from zeus_kfp.steps.bandit import bandit
bandit(store_uri=sys.argv[1], job_id=sys.argv[2], recurrence_id=sys.argv[3], attempt=1, policy="default")
"""


@dataclass(frozen=True)
class ReadDecide:
    backend: str
    trials: int
    read_s: float  # medians over the runs
    decide_s: float
    both_s: float
    cpu_s: float  # CPU seconds of this process (with moto: its server threads too)
    runs: int

    @property
    def bar(self) -> float | None:
        return READ_BARS.get((self.backend, self.trials))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def seeded(uri: str, count: int, tag: str, profiled: int = 0) -> JobSpec:
    """A new job at `uri` holding `count` simulated trials (the first `profiled` with a power profile), with one
    recurrence begun after them."""
    spec = SPEC.with_changes(job_id=f"bench-{tag}-{count}-{profiled}")
    seed_job(open_store(uri), spec, simulated_history(count, spec=spec), profiled=profiled)
    open_store(uri).begin_recurrence(spec.job_id, f"next-{uuid.uuid4().hex[:8]}")
    return spec


def read_and_decide(uri: str, spec: JobSpec, seed: int) -> tuple[float, float, float]:
    """(read seconds, decide seconds, CPU seconds) of one fresh Store's read and the policy's decision.
    CPU time is less inflated than wall time on a loaded machine (this one is shared)."""
    cpu, started = time.process_time(), time.perf_counter()
    history = open_store(uri).read_trials(spec.job_id).history
    read = time.perf_counter()
    get_policy(POLICY).decide(spec, history, seed)
    return read - started, time.perf_counter() - read, time.process_time() - cpu


def bench_read(backend: str, uri: str, count: int, runs: int) -> ReadDecide:
    spec = seeded(uri, count, backend)
    read_and_decide(uri, spec, 0)  # imports and connections, untimed
    times = [read_and_decide(uri, spec, i) for i in range(runs)]
    med = statistics.median
    return ReadDecide(backend, count, med(t[0] for t in times), med(t[1] for t in times),
                      med(t[0] + t[1] for t in times), med(t[2] for t in times), runs)  # fmt: skip


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bandit_step(uri: str, spec: JobSpec, rng: np.random.Generator) -> tuple[float, float]:
    """(wall seconds from spawning a `python -c` bandit step to its exit, its CPU seconds); the trial is
    then finished and the job compacted (untimed), as the feedback and report steps do. The CPU time
    is the child's own, so it is far less inflated than the wall time when other work shares the cores."""
    store, rid = open_store(uri), f"step-{uuid.uuid4().hex[:8]}"
    store.begin_recurrence(spec.job_id, rid)
    cpu, started = _children_cpu_s(), time.perf_counter()
    subprocess.run([sys.executable, "-c", BANDIT_STEP, uri, spec.job_id, rid], check=True, cwd=ROOT)
    seconds, cpu_s = time.perf_counter() - started, _children_cpu_s() - cpu
    dispatch = store.get_dispatch(spec.job_id, rid, 1)
    assert dispatch is not None
    reached, time_s, energy_j, epochs = outcome(dispatch[1].batch_size, rng, spec)
    result = TrialResult.build(spec, batch_size=dispatch[1].batch_size, status="reached" if reached else "not_reached",
                               time_s=time_s, energy_j=energy_j, num_epochs=epochs, simulated=True)  # fmt: skip
    store.finish_trial(spec.job_id, rid, 1, result)
    store.compact(spec.job_id)
    return seconds, cpu_s


def bench_steps(
    backend: str, uri: str, sizes: list[int], runs: int, specs: dict[int, JobSpec] | None = None
) -> dict[int, list[tuple[float, float]]]:
    """Bandit steps on jobs of `sizes` trials (or on `specs`, one job per size), the sizes alternating."""
    specs = specs or {count: seeded(uri, count, f"step-{backend}") for count in sizes}
    rng = np.random.default_rng(1)
    bandit_step(uri, specs[sizes[0]], rng)  # the first python start reads its files from disk: untimed
    times: dict[int, list[tuple[float, float]]] = {count: [] for count in sizes}
    for _ in range(runs):
        for count in sizes:  # alternating, so a change of load hits every size alike
            times[count].append(bandit_step(uri, specs[count], rng))
    return times


def profile(uri: str, spec: JobSpec, top: int = 30) -> str:
    """cProfile of three reads + decides (after a warm-up): the functions of zeus/ and pyarrow by cumulative
    time (profiling inflates Python-heavy functions more than Arrow's C++)."""
    read_and_decide(uri, spec, 0)
    profiler = cProfile.Profile()
    for seed in range(1, 4):  # three runs together: one is at the mercy of a loaded machine
        profiler.runcall(read_and_decide, uri, spec, seed)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(r"/zeus/|pyarrow", top)
    text = out.getvalue().replace(str(ROOT) + "/", "").replace(os.path.dirname(np.__path__[0]) + "/", "")
    return "\n".join(line for line in text.splitlines() if line.strip())


def breakdown(uri: str, spec: JobSpec, runs: int) -> str:
    """Where one read + decide and one in-process bandit() spend their time, unprofiled (medians of `runs`):
    the read's parts as Store.read_trials runs them (zeus_kfp.store.log.read, frames.settle, frames.job_trials),
    the policy's statistics (zeus_kfp.policy.tally) and its whole decide; and how often a bandit() call settles
    the log, and how long."""
    from zeus_kfp.policy.history import read_history
    from zeus_kfp.steps.bandit import bandit
    from zeus_kfp.store import frames, log

    def parts() -> list[float]:
        marks = [time.perf_counter()]
        opened = open_store(uri)
        read = log.read(opened.backend, spec.job_id)
        marks.append(time.perf_counter())
        settled = frames.settle(spec.job_id, read.table(), [], opened.first_spec_text(spec.job_id)).under(True)
        marks.append(time.perf_counter())
        history = frames.job_trials(settled).history
        marks.append(time.perf_counter())
        read_history(spec, history)
        marks.append(time.perf_counter())
        get_policy(POLICY).decide(spec, history, 1)
        marks.append(time.perf_counter())
        return [b - a for a, b in itertools.pairwise(marks)]

    parts()
    found = [parts() for _ in range(runs)]
    names = ["log.read (snapshot + slots after it)", "frames.settle", "frames.job_trials (columns)",
             "policy: read_history (the statistics)", "policy: decide (statistics included)"]  # fmt: skip
    lines = [f"  {name:40} {1000 * statistics.median(f[i] for f in found):7.1f} ms" for i, name in enumerate(names)]
    settle, spent = frames.settle, [0, 0.0]

    def counted(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return settle(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent[0], spent[1] = spent[0] + 1, spent[1] + time.perf_counter() - started

    frames.settle = counted  # type: ignore[assignment]
    store, steps = open_store(uri), []
    try:
        for i in range(runs + 1):
            rid = f"parts-{uuid.uuid4().hex[:8]}"
            store.begin_recurrence(spec.job_id, rid)
            spent[:] = [0, 0.0]
            started = time.perf_counter()
            bandit(store_uri=uri, job_id=spec.job_id, recurrence_id=rid, attempt=1, policy=POLICY)
            if i:  # the first is a warm-up
                steps.append((time.perf_counter() - started, spent[0], spent[1]))
    finally:
        frames.settle = settle
    step_ms, settle_ms = (1000 * statistics.median(step[i] for step in steps) for i in (0, 2))
    lines.append(f"  {'bandit() in this process':40} {step_ms:7.1f} ms, of which {steps[0][1]} frames.settle calls"
                 f" {settle_ms:.1f} ms")  # fmt: skip
    return "\n".join(lines)


def profile_step(uri: str, spec: JobSpec, top: int = 30) -> str:
    """cProfile of bandit() called in this process (imports done): what a step does that grows with the
    history. Three steps, each on a recurrence begun just before (untimed)."""
    from zeus_kfp.steps.bandit import bandit

    profiler, store = cProfile.Profile(), open_store(uri)
    for i in range(4):
        rid = f"profiled-{uuid.uuid4().hex[:8]}"
        store.begin_recurrence(spec.job_id, rid)
        step = {"store_uri": uri, "job_id": spec.job_id, "recurrence_id": rid, "attempt": 1, "policy": POLICY}
        if i == 0:
            bandit(**step)  # warm-up
        else:
            profiler.runcall(bandit, **step)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(r"/zeus/|pyarrow", top)
    text = out.getvalue().replace(str(ROOT) + "/", "").replace(os.path.dirname(np.__path__[0]) + "/", "")
    return "\n".join(line for line in text.splitlines() if line.strip())


def print_profile_steps(times: dict[int, list[tuple[float, float]]], args: argparse.Namespace) -> list[str]:
    """The bandit step as a job's stored power profiles grow (only each batch size's latest counts)."""
    small, big = min(times), max(times)
    wall = {n: statistics.median(w for w, _ in t) for n, t in times.items()}
    cpu = {n: statistics.median(c for _, c in t) for n, t in times.items()}
    print(f"\n### A bandit step as stored power profiles grow ({args.profile_trials:,} trials, local), "
          f"medians of {args.step_runs}\n")  # fmt: skip
    print("| profiles | wall | CPU |\n|---|---|---|")
    for n in times:
        print(f"| {n:,} | {wall[n]:.3f} s ({', '.join(f'{w:.2f}' for w, _ in times[n])}) | {cpu[n]:.3f} s |")
    ratio = wall[big] / wall[small]
    met = "met" if ratio <= STEP_BAR else "NOT MET"
    print(f"\nratio {big:,} / {small:,} profiles: **{ratio:.2f}x** wall (<= {STEP_BAR}x: {met}), "
          f"{cpu[big] / cpu[small]:.2f}x CPU")  # fmt: skip
    return [] if ratio <= STEP_BAR else ["bandit step with profiles"]


def verdict(seconds: float, bar: float | None) -> str:
    if bar is None:
        return ""
    return f"<= {bar:g} s: {'met' if seconds <= bar else 'NOT MET'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 1_000, 10_000, 100_000], help="local")
    parser.add_argument("--moto-sizes", type=int, nargs="*", default=[100, 1_000, 10_000])
    parser.add_argument("--runs", type=int, default=7, help="read + decide runs per size (medians)")
    parser.add_argument("--step-sizes", type=int, nargs="*", default=[10, 10_000])
    parser.add_argument("--step-runs", type=int, default=5, help="bandit steps per size and backend (medians)")
    parser.add_argument("--step-backends", nargs="+", default=["local", "moto"], choices=["local", "moto"])
    parser.add_argument("--step-profiles", type=int, nargs="*", default=[50, 5_000],
                        help="bandit steps (local): jobs of --profile-trials trials, this many profiled")  # fmt: skip
    parser.add_argument("--profile-trials", type=int, default=5_000)
    parser.add_argument("--profile", type=int, nargs="*", default=[], metavar="TRIALS",
                        help="also print a cProfile of local reads + decides at these sizes")  # fmt: skip
    parser.add_argument("--breakdown", type=int, nargs="*", default=[], metavar="TRIALS",
                        help="also time the parts of a local read + decide and of bandit() at these sizes")  # fmt: skip
    parser.add_argument("--profile-step", type=int, nargs="*", default=[], metavar="TRIALS",
                        help="also print a cProfile of in-process bandit() calls at these sizes (local)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="the smallest run (tests/test_benchmarks_smoke.py)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"zeus-kfp store benchmark: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {load()}")
    print(f"policy {POLICY!r}; histories seeded by benchmarks/seed.py (simulated results); times measured")
    reads: list[ReadDecide] = []
    steps: dict[str, dict[int, list[tuple[float, float]]]] = {}
    profiles: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="zeus-bench-") as tmp, ExitStack() as stack:
        moto = None
        if args.moto_sizes or "moto" in args.step_backends:
            moto = stack.enter_context(moto_server())
        uris: dict[str, str] = {"local": f"{tmp}/store"}
        if moto is not None:
            uris["moto"] = f"s3://{moto.bucket()}/store"
        for backend, sizes in (("local", args.sizes), ("moto", args.moto_sizes)):
            for count in sizes:
                reads.append(bench_read(backend, uris[backend], count, args.runs))
                r = reads[-1]
                print(f"  read + decide, {backend}, {count:,} trials: {r.both_s:.4f} s", flush=True)
        for count in args.profile:
            title = f"cProfile of three local reads + decides at {count:,} trials"
            profiles[title] = profile(uris["local"], seeded(uris["local"], count, "profile"))
        for count in args.breakdown:
            title = f"parts at {count:,} trials (local, medians of {args.runs}, unprofiled)"
            profiles[title] = breakdown(uris["local"], seeded(uris["local"], count, "parts"), args.runs)
        for count in args.profile_step:
            title = f"cProfile of three in-process bandit() calls at {count:,} trials (local)"
            profiles[title] = profile_step(uris["local"], seeded(uris["local"], count, "profile-step"))
        if args.step_sizes:
            for backend in args.step_backends:
                steps[backend] = bench_steps(backend, uris[backend], args.step_sizes, args.step_runs)
                print(f"  bandit steps, {backend}: done", flush=True)
        if args.step_profiles:
            specs = {n: seeded(uris["local"], args.profile_trials, "profiles", n) for n in args.step_profiles}
            by_profiles = bench_steps("local", uris["local"], args.step_profiles, args.step_runs, specs)
    if reads:
        print(f"\n### Read + decide (fresh Store, read_trials, decide), medians of {args.runs} runs\n")
        print("| backend | trials | read | decide | read + decide | its CPU time | bar |")
        print("|---|---|---|---|---|---|---|")
    for r in reads:
        print(f"| {r.backend} | {r.trials:,} | {r.read_s * 1000:.1f} ms | {r.decide_s * 1000:.1f} ms | "
              f"**{r.both_s * 1000:.1f} ms** | {r.cpu_s * 1000:.1f} ms | {verdict(r.both_s, r.bar)} |")  # fmt: skip
    missed = [f"read + decide, {r.backend}, {r.trials}" for r in reads if r.bar is not None and r.both_s > r.bar]
    if steps:
        small, big = min(args.step_sizes), max(args.step_sizes)
        print(f"\n### A bandit step from process start (`python -c`, spawn to exit), medians of {args.step_runs}\n")
        print("Wall seconds (each run), then the step's own CPU seconds. The bar is judged on wall time.\n")
        print("| backend | " + " | ".join(f"{n:,} trials" for n in args.step_sizes) + f" | ratio {big:,} / {small:,} |")
        print("|---" * (len(args.step_sizes) + 2) + "|")
        for backend, times in steps.items():
            wall = {n: statistics.median(w for w, _ in t) for n, t in times.items()}
            cpu = {n: statistics.median(c for _, c in t) for n, t in times.items()}
            ratio = wall[big] / wall[small]
            runs = " | ".join(f"{wall[n]:.3f} s ({', '.join(f'{w:.2f}' for w, _ in times[n])}); CPU {cpu[n]:.3f} s"
                              for n in times)  # fmt: skip
            met, cpu_ratio = ("met" if ratio <= STEP_BAR else "NOT MET"), cpu[big] / cpu[small]
            print(f"| {backend} | {runs} | **{ratio:.2f}x** (<= {STEP_BAR}x: {met}); CPU {cpu_ratio:.2f}x |")
            missed += [f"bandit step, {backend}"] if ratio > STEP_BAR else []
    if args.step_profiles:
        missed += print_profile_steps(by_profiles, args)
    for title, text in profiles.items():
        print(f"\n### {title}\n\n{text}")
    print(f"\nat the end: {load()}; bars missed: {', '.join(missed) or 'none'}")
    print("reproduce:\n  " + " ".join([COMMAND, *sys.argv[1:]]))
    return 1 if missed and not args.smoke else 0  # the smallest run checks that it runs, never a time


if __name__ == "__main__":
    sys.exit(main())
