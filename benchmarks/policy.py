"""Benchmark: `default` against `zeus-nsdi23` in the trace simulator, beside the policy as it stood on 2026-12-03
(read from git history: FROZEN_COMMIT), on the cells it was tuned on and on cells and jobs it was not fitted to.

Tuned cells: 6 workloads x the V100 and A40 traces x eta 0.25, 0.5, 0.75, Zeus's number of recurrences.
Per cell, cumulative cost / oracle cost for each policy (mean over seeds), the ratio ours / zeus-nsdi23,
each policy's mean regret (cumulative cost minus N x the oracle's, in oracle recurrences), and the worst
point of its cumulative cost above the default configuration's (in default-configuration recurrences).
Then the same on a second set of seeds (the overfitting check) and with K = 1, 2, 4, 8 recurrences in
flight (the eta-0.5 cells).

What cannot be fitted:
- leave-one-GPU-out: among the candidate policies (CANDIDATES), the one with the least mean regret on one
  GPU's cells is chosen, and reported on the other GPU's cells, both ways, per eta;
- perturbed jobs (zeus_kfp.simulate.perturb): jobs generated from a seed out of the V100 and A40 traces, with
  epochs to target scaled and noised, power curves tilted, the cost minimum moved, or the default size
  made optimal; per job, the ratio of each policy's mean cumulative cost to zeus-nsdi23's (median, 90th
  percentile, worst) and, with --job-runs >= 2, the paired screen. The candidate is chosen on the jobs of
  --tune-seed (1; 'none': no tuning set, `turning-walk` is reported), every candidate is reported on the
  jobs of --perturb-seeds (held out);
- beside every figure on unseen cells or jobs, the generalization gap: the same figure on tuned cells
  minus it.

    .venv/bin/python benchmarks/policy.py --jobs 2 --fidelity      # the cells, leave-one-GPU-out, K (minutes)
    .venv/bin/python benchmarks/policy.py --smoke               # every part at its smallest (seconds)
    .venv/bin/python benchmarks/policy.py --seeds 1 --check-seeds none --etas 0.5 --in-flight 1 --perturbed 240 \
        --perturb-seeds 20-21 --tune-seed none --job-runs 5 --jobs 2   # fresh held-out jobs, paired screen
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from itertools import product
from pathlib import Path

import numpy as np

from zeus_kfp.job import TrialStatus
from zeus_kfp.policy import POLICY_NAMES, get_policy
from zeus_kfp.policy.base import Decision, Policy
from zeus_kfp.seeds import seed_list
from zeus_kfp.simulate.paired import FALSE_DISCOVERY_RATE, paired_verdict
from zeus_kfp.simulate.perturb import KINDS, perturbed_job
from zeus_kfp.simulate.reference import FIDELITY_TOLERANCE, ZEUS_SIMULATOR_REFERENCE
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES
from zeus_kfp.simulate.workload_runs import build_simulator
from zeus_kfp.simulate.workloads import WORKLOADS
from zeus_kfp.trials import Trial

BASELINE, OURS = "zeus-nsdi23", "turning-walk"  # "default" is an alias of turning-walk
FROZEN = "turning-walk 2026-12-03"  # the policy before it was rewritten from its model
# The commit whose benchmarks/frozen/ holds that policy: zeus/zeus_kfp/policy/turning_walk.py and walk.py as of e4ec5d2,
# with only the walk's import changed. The files are read from git history, not kept in the tree.
FROZEN_COMMIT = "e6fad9395cc36add1a90d9a6f5f7a7049180ba82"
FROZEN_FILES = {  # module name (as the two import each other) -> file under benchmarks/frozen/ at FROZEN_COMMIT
    "frozen.walk_2026_12_03": "walk_2026_12_03.py",
    "frozen.turning_walk_2026_12_03": "turning_walk_2026_12_03.py",
}
REPO = Path(__file__).resolve().parents[1]
ETAS = (0.25, 0.5, 0.75)


def git_source(commit: str, path: str) -> str:
    """A file's text at `commit`, from this checkout's git history; a clear error where the history lacks it
    (a shallow clone, a source archive)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{path}"], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        done = None
    if done is None or done.returncode != 0:
        why = "git is not installed" if done is None else done.stderr.strip()
        raise SystemExit(
            f"{FROZEN!r} is read from git history ({commit[:7]}:{path}), which this checkout lacks ({why}). "
            f"In a shallow clone run `git fetch --unshallow`; or leave it out: --candidates {OURS}"
        )
    return done.stdout


