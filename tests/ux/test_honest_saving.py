"""A Keras-style script from the first try, and a headline saving that failures do not move.

Scripts written as people write them (tests/ux/user_scripts/keras_style.py: argparse, `logging`, Keras's
`Epoch 3/10 - loss: 0.41 - val_acc: 0.912` lines), run through the `zeus-kfp` console script: kfp.local, the
real components, a real store in a temporary directory, the simulated GPU (no GPU here)."""

from __future__ import annotations

import json

import pytest

from ux.cli_process import run_cli
from ux.test_user_scripts import run, stored, user_dir

KERAS = r"[Ee]poch (?P<epoch>\d+)/\d+.*?(?P<name>val_acc): (?P<value>[0-9.]+)"
COMMAND = "{python} keras_style.py --batch-size {batch_size} --mode-file mode.txt"


def night(work, mode: str, *args: str):
    (work / "mode.txt").write_text(mode)
    return run(work, "--command", COMMAND, "--spec", "job.yaml", "--metric-pattern", KERAS, *args)


def shown(work, job: str) -> dict:
    return json.loads(run_cli("show", job, "--store", "store", "--json", cwd=work).stdout)


@pytest.mark.slow
def test_a_crash_and_a_sigterm_leave_the_cumulative_saving_as_it_was_and_their_energy_is_shown_apart(tmp_path):
    # Target 0.95: no batch size reaches it at its first epoch, so the crash and the SIGTERM of the second epoch
    # come after an epoch of reported work, which the simulated GPU charges (it charges only reported work).
    work = user_dir(tmp_path, "keras_style.py", job="nightly", target=0.95)
    assert night(work, "ok", "-r", "2").returncode == 0
    before = shown(work, "nightly")["saving"]["cumulative"]
    trials = stored(work, "nightly")
    # The Keras lines, read with named groups, carry the epoch: every trial was power-profiled.
    assert not trials["reason"].str.contains("unprofiled").any(), trials["reason"].tolist()
    assert set(trials["status"]) == {"reached"}

    crashed = night(work, "crash", "-r", "1")
    drained = night(work, "sigterm", "-r", "1")
    assert crashed.returncode == 1 and drained.returncode == 1
    after = shown(work, "nightly")
    trials = stored(work, "nightly")
    failed = trials[trials["recurrence"] > 2]
    assert list(failed["status"]) == ["failed", "failed"] and (failed["energy_j"] > 0).all()
    assert "exit code -15" in failed["reason"].iloc[1]  # SIGTERM
    assert after["saving"]["cumulative"] == pytest.approx(before, abs=0.001)  # to 0.1 percentage point
    assert after["failed"]["recurrences_left_out"] == [3, 4]
    assert after["failed"]["energy_j"] == pytest.approx(failed["energy_j"].sum())
    assert [r["saving"] for r in after["saving"]["per_recurrence"]][2:] == [None, None]
    # and the people-facing views say it apart, in the same words
    text = run_cli("show", "nightly", "--store", "store", cwd=work, COLUMNS="160").stdout
    assert "failed runs (no model; left out of the saving):" in text
    assert "over 2 counted, 2 failed and left out" in text
    assert "recurrence 4: failed, no model" in drained.stdout


@pytest.mark.slow
def test_a_wrong_metric_name_fails_after_two_epochs_of_output_naming_what_was_seen(tmp_path):
    """The script prints three epochs and then hangs: only an early verdict ends the trial (else it would wait
    for the hour its data loader sleeps)."""
    work = user_dir(tmp_path, "keras_style.py", job="wrong-name", metric="val_accuracy")
    any_name = r"[Ee]poch (?P<epoch>\d+)/\d+ - (?P<name>\w+): (?P<value>[0-9.]+)"  # reads `loss` only
    proc = night(work, "hang", "-r", "1", "--metric-pattern", any_name)
    assert proc.returncode == 1
    (reason,) = stored(work, "wrong-name")["reason"]
    assert "the script never reported 'val_accuracy' in its first 2 epochs of output" in reason
    assert "metrics it did report: loss" in reason


@pytest.mark.slow
def test_keras_lines_under_katibs_default_pattern_fail_early_with_the_lines_and_a_pattern_that_works(tmp_path):
    work = user_dir(tmp_path, "keras_style.py", job="keras-default")
    (work / "mode.txt").write_text("hang")
    proc = run(work, "--command", COMMAND, "--spec", "job.yaml", "-r", "1")
    assert proc.returncode == 1
    (reason,) = stored(work, "keras-default")["reason"]
    assert "never reported 'val_acc' in its first 2 epochs of output" in reason
    assert "lines that mention it: Epoch 1/10 - loss: " in reason
    suggested = reason.split("try --metric-pattern '")[1].split("'")[0]
    (work / "mode.txt").write_text("ok")
    fixed = run(work, "--command", COMMAND, "--spec", "job.yaml", "--metric-pattern", suggested, "-r", "1")
    assert fixed.returncode == 0, fixed.stderr
    last = stored(work, "keras-default").iloc[-1]
    assert last["status"] == "reached" and "unprofiled" not in last["reason"]
