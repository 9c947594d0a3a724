"""What a pipeline step imports in its own fresh process (each KFP step is one): only what it needs.

A bandit step that finds a trial in flight checks it for staleness and words a reason for a lost one
(zeus_kfp.steps.abandoned, with zeus_kfp.report.units); importing that must not load matplotlib, which only
the report step draws with (0.5 s on an idle machine, seconds under load)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from zeus_kfp.job import JobSpec
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.store import open_store

STEP = """
import json, sys
from datetime import datetime
from zeus_kfp.steps.bandit import bandit
store_uri, job_id, now = sys.argv[1:4]
choice = bandit(store_uri=store_uri, job_id=job_id, recurrence_id="run-b", attempt=1, policy="default",
                dispatch_timeout_s=3600, now=datetime.fromisoformat(now))
heavy = sorted(m for m in ("matplotlib", "kfp", "torch") if m in sys.modules)
print(json.dumps({"abandoned": len(choice.abandoned), "heavy": heavy}))
"""


def test_a_bandit_step_that_finds_a_lost_trial_loads_no_plotting_library(tmp_path):
    spec = JobSpec(job_id="cold", batch_sizes=(32, 64, 128), default_batch_size=64, target_metric=0.9, max_epochs=5)
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(spec)
    for rid in ("run-a", "run-b"):
        store.begin_recurrence(spec.job_id, rid)
    bandit(store_uri=store.uri, job_id=spec.job_id, recurrence_id="run-a", attempt=1, policy="default")
    later = (datetime.now(UTC) + timedelta(days=2)).isoformat()  # run-a's trial is two days old by then
    out = subprocess.run([sys.executable, "-c", STEP, store.uri, spec.job_id, later],
                         capture_output=True, text=True, check=True)  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"abandoned": 1, "heavy": []}


def test_the_cli_loads_no_data_library_before_a_command_needs_one():
    """`zeus-kfp --help` (and every command's start) imports the CLI's modules: they name trials and their
    columns (zeus_kfp.trials) without numpy, pandas or pyarrow, which load only where a command reads data."""
    heavy = "('numpy', 'pandas', 'pyarrow')"
    probe = f"import sys, zeus_kfp.cli.application; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# What each pipeline step's process imports (the module its component calls) and what the Markdown report and
# `zeus-kfp show` import: none of them may load a library only some of their work needs. scipy (0.4 s) fits a
# noisy meter's profile at the choice of a limit; matplotlib (0.4 s) draws figures; TensorBoard's writer
# (0.45 s, with boto3 where installed) is not used at all; torch (2 s) is the training script's.
STEP_MODULES = ["zeus_kfp.steps." + step for step in ("gate", "preprocess", "bandit", "train", "feedback")]
HEAVY = ("scipy", "matplotlib", "tensorboard.summary", "torch")


def loaded_heavy(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_each_pipeline_step_and_the_report_modules_load_only_what_they_use():
    assert loaded_heavy("\n".join(f"import {module}" for module in STEP_MODULES)) == []
    assert loaded_heavy("import zeus_kfp.report.markdown, zeus_kfp.report.plots, zeus_kfp.report.tensorboard") == []


def test_show_without_plots_draws_nothing_and_loads_no_plotting_library(tmp_path):
    store = open_store(str(tmp_path / "store"))
    spec = JobSpec(job_id="cold", batch_sizes=(32, 64), default_batch_size=64, target_metric=0.9, max_epochs=5)
    store.ensure_job(spec)
    show = f"""
from typer.testing import CliRunner
from zeus_kfp.cli.application import app
result = CliRunner().invoke(app, ["show", "cold", "--store", {store.uri!r}])
assert result.exit_code == 0 and "cold" in result.output, result.output
"""
    assert loaded_heavy(show) == []