@cache
def frozen_policy() -> type[Policy]:
    """The policy of 2026-12-03 as a class, its two modules loaded from FROZEN_COMMIT into sys.modules under
    the names they import each other by (once a process: a worker of the pool loads it again)."""
    sys.modules.setdefault("frozen", types.ModuleType("frozen"))
    for name, file in FROZEN_FILES.items():
        module = types.ModuleType(name)
        module.__file__ = f"{FROZEN_COMMIT[:7]}:benchmarks/frozen/{file}"
        sys.modules[name] = module  # before exec: its dataclasses look their module up by name
        code = compile(git_source(FROZEN_COMMIT, f"benchmarks/frozen/{file}"), module.__file__, "exec")
        exec(code, module.__dict__)
    return sys.modules["frozen.turning_walk_2026_12_03"].TurningWalkPolicy


# The policies leave-one-GPU-out chooses among: each a whole policy (rules and constants), named.
CANDIDATES: dict[str, Callable[[], Policy]] = {OURS: lambda: get_policy(OURS), FROZEN: lambda: frozen_policy()()}


def keep_candidates(names: list[str] | None) -> None:
    """Restrict CANDIDATES to `names` (all when None), in place: a shorter run compares fewer variants."""
    if names is None:
        return
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown or OURS not in names:
        raise SystemExit(f"invalid --candidates {unknown or names}: allowed {', '.join(map(repr, CANDIDATES))}, "
                         f"{OURS!r} among them")  # fmt: skip
    for name in [n for n in CANDIDATES if n not in names]:
        del CANDIDATES[name]


def make_policy(name: str) -> Policy:
    """A candidate by name, or a registered policy."""
    return CANDIDATES[name]() if name in CANDIDATES else get_policy(name)


def parse_seeds(text: str) -> list[int]:
    """'1-20', '1,2,7' or 'none' (zeus_kfp.seeds.seed_list over the comma-separated words)."""
    return [] if text == "none" else seed_list(text.split(","))


def run_task(task: tuple) -> tuple[tuple, dict]:
    """One (source, policy, seeds, in_flight) task, source ("cell", workload, gpu, eta) or ("job", seed,
    index): the means over seeds of cost / oracle, regret, cumulative cost and the worst excess over the
    default configuration (and that excess's worst seed)."""
    source, policy, seeds, in_flight = task
    kind, far_valley = "cell", False
    if source[0] == "cell":
        sim = build_simulator(source[1], power_trace=source[2], eta=source[3])
    else:
        job = perturbed_job(source[1], source[2])
        sim, kind, far_valley = job.simulator(), job.kind, job.far_valley
    chosen = make_policy(policy)
    results = [sim.run(chosen, seed, None, in_flight) for seed in seeds]
    excess = [r.worst_excess_over_default() for r in results]
    return task, {
        "n": sim.default_num_recurrences(),
        "ratio": float(np.mean([r.cost_over_oracle for r in results])),
        "regret": float(np.mean([r.regret() for r in results])),
        "cost": float(np.mean([r.totals.cost for r in results])),
        "costs": [r.totals.cost for r in results],
        "excess": float(np.mean(excess)),
        "excess_max": float(np.max(excess)),
        "kind": kind,
        "far_valley": far_valley,
    }


def run_tasks(tasks: list[tuple], jobs: int) -> dict[tuple, dict[str, float]]:
    if jobs <= 1:
        return dict(map(run_task, tasks))
    with ProcessPoolExecutor(jobs) as pool:
        return dict(pool.map(run_task, tasks, chunksize=1))


