"""The model stays where the script put it (`--keep`), and a trial that kept none names what was
deleted. Through the `zeus-kfp` console script, kfp.local, the real components and store."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
import yaml

from ux.cli_process import run_cli
from ux.test_user_scripts import run, stored, user_dir

COMMAND = "{python} keeps_checkpoints.py --batch-size {batch_size}"


def models(stdout: str) -> list[str]:
    return re.findall(r"^  model \(trial \d+\): (.+)$", stdout, re.M)


@pytest.mark.slow
def test_keep_makes_the_scripts_own_checkpoint_the_model_and_without_it_the_deleted_file_is_named(tmp_path):
    work = user_dir(tmp_path, "keeps_checkpoints.py", job="keeps")
    kept = run(work, "--command", COMMAND, "--spec", "job.yaml", "--keep", "checkpoints/*.pt", "-r", "1")
    assert kept.returncode == 0, kept.stderr
    (model,) = models(kept.stdout)
    trial = stored(work, "keeps").iloc[-1]
    with Path(model).open("rb") as f:  # the script's own checkpoint, of an epoch at or after the target's (the
        saved = pickle.load(f)  # stop reaches a script this fast a few epochs late)
    assert saved["batch_size"] == trial["batch_size"] and trial["num_epochs"] <= saved["epoch"] <= 8
    assert saved["val_acc"] == round(1 - 0.5 ** (saved["epoch"] * 64 / trial["batch_size"]), 4)

    # The job remembers its keep globs (a run without --keep keeps as the last did): '' goes back to the default.
    plain = run(work, "--command", COMMAND, "--spec", "job.yaml", "--keep", "", "-r", "1")
    assert plain.returncode == 0, plain.stderr
    assert "keeps {log_dir}/model.pt as the model (keep: 'checkpoints/*.pt' -> '')" in plain.stdout
    (hint,) = models(plain.stdout)
    assert hint.startswith("none: the script wrote checkpoints/model.pt, deleted with the trial's work directory")
    assert "--keep" in hint


def test_a_keep_outside_the_work_directory_is_refused_naming_the_option_and_storing_nothing(tmp_path):
    work = user_dir(tmp_path, "keeps_checkpoints.py", job="keeps-bad")
    proc = run(work, "--command", COMMAND, "--spec", "job.yaml", "--keep", "../models/*.pt", "-r", "1")
    assert proc.returncode == 2
    assert "keep" in proc.stderr and "relative to the trial's work directory" in proc.stderr
    assert not (work / "store").exists() or stored(work, "keeps-bad").empty


def test_compile_takes_the_collector_and_keep_as_the_runs_defaults(tmp_path):
    work = user_dir(tmp_path, "keeps_checkpoints.py", job="compiled")
    collector = '{"kind": "file", "source": {"fileSystemPath": {"path": "metrics.log", "format": "text"}}}'
    proc = run_cli(
        "compile", "-o", "p.yaml", "--image-repo", "registry.example.com/zeus-kfp", "--command",
        "{python} /opt/app/keeps_checkpoints.py --batch-size {batch_size}", "--spec", "job.yaml", "--plain",
        "--metrics-collector", collector, "--keep", "checkpoints/*.pt", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (pipeline,) = [d for d in yaml.safe_load_all((work / "p.yaml").read_text()) if d and "root" in d]
    params = pipeline["root"]["inputDefinitions"]["parameters"]
    assert params["keep"]["defaultValue"] == "checkpoints/*.pt"
    assert '"fileSystemPath"' in params["metrics_collector"]["defaultValue"]
    assert "metrics.log" in params["metrics_collector"]["defaultValue"]
