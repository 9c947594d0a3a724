"""A user's first week with their own script, as they type it into the `zeus-kfp` console script.

Each test runs real `zeus-kfp run`s (kfp.local, the real components, a real store in a temporary directory, the
simulated GPU: no GPU here) of scripts written the way people write them (tests/ux/user_scripts/), then reads what
`run` and `show` said. The scripts' stand-in training reaches accuracy 1 - 0.5 ** (epoch * 64 / batch size).
"""

from __future__ import annotations

import json

import pytest

from ux.cli_process import run_cli
from ux.test_honest_saving import COMMAND, KERAS
from ux.test_user_scripts import run, stored, user_dir


def shown(work, job: str) -> dict:
    proc = run_cli("show", job, "--store", "store", "--json", cwd=work)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- a target with nothing to learn --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_target_every_trial_meets_at_its_first_evaluation_is_said_and_reports_no_saving(tmp_path):
    """accuracy >= -0.5 (a sign slip of a loss target): every trial "reaches" it at its first evaluation, so no
    training told the batch sizes apart; neither `run` nor `show` may call the difference a saving."""
    work = user_dir(tmp_path, "keras_style.py", job="met-at-once", target=-0.5)
    (work / "mode.txt").write_text("ok")
    proc = run(work, "--command", COMMAND, "--spec", "job.yaml", "--metric-pattern", KERAS, "-r", "2")
    assert proc.returncode == 0, proc.stderr
    trials = stored(work, "met-at-once")
    assert list(trials["status"]) == ["reached", "reached"] and list(trials["num_epochs"]) == [1, 1]
    said = (
        "no saving: the target val_acc >= -0.5 is met before any training tells the batch sizes apart (all 2 "
        "trial(s) so far met it at their first evaluation)"
    )
    assert said in proc.stdout and "saving vs the default config" not in proc.stdout
    text = run_cli("show", "met-at-once", "--store", "store", cwd=work, COLUMNS="300").stdout
    assert said in text and "cumulative" not in text
    data = shown(work, "met-at-once")
    assert data["saving"]["cumulative"] is None and data["saving"]["met_at_once"] == 2 and data["saved"] is None
    assert [r["saving"] for r in data["saving"]["per_recurrence"]] == [None, None]
    fleet = json.loads(run_cli("fleet", "--store", "store", "--json", cwd=work).stdout)
    (job,) = fleet["jobs"]
    assert job["saving"] is None and job["met_at_once"] and fleet["total"]["without_baseline"] == []