class _DefaultSizeOnly:
    """A stand-in policy: the default size, no early stop. What an overlapping recurrence would run before
    any result is in if it waited for the default's result (turning-walk explores instead: its first wave)."""

    name = "default-size"

    def decide(self, spec, history, seed):
        return Decision(spec.default_batch_size, None, "default", "")

    def arm_states(self, spec, history):
        return []

    def stop_threshold(self, spec, history):
        return None  # no early stop (zeus_kfp.policy.base.Policy: what a running trial stops at)


def first_wave_excess(cells: list[tuple[str, str, float]], seeds: list[int]) -> float:
    """Mean over cells of (the default size's first trial, profiling included) / oracle - 1."""
    out = []
    for workload, gpu, eta in cells:
        sim = build_simulator(workload, power_trace=gpu, eta=eta)
        runs = [sim.run(_DefaultSizeOnly(), seed, num_recurrences=1) for seed in seeds]
        out.append(np.mean([r.totals.cost for r in runs]) / sim.oracle.cost - 1.0)
    return float(np.mean(out))


def cut(results, sources, policy, seeds, k: int = 1) -> tuple[float, int, float, float]:
    """Over `sources`: (mean-regret cut against zeus-nsdi23 in %, how many `policy` is cheaper on, its mean
    regret, zeus-nsdi23's)."""
    rz = float(np.mean([results[(s, BASELINE, seeds, k)]["regret"] for s in sources]))
    ro = float(np.mean([results[(s, policy, seeds, k)]["regret"] for s in sources]))
    wins = sum(results[(s, policy, seeds, k)]["cost"] < results[(s, BASELINE, seeds, k)]["cost"] for s in sources)
    return 100.0 * (1.0 - ro / rz), int(wins), ro, rz


def print_cells(cells, results, seeds) -> None:
    print("\ncost / oracle, mean regret (oracle recurrences) and worst excess over the default configuration")
    print(f"(default-configuration recurrences: mean over seeds, worst seed), seeds {seeds[0]}-{seeds[-1]}, K = 1")
    print(
        f"{'cell':<26}{'N':>5}{BASELINE:>12}{OURS:>13}{'ratio':>8}{'regret z':>10}{'regret o':>10}"
        f"{'excess z':>10}{'(worst)':>8}{'excess o':>10}{'(worst)':>8}"
    )
    for c in cells:
        z, o = results[(c, BASELINE, seeds, 1)], results[(c, OURS, seeds, 1)]
        name = f"{c[1]}/{c[2]} eta {c[3]}"
        print(
            f"{name:<26}{z['n']:>5}{z['ratio']:>12.4f}{o['ratio']:>13.4f}{o['ratio'] / z['ratio']:>8.4f}"
            f"{z['regret']:>10.2f}{o['regret']:>10.2f}{z['excess']:>10.2f}{z['excess_max']:>8.2f}"
            f"{o['excess']:>10.2f}{o['excess_max']:>8.2f}"
        )


def leave_one_gpu_out(cells, results, seeds, gpus) -> dict[str, float]:
    """Choose among CANDIDATES on one GPU's cells (least mean regret over them), report the other GPU's,
    per eta, with the gap (the cut on the chosen-on GPU's cells of that eta minus the unseen one's).
    Returns the smallest unseen cut per eta and direction, keyed 'tuned->unseen eta'."""
    print(f"\nleave-one-GPU-out: chosen among {len(CANDIDATES)} candidates on one GPU, reported on the other")
    out = {}
    for tuned, unseen in ((a, b) for a in gpus for b in gpus if a != b):
        on = [c for c in cells if c[2] == tuned]
        chosen = min(CANDIDATES, key=lambda p: np.mean([results[(c, p, seeds, 1)]["regret"] for c in on]))
        print(f"tuned on {tuned}: chosen {chosen!r}; reported on {unseen}")
        print(f"{'eta':>6}{'unseen cut':>12}{'cheaper':>10}{'tuned cut':>11}{'gap':>8}{'regret o':>10}{'regret z':>10}")
        for eta in sorted({c[3] for c in cells}):
            seen = [c for c in on if c[3] == eta]
            held = [c for c in cells if c[2] == unseen and c[3] == eta]
            u, wins, ro, rz = cut(results, held, chosen, seeds)
            t = cut(results, seen, chosen, seeds)[0]
            print(f"{eta:>6}{u:>11.1f}%{f'{wins}/{len(held)}':>10}{t:>10.1f}%{t - u:>+7.1f}{ro:>10.3f}{rz:>10.3f}")
            out[f"{tuned}->{unseen} {eta}"] = u
    return out


