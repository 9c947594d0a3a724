"""Every benchmark runs in the suite at its smallest size, so that none can rot silently.

benchmarks/profiler.py once failed with a TypeError for months of changes nobody ran it through: a
benchmark is a script, and nothing imports a script. Here every benchmarks/*.py (the directory's listing,
so a new one is covered without a line here) runs as its README says, in a process of its own, with
`--smoke`: its smallest size, in seconds. Only that it runs and prints its table is asserted; its
figures are timings and simulations that the other tests judge.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NOT_BENCHMARKS = {"bso_server.py": "Zeus 0.16's server, which peer_bso.py starts in a virtualenv of its own"}
# A line of each one's table, as its smoke run prints it.
TABLE = {
    "drift.py": "drift: regret after the shift",
    "equivalence.py": "identical trial by trial:",
    "gpu_check.py": "all steps ok:",  # False without a GPU: each step reports its failure, the check still runs
    "gpu_sweep.py": "gpu sweep (SIMULATED (stand-in H200)): pick/optimum cost ratio by recurrence 1",
    "hung_server.py": "failed after",
    "peer_ab.py": '"decision_ms":',
    "peer_bso.py": "| decision (`bandit` vs `GET /jobs/batch_size`), median |",
    "pipeline.py": "worst orchestration overhead per attempt:",
    "policy.py": "perturbed jobs: 3 generated from seed 2",
    "power_pipeline.py": "stand-in h200 pipeline: pick/optimum cost ratio by recurrence 1",
    "power_replay.py": "h200 resnet18 bs256: pick/optimum cost ratio",
    "noise_prior.py": "fitted noise prior: s0 (cv)",
    "overlap.py": "where the regret goes, turning-walk",
    "profile_book.py": "profile book of 100 stored profiles: median",
    "profiler.py": "eta=0.50: exhaustive optimum",
    "seed.py": "read back 100; ok",
    "store.py": "| local | 100 |",
    "store_checkers.py": "result: 0 violations",
    "store_races.py": "result: 0 errors",
}


def benchmarks() -> list[str]:
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in NOT_BENCHMARKS)


def test_the_tables_name_only_scripts_that_exist():
    names = {p.name for p in BENCHMARKS.glob("*.py")}
    assert set(NOT_BENCHMARKS) <= names and set(TABLE) <= names
    assert len(benchmarks()) >= 12  # the listing saw the directory


@pytest.mark.slow
@pytest.mark.parametrize("script", benchmarks())
def test_a_benchmark_runs_at_its_smallest_size_and_prints_its_table(script, tmp_path):
    assert script in TABLE, f"add a line of what `benchmarks/{script} --smoke` prints to TABLE"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZEUS_S3_")}  # each starts its own S3 server
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke"],
        cwd=tmp_path,  # whatever a benchmark writes lands here
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    assert TABLE[script] in done.stdout, said
