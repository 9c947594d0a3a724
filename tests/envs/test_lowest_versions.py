"""zeus-kfp with every dependency at the floor setup.cfg declares (.venv-lowest), beside the newest
versions (this suite's own .venv): the same job, the same seed, the same savings."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from venvs import ROOT, built_venv, run

pytestmark = pytest.mark.envs

# The lines `zeus-kfp run` prints about the saving: one per recurrence and the summary.
SAVING_LINES = re.compile(r"^ *(recurrence \d+: cost .*|saving vs the default config: .*)$", re.MULTILINE)
INSTALLED = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
# What runs inside .venv-lowest, by its own pytest: the store's contract on both backends, the stored-data and
# profile tests, and the run settings through the real gate step.
LOWEST_TESTS = [
    "tests/store/test_store_api.py",
    "tests/store/test_store_bad_data.py",
    "tests/store/test_power_profile.py",
    "tests/store/test_store_values.py",
    "tests/store/test_snapshot_identity.py",
    "tests/test_run_settings.py",
]

PLAIN_SCRIPT = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
args = parser.parse_args()
for epoch in range(1, 6):
    print(f"epoch={epoch} accuracy={1.0 - 0.5 ** (epoch * 64 / args.batch_size):.4f}", flush=True)
"""
PLAIN_JOB = "job_id: plain\nbatch_sizes: [16, 32, 64, 128]\ndefault_batch_size: 64\ntarget_metric: 0.9\nmax_epochs: 5\n"


def test_the_lowest_environment_holds_the_declared_floors(tmp_path: Path) -> None:
    """Were the installer (uv: Makefile) to resolve a newer release than a pin, every other test here would test the
    wrong thing."""
    lowest = built_venv(".venv-lowest")
    pins = dict(line.split("==") for line in (ROOT / "constraints-lowest.txt").read_text().split() if "==" in line)
    proc = run([lowest / "bin" / "python", "-c", INSTALLED, *pins], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    installed = json.loads(proc.stdout)
    assert {name: version.split("+")[0] for name, version in installed.items()} == pins


def test_the_stores_contract_and_the_run_settings_hold_with_the_lowest_versions(tmp_path: Path) -> None:
    lowest = built_venv(".venv-lowest")
    pytest_args = ["-n", "2", "-q", "-p", "no:cacheprovider", "--basetemp", tmp_path / "t", *LOWEST_TESTS]
    proc = run([lowest / "bin" / "python", "-m", "pytest", *pytest_args], cwd=ROOT)
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert re.search(r"^\d+ passed", proc.stdout.splitlines()[-1]), proc.stdout[-2000:]


def test_the_main_job_saves_the_same_with_the_lowest_versions(tmp_path: Path) -> None:
    lowest = built_venv(".venv-lowest")
    savings = {}
    for name, bin_dir in (("newest", Path(sys.executable).parent), ("lowest", lowest / "bin")):
        work = tmp_path / name
        work.mkdir()
        proc = run([bin_dir / "zeus-kfp", "run", "-r", "2", "--seed", "3"], cwd=work)
        assert proc.returncode == 0, f"{name}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        savings[name] = SAVING_LINES.findall(proc.stdout)
    assert [line.split(":")[0] for line in savings["newest"]] == [
        "recurrence 1",
        "recurrence 2",
        "saving vs the default config",
    ]
    assert savings["lowest"] == savings["newest"]


def test_a_plain_script_trains_as_a_trial_with_the_lowest_versions(tmp_path: Path) -> None:
    lowest = built_venv(".venv-lowest")
    (tmp_path / "train.py").write_text(PLAIN_SCRIPT)
    (tmp_path / "job.yaml").write_text(PLAIN_JOB)
    command = "{python} train.py --batch-size {batch_size}"
    proc = run(
        [lowest / "bin" / "zeus-kfp", "run", "--command", command, "--spec", "job.yaml", "-r", "1"], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert re.search(r"^recurrence 1: reached the target", proc.stdout, re.MULTILINE), proc.stdout[-4000:]