def job_seeds(index: int, runs: int) -> tuple[int, ...]:
    """The simulation seeds of generated job `index`: index + 1, then index + 1001, index + 2001, ... (`runs` of
    them, distinct across a set of up to 1,000 jobs). A job's figures are their means: with several, "cheaper"
    compares the two policies' expected costs on the job, not two single random runs."""
    return tuple(1000 * k + index + 1 for k in range(runs))


def job_regret(results, jobs_seed: int, count: int, policy: str, runs: int) -> float:
    """Mean regret of `policy` over the first `count` perturbed jobs of `jobs_seed`."""
    return float(
        np.mean([results[(("job", jobs_seed, i), policy, job_seeds(i, runs), 1)]["regret"] for i in range(count)])
    )


def perturbed(tune_seed: int | None, jobs_seeds: list[int], count: int, results, cells, seeds, runs: int = 1) -> None:
    """The candidate with the least mean regret on the jobs of `tune_seed` is chosen there (None: turning-walk);
    every candidate is then shown against zeus-nsdi23 on the held-out jobs, `count` of each of `jobs_seeds`
    (`runs` simulations each, `job_seeds`), all jobs and by kind, with the gap to the same candidate's cut on
    the tuned cells. Several seeds: a mean regret over 240 jobs rests on its few worst jobs (benchmarks/RESULTS.md)."""
    chosen = OURS
    if tune_seed is not None:
        chosen = min(CANDIDATES, key=lambda p: job_regret(results, tune_seed, count, p, runs))
        z_tune = job_regret(results, tune_seed, count, BASELINE, runs)
        print(f"\nperturbed jobs, tuning set: {count} generated from seed {tune_seed}, K = 1; mean regret (cut)")
        for policy in CANDIDATES:
            r = job_regret(results, tune_seed, count, policy, runs)
            mark = "  <- chosen" if policy == chosen else ""
            print(f"{policy:<44}{r:>9.3f}{100.0 * (1.0 - r / z_tune):>8.1f}%{mark}")
    sources = [("job", s, i) for s in jobs_seeds for i in range(count)]
    key = {s: job_seeds(s[2], runs) for s in sources}
    zeus = [results[(s, BASELINE, key[s], 1)] for s in sources]
    where = f"seed {jobs_seeds[0]}" if len(jobs_seeds) == 1 else f"each of seeds {', '.join(map(str, jobs_seeds))}"
    runs_text = "" if runs == 1 else f", the mean of {runs} simulations per job"
    print(f"\nperturbed jobs: {count} generated from {where} (zeus_kfp.simulate.perturb), K = 1, held out{runs_text}")
    print(f"{'policy / jobs':<44}{'n':>5}{'regret cut':>12}{'cheaper':>10}{'gap':>8}{'median':>9}{'p90':>8}"
          f"{'worst':>8}{'excess z':>10}{'excess o':>10}{'(worst)':>8}")  # fmt: skip
    for policy in CANDIDATES:
        ours = [results[(s, policy, key[s], 1)] for s in sources]
        ratios = np.array([o["cost"] / z["cost"] for o, z in zip(ours, zeus, strict=True)])
        tuned_cut = cut(results, cells, policy, seeds)[0]
        for kind in ("all", *KINDS):
            sel = [i for i in range(len(sources)) if kind in ("all", ours[i]["kind"])]
            if not sel:
                continue
            rz, ro = np.mean([zeus[i]["regret"] for i in sel]), np.mean([ours[i]["regret"] for i in sel])
            ez, eo = [zeus[i]["excess"] for i in sel], [ours[i]["excess"] for i in sel]
            r = ratios[sel]
            c = 100.0 * (1.0 - ro / rz)
            print(
                f"{policy + ' / ' + kind:<44}{len(sel):>5}{c:>11.1f}%{f'{int((r < 1).sum())}/{len(sel)}':>10}"
                f"{tuned_cut - c:>+8.1f}{np.median(r):>9.4f}{np.quantile(r, 0.9):>8.4f}{r.max():>8.4f}"
                f"{np.mean(ez):>10.2f}{np.mean(eo):>10.2f}{np.max(eo):>8.2f}"
            )
    print_far_valleys(sources, key, results, zeus)
    if runs >= 2:
        print_paired(sources, key, results, zeus)
    ratio = {
        i: results[(sources[i], chosen, key[sources[i]], 1)]["cost"] / zeus[i]["cost"] for i in range(len(sources))
    }
    worst = sorted(ratio, key=lambda i: -ratio[i])[:5]
    print(
        f"{chosen}'s worst held-out jobs, ratio to {BASELINE}: "
        + ", ".join(f"seed {sources[i][1]} #{sources[i][2]} {zeus[i]['kind']} {ratio[i]:.2f}" for i in worst)
    )
    print(
        "ratio: the policy's cumulative cost / zeus-nsdi23's per job; gap: its cut on the tuned cells minus its cut"
        " here; excess: the worst excess over the default configuration (mean over jobs; worst job)"
    )


