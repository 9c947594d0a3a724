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
