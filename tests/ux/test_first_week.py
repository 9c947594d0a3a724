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


# -- a first-run typo does not lock the job ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_typo_on_the_first_run_gives_way_to_the_fixed_spec_until_a_trial_reaches(tmp_path):
    work = user_dir(tmp_path, "keras_style.py", job="typo-metric", metric="val_acc")
    (work / "mode.txt").write_text("ok")
    args = ("--command", COMMAND, "--spec", "job.yaml", "--metric-pattern", KERAS, "-r", "1")
    typo = run(work, *args, "--metric-name", "val_accuracy")
    assert typo.returncode == 1 and "never reported 'val_accuracy'" in typo.stderr
    fixed = run(work, *args)
    assert fixed.returncode == 0, fixed.stderr
    (said,) = [line for line in fixed.stdout.splitlines() if "spec was replaced" in line]
    assert said.startswith("job typo-metric's spec was replaced (metric_name: 'val_accuracy' -> 'val_acc'): no result")
    trials = stored(work, "typo-metric")  # the job's history under its spec: the fixed run's trial alone
    assert list(trials["recurrence"]) == [2] and list(trials["status"]) == ["reached"]
    assert trials["batch_size"].iloc[0] == 64  # decided as for a new job: its default batch size first
    text = run_cli("show", "typo-metric", "--store", "store", cwd=work, COLUMNS="300").stdout
    assert "spec replaced at recurrence 2 (metric_name: 'val_accuracy' -> 'val_acc')" in text
    assert "left out: the 1 trial(s) of 1 recurrence(s) under an earlier spec, none reached" in text
    assert "opened: spec replaced" in text  # the gate's table
    data = shown(work, "typo-metric")
    assert [t["status"] for t in data["replaced_trials"]] == ["failed"] and len(data["trials"]) == 1

    changed = run(work, *args, "--target-metric", "0.99")  # a trial has reached: the spec is settled
    assert changed.returncode == 2 and changed.stdout.count("\n") <= 1  # only the header line, nothing ran
    (error,) = changed.stderr.strip().splitlines()
    assert "settled by its trial 2" in error and "target_metric: 0.93 -> 0.99" in error
    assert "`zeus-kfp delete typo-metric`" in error and "new --job-id" in error
    deleted = run_cli("delete", "typo-metric", "--store", "store", "--yes", cwd=work)
    assert deleted.returncode == 0, deleted.stderr
    afresh = run(work, *args, "--target-metric", "0.99")  # what the error said helps
    assert afresh.returncode == 0, afresh.stderr
    assert list(stored(work, "typo-metric")["recurrence"]) == [1]


# -- how a script reports belongs to the job -------------------------------------------------------------------------


@pytest.mark.slow
def test_how_the_script_reports_is_remembered_for_the_job_and_a_later_run_may_change_it(tmp_path):
    work = user_dir(tmp_path, "keras_style.py", job="keras-job")
    (work / "mode.txt").write_text("ok")
    first = run(work, "--command", COMMAND, "--spec", "job.yaml", "--metric-pattern", KERAS, "-r", "1")
    assert first.returncode == 0, first.stderr
    again = run(work, "--command", COMMAND, "--spec", "job.yaml", "-r", "1")  # no --metric-pattern this time
    assert again.returncode == 0, again.stderr
    assert list(stored(work, "keras-job")["status"]) == ["reached", "reached"]  # not a failed recurrence
    (said,) = [line for line in again.stdout.splitlines() if "the job's, from recurrence 1" in line]
    assert said == (
        f"job keras-job reads val_acc from the script's output with --metric-pattern {KERAS!r}; keeps "
        f"{{log_dir}}/model.pt as the model (the job's, from recurrence 1: --metric-pattern {KERAS!r})"
    )
    changed = run(work, "--command", COMMAND, "--spec", "job.yaml", "--keep", "ck/*.pt", "-r", "1")
    assert changed.returncode == 0, changed.stderr
    assert (
        f"job keras-job now reads val_acc from the script's output with --metric-pattern {KERAS!r}; keeps "
        "--keep 'ck/*.pt' as the model (keep: '' -> 'ck/*.pt')" in changed.stdout
    )
    text = run_cli("show", "keras-job", "--store", "store", cwd=work, COLUMNS="300").stdout
    assert f"reads val_acc from the script's output with --metric-pattern {KERAS!r}; keeps --keep 'ck/*.pt'" in text
    assert shown(work, "keras-job")["reads"]["keep"] == "ck/*.pt"


# -- one path to a cluster: --keep on a cluster trial is refused with why ------------------------------------------


def test_keep_with_a_cluster_launcher_is_refused_saying_what_a_cluster_trial_hands_back(tmp_path):
    """The README's own-script compile line runs in tests/ux/test_readme.py and its cluster blocks in
    test_readme_cluster.py; here, what a user who adds --keep to it is told, at compile time and, for a package
    compiled with a local launcher, when a run asks for a cluster one."""
    work = user_dir(tmp_path, "keeps_checkpoints.py", job="keeper")
    own = ["--command", "{python} /opt/app/keeps_checkpoints.py --batch-size {batch_size}", "--spec", "job.yaml",
           "--plain", "--image-repo", "registry.example.com/ml/zeus-kfp"]  # fmt: skip
    refused = run_cli("compile", "-o", "p.yaml", "--launcher", "trainjob", "--keep", "checkpoints/*.pt", *own, cwd=work)
    assert refused.returncode == 2 and not (work / "p.yaml").exists()
    (line,) = refused.stderr.strip().splitlines()
    assert "keep" in line and "cluster launcher (trainjob)" in line and "{log_dir}/model.pt" in line
    assert "--launcher local or torchrun" in line
    local = run_cli("compile", "-o", "p.yaml", "--keep", "checkpoints/*.pt", *own, cwd=work)
    assert local.returncode == 0, local.stderr
    dry = run_cli("dry-run", "--package", "p.yaml", "--param", "launcher=pytorchjob", cwd=work)
    assert dry.returncode == 2 and "cluster launcher (pytorchjob)" in dry.stderr
    submitted = run_cli(
        "submit", "--package", "p.yaml", "--param", "launcher=trainjob", cwd=work, KFP_HOST="http://127.0.0.1:9"
    )  # fmt: skip  (refused before any network call)
    assert submitted.returncode == 2 and "cluster launcher (trainjob)" in submitted.stderr