def print_far_valleys(sources, key, results, zeus) -> None:
    """How many held-out jobs have a far valley (zeus_kfp.simulate.perturb.has_far_valley: a cheaper size past a
    real rise, which a walk that ends a direction at a rise cannot reach and zeus-nsdi23's walk through every
    rise below its early stop finds), and how many of the jobs each candidate's mean cost is higher on have one."""
    valley = [z["far_valley"] for z in zeus]
    print(
        f"jobs with a far valley: {sum(valley)} of {len(sources)}; among those whose mean cost is higher than"
        f" {BASELINE}'s:"
    )
    for policy in CANDIDATES:
        ours = [results[(s, policy, key[s], 1)] for s in sources]
        higher = [o["cost"] > z["cost"] for o, z in zip(ours, zeus, strict=True)]
        print(f"{policy:<44} {sum(h and v for h, v in zip(higher, valley, strict=True))} of {sum(higher)}")


def print_paired(sources, key, results, zeus) -> None:
    """Per candidate, the held-out jobs it costs significantly more (or less) on than zeus-nsdi23 (paired by
    simulation seed, zeus_kfp.simulate.paired), beside those whose mean merely came out higher."""
    rate = f"{100 * FALSE_DISCOVERY_RATE:g} %"
    print(f"paired by seed, one-sided t-test on log cost per job, Benjamini-Hochberg at {rate} over the jobs:")
    for policy in CANDIDATES:
        ours = [results[(s, policy, key[s], 1)] for s in sources]
        verdict = paired_verdict([o["costs"] for o in ours], [z["costs"] for z in zeus])
        higher = sum(o["cost"] > z["cost"] for o, z in zip(ours, zeus, strict=True))
        valleys = sum(c and z["far_valley"] for c, z in zip(verdict.costlier, zeus, strict=True))
        print(
            f"{policy:<44} costlier on {sum(verdict.costlier)} ({valleys} with a far valley), cheaper on"
            f" {sum(verdict.cheaper)} of {len(sources)} (mean cost higher on {higher})"
        )


def print_candidates(cells, results, seeds, gpus) -> None:
    """Each candidate on the tuned cells: mean regret per GPU and overall, its cut, the cells it wins."""
    print(f"\ncandidates on the tuned cells (seeds {seeds[0]}-{seeds[-1]}, K = 1): mean regret; {BASELINE} for scale")
    print(f"{'policy':<34}" + "".join(f"{g:>9}" for g in gpus) + f"{'all':>9}{'cut':>8}{'cheaper':>9}")
    for policy in (BASELINE, *CANDIDATES):
        per = [np.mean([results[(c, policy, seeds, 1)]["regret"] for c in cells if c[2] == g]) for g in gpus]
        c, wins, ro, _ = cut(results, cells, policy, seeds)
        print(f"{policy:<34}" + "".join(f"{x:>9.3f}" for x in per) + f"{ro:>9.3f}{c:>7.1f}%{wins:>5}/{len(cells)}")


def print_fidelity(cells, results, seeds) -> None:
    """zeus-nsdi23 here vs Zeus's own simulator (eta 0.5 cells; the reference used seeds 1-20)."""
    print(f"\nfidelity: zeus-nsdi23 cost / oracle, Zeus's simulator vs ours (tolerance {FIDELITY_TOLERANCE:.0%})")
    for c in cells:
        ref = ZEUS_SIMULATOR_REFERENCE.get((c[1], c[2]))
        if ref is None or c[3] != 0.5:
            continue
        ours = results[(c, BASELINE, seeds, 1)]["ratio"]
        ok = "ok" if abs(ours / ref[0] - 1) < FIDELITY_TOLERANCE else "OUT"
        print(f"{c[1] + '/' + c[2]:<26}{ref[0]:>8.3f}{ours:>8.3f}{100 * (ours / ref[0] - 1):>+8.2f} %  {ok}")


def decide_speed(num_trials: int = 10_000) -> dict[str, float]:
    """Seconds for one decide() (history read included) over a synthetic `num_trials` history on the
    librispeech/V100 job: the best of 7."""
    sim = build_simulator("librispeech")
    spec = sim.spec
    seed_run = sim.run(get_policy(BASELINE), seed=1)
    rng = np.random.default_rng(0)
    arms = sorted({t.batch_size for t in seed_run.history[-50:]})
    history = list(seed_run.history)
    while len(history) < num_trials:
        b = int(rng.choice(arms))
        cost = float(rng.normal(1.0, 0.05)) * sim.oracle.cost / seed_run.num_recurrences
        history.append(Trial(len(history), len(history), b, TrialStatus.REACHED, cost, cost / 300, cost))
    out = {name: float("inf") for name in POLICY_NAMES}
    for _ in range(7):  # the best of 7, interleaved: other work on the machine only ever adds time
        for name in POLICY_NAMES:
            t0 = time.perf_counter()
            get_policy(name).decide(spec, history, 1)
            out[name] = min(out[name], time.perf_counter() - t0)
    return out


SMALLEST = ["--seeds", "1", "--check-seeds", "none", "--workloads", "sentiment140", "--etas", "0.5",
            "--in-flight", "1", "--perturbed", "3", "--job-runs", "2", "--decide-trials", "1000"]  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20", help="seeds, '1-20' or '1,2,7' (default 1-20)")
    parser.add_argument("--check-seeds", default="21-40", help="second seed set, or 'none' (default 21-40)")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), help="workload names (default: all six)")
    parser.add_argument("--gpus", nargs="*", default=list(SHIPPED_POWER_TRACES), help="shipped GPU traces")
    parser.add_argument("--etas", nargs="*", type=float, default=list(ETAS), help="eta values (default 0.25 0.5 0.75)")
    parser.add_argument("--in-flight", nargs="*", type=int, default=[1, 2, 4, 8], help="K values (eta 0.5 cells)")
    parser.add_argument("--perturbed", type=int, default=240, help="perturbed jobs (default 240; 0: none)")
    parser.add_argument(
        "--perturb-seeds", default="2", help="the held-out perturbed jobs' seeds, '2' or '4-7' (default 2)"
    )
    parser.add_argument(
        "--tune-seed", type=lambda t: None if t == "none" else int(t), default=1,
        help="the tuning jobs' seed, or 'none' (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--job-runs", type=int, default=1, help="simulations per generated job, their mean its figure (default 1)"
    )
    parser.add_argument("--decide-trials", type=int, default=10_000, help="history length for the decide() timing")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--candidates", nargs="*", help=f"the CANDIDATES to compare (default: all; {OURS!r} always)")
    parser.add_argument("--fidelity", action="store_true", help="also compare zeus-nsdi23 with Zeus's simulator")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every part at its smallest size (tests/test_benchmarks_smoke.py): " + " ".join(SMALLEST),
    )
    args = parser.parse_args(argv)
    return parser.parse_args([*(argv if argv is not None else sys.argv[1:]), *SMALLEST]) if args.smoke else args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    keep_candidates(args.candidates)
    if FROZEN in CANDIDATES:
        frozen_policy()  # here, before the pool: a history that lacks it fails once, with its reason
    seeds, check = tuple(parse_seeds(args.seeds)), tuple(parse_seeds(args.check_seeds))
    cells = [("cell", w, g, e) for e in args.etas for g in args.gpus for w in args.workloads]
    half = [c for c in cells if c[3] == 0.5] or cells
    ks = sorted(set(args.in_flight) | {1})
    policies = list(dict.fromkeys([BASELINE, OURS, *CANDIDATES]))
    held_out = parse_seeds(args.perturb_seeds)
    tune = () if args.tune_seed is None else (args.tune_seed,)
    jobs = [("job", s, i) for s in dict.fromkeys((*tune, *held_out)) for i in range(args.perturbed)]
    tasks = [(c, p, seeds, 1) for c, p in product(cells, policies)]
    tasks += [(c, p, check, 1) for c, p in product(cells, (BASELINE, OURS)) if check]
    tasks += [(c, p, seeds, k) for c, p, k in product(half, policies, ks) if k > 1]
    tasks += [(j, p, job_seeds(j[2], args.job_runs), 1) for j, p in product(jobs, policies)]
    t0 = time.perf_counter()
    results = run_tasks(tasks, args.jobs)
    wall = time.perf_counter() - t0

    print_cells(cells, results, seeds)
    for label, s in (("seeds", seeds), ("check seeds", check)):
        if s:
            c, wins, ro, rz = cut(results, cells, OURS, s)
            print(
                f"{label} {s[0]}-{s[-1]}: mean regret over {len(cells)} tuned cells: {BASELINE} {rz:.3f}, {OURS} "
                f"{ro:.3f} ({c:.1f} % less); {OURS} cheaper on {wins} of {len(cells)} cells"
            )
    if len(args.gpus) > 1:
        leave_one_gpu_out(cells, results, seeds, args.gpus)
    print_candidates(cells, results, seeds, args.gpus)
    if jobs:
        perturbed(args.tune_seed, held_out, args.perturbed, results, cells, seeds, args.job_runs)
    if len(ks) > 1:
        excess = first_wave_excess([c[1:] for c in half], list(seeds))
        k1 = np.mean([results[(c, OURS, seeds, 1)]["regret"] for c in half])
        where = f"the {len(half)} eta-0.5 cells, seeds {seeds[0]}-{seeds[-1]}"
        print(f"\nK recurrences in flight: mean regret over {where}")
        others = [p for p in CANDIDATES if p != OURS]
        head = f"{'K':>3}{BASELINE:>13}{OURS:>14}{'x K=1':>8}{'default-only wave':>19}"
        print(head + "".join(f"{p:>26}" for p in others))
        for k in ks:
            rz = np.mean([results[(c, BASELINE, seeds, k)]["regret"] for c in half])
            ro = np.mean([results[(c, OURS, seeds, k)]["regret"] for c in half])
            rest = "".join(f"{np.mean([results[(c, p, seeds, k)]['regret'] for c in half]):>26.2f}" for p in others)
            print(f"{k:>3}{rz:>13.2f}{ro:>14.2f}{ro / k1:>8.2f}{k1 + (k - 1) * excess:>19.2f}{rest}")
        print(
            f"default-only wave: K=1 regret + (K-1) x {excess:.3f}, the default size's first trial over the oracle:"
            " the floor for a policy whose K recurrences that start together all run the default size"
        )
    runs = sum(len(t[2]) for t in tasks)
    print(f"\nsimulation wall time: {wall:.1f} s for {runs} runs ({len(tasks)} tasks, {args.jobs} process(es))")
    if args.fidelity:
        print_fidelity(cells, results, seeds)
    speed = decide_speed(args.decide_trials)
    times = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in speed.items())
    print(f"decide() over a {args.decide_trials:,}-trial history (best of 7): {times}")
    print("reproduce: .venv/bin/python benchmarks/policy.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
