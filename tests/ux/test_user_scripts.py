"""A user's own training script, right the first time.

Each test runs scripts written the way people write them (tests/ux/user_scripts/: argparse, Katib's file
logging, `Epoch 3: ... val_acc=...` lines, TensorBoard's SummaryWriter) through the `zeus-kfp` console
script: kfp.local, the real components, a real store in a temporary directory. No GPU here: the runner's
simulated GPU charges a plain script by the work it reports (zeus_kfp.power.simulated "Plain scripts"), so the
figures checked below are the model's, worked out by hand, whatever the machine's load.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ux.cli_process import run_cli
from zeus_kfp.power import PowerModel
from zeus_kfp.store import open_store

SCRIPTS = Path(__file__).parent / "user_scripts"
JOB = """job_id: {job}
batch_sizes: [16, 32, 64, 128]
default_batch_size: {default}
target_metric: {target}
max_epochs: {max_epochs}
metric_name: {metric}
"""
# accuracy = 1 - 0.5 ** (epoch * 64 / batch size) in the scripts' stand-in training: the epoch at which each
# batch size first reaches 0.93 (0.9375), by hand.
EPOCHS_TO_093 = {16: 1, 32: 2, 64: 4, 128: 8}


def user_dir(tmp_path: Path, *scripts: str, job: str, target: float = 0.93, metric: str = "val_acc", **more) -> Path:
    """`scripts` copied into a fresh directory with the user's job.yaml (more: default, max_epochs)."""
    for name in scripts:
        shutil.copy(SCRIPTS / name, tmp_path / name)
    fields = {"default": 64, "max_epochs": 8} | more
    (tmp_path / "job.yaml").write_text(JOB.format(job=job, target=target, metric=metric, **fields))
    return tmp_path


def katib_yaml(work: Path, collector: str, path: Path, **file_system: str) -> str:
    """A Katib Experiment's metricsCollectorSpec as a Katib user keeps it, in katib.yaml; the option's value."""
    fields = "".join(f"      {key}: {value}\n" for key, value in {"path": path, **file_system}.items())
    (work / "katib.yaml").write_text(
        f"metricsCollectorSpec:\n  collector:\n    kind: {collector}\n  source:\n    fileSystemPath:\n{fields}"
    )
    return "@katib.yaml"


def run(work: Path, *args: str):
    """`zeus-kfp run` as the user types it; 10 minutes only guard against a hang (a 5-recurrence CNN run took
    over 3 minutes at load 10)."""
    return run_cli("run", *args, "--store", "store", "--runs-dir", "runs", "--plots-dir", "plots", cwd=work,
                   COLUMNS="120", timeout=600)  # fmt: skip


def stored(work: Path, job: str) -> pd.DataFrame:
    return open_store(str(work / "store")).trials(job)


def trial_logs(work: Path, job: str) -> list[Path]:
    """Each trial's kept log (the train step's trial_log artifact), in trial order."""
    out = []
    for row in stored(work, job).itertuples():
        (path,) = (work / "runs" / job / row.recurrence_id).glob(f"*/attempt-{row.attempt}-train/trial_log")
        out.append(path)
    return out


def modelled_epochs(batch_size: int, epochs: int, limit_w: float = 250.0) -> tuple[float, float]:
    """(seconds, joules) of `epochs` epochs of a script that reports only epochs, on the simulated GPU: 50,000
    samples an epoch in steps of the batch size (the last one short), at `limit_w`, by the documented model."""
    model = PowerModel()
    full, rest = divmod(50_000, batch_size)
    step_s, step_j = model.step(limit_w, batch_size)
    rest_s, rest_j = model.step(limit_w, rest) if rest else (0.0, 0.0)
    return epochs * (full * step_s + rest_s), epochs * (full * step_j + rest_j)


# -- 1. a collector reads only what its own trial wrote ---------------------------------------------------------


@pytest.mark.slow
def test_a_katib_file_collector_on_an_absolute_path_reads_only_its_own_trials_lines(tmp_path) -> None:
    """Katib's file collector, its path absolute (Katib's default is /var/log/katib/metrics.log): the second
    trial used to read the first one's target value at once and stop after ~10 ms, 'reached'."""
    work = user_dir(tmp_path, "katib_mnist.py", job="katib-mnist")
    log = work / "var" / "log" / "katib" / "metrics.log"
    collector = katib_yaml(work, "File", log, kind="File", format="TEXT")
    command = f"{{python}} katib_mnist.py --batch-size {{batch_size}} --epochs 8 --log-path {log}"
    proc = run(work, "--command", command, "--spec", "job.yaml", "--metrics-collector", collector, "-r", "2")
    assert proc.returncode == 0, proc.stderr
    trials = stored(work, "katib-mnist")
    assert len(trials) == 2 and list(trials["status"]) == ["reached", "reached"]
    assert trials["batch_size"].nunique() == 2  # two batch sizes: two different stories in one file
    for row in trials.itertuples():  # each trial read its own lines: the epochs its batch size needs
        assert row.num_epochs == EPOCHS_TO_093[row.batch_size], row
    first, second = trial_logs(work, "katib-mnist")
    # The second trial moved the first one's file aside, into its own log, and read only its own lines.
    assert (second / "metrics.log.before-trial").read_text() == (first / "collected" / "metrics.log").read_text()
    own = (second / "collected" / "metrics.log").read_text().splitlines()
    assert [line.split()[-2:] for line in own][:2] == [
        ["epoch=1", f"val_acc={1 - 0.5 ** (64 / trials['batch_size'].iloc[1]):.4f}"],
        ["epoch=2", f"val_acc={1 - 0.5 ** (128 / trials['batch_size'].iloc[1]):.4f}"],
    ]
    assert "+99" not in proc.stdout  # no fake, nearly free trial


# -- 2. the early stop prices training, not start-up; 3. logs and model; 6. unprofiled said everywhere ---------


@pytest.mark.slow
def test_a_slow_start_is_never_charged_and_a_script_printing_no_counter_is_profiled(tmp_path) -> None:
    """The script sleeps 1.5 s before training (its dataset loading), longer than any of its epochs; its epochs
    print `train_loss=... val_acc=...`, no counter. Each report of the metric is then the unit of work: every
    trial is profiled (one limit a report, Zeus's sweep from 250 W down on the exact simulated GPU) and charged
    exactly its modelled epochs at the limits it trained at, nothing for the start-up, so no trial is stopped
    for what its start-up cost."""
    work = user_dir(tmp_path, "slow_start.py", job="slow-start")
    command = "{python} slow_start.py --batch-size {batch_size} --out {log_dir}"
    proc = run(work, "--command", command, "--spec", "job.yaml", "-r", "2")  # the second under an early stop
    assert proc.returncode == 0, proc.stderr
    trials = stored(work, "slow-start")
    assert list(trials["recurrence"]) == [1, 2] and pd.isna(trials["cost_threshold"].iloc[0])
    assert trials["cost_threshold"].iloc[1] == pytest.approx(2 * trials["cost"].iloc[0])  # beta 2 x recurrence 1
    assert "cost_exceeded" not in set(trials["status"]) and set(trials["status"]) == {"reached"}
    profiles = open_store(str(work / "store")).profiles("slow-start")
    sweep = [250.0 - 25.0 * k for k in range(7)]  # the simulated V100's limits, from the maximum down
    for row in trials.itertuples():
        epochs = EPOCHS_TO_093[row.batch_size]
        measured = profiles.loc[profiles["trial"] == row.trial, "power_limit_w"].tolist()
        assert measured == sweep[: min(epochs, 7)]  # one limit an epoch: the time between its metric lines
        limits = [*sweep[:epochs], *[row.power_limit_w] * max(0, epochs - 7)]
        seconds = sum(modelled_epochs(row.batch_size, 1, limit)[0] for limit in limits)
        joules = sum(modelled_epochs(row.batch_size, 1, limit)[1] for limit in limits)
        assert (
            row.num_epochs == epochs and row.time_s == pytest.approx(seconds) and row.energy_j == pytest.approx(joules)
        )
        assert "throughput from the metric's reports" in row.reason and "unprofiled" not in row.reason
    assert "unprofiled" not in proc.stdout
    # 3: every trial's log is kept (the script's own output among it) and the model's location is printed.
    for log in trial_logs(work, "slow-start"):
        assert "train_loss=" in (log / "stdout.log").read_text()
        assert json.loads((log / "result.json").read_text())["status"] == "reached"
    models = re.findall(r"^  model \(trial (\d+)\): (\S+)$", proc.stdout, re.M)
    assert [int(t) for t, _ in models] == list(trials["trial"]) and all(Path(m).is_file() for _, m in models)


# -- 5. a script's own failure is told apart from a miss ---------------------------------------------------------


@pytest.mark.slow
def test_a_script_that_fails_is_not_retried_and_the_run_says_why_with_its_own_last_lines(tmp_path) -> None:
    work = user_dir(tmp_path, "crash_at_start.py", job="crashing")
    # The data file is not there yet (a relative path to an existing file is made absolute: README).
    command = "{python} crash_at_start.py --batch-size {batch_size} --data data/train.csv"
    proc = run(work, "--command", command, "--spec", "job.yaml", "-r", "3")
    assert proc.returncode == 1
    trials = stored(work, "crashing")
    # One trial: no other batch size tried (it would fail the same way), no second recurrence run.
    assert list(zip(trials["batch_size"], trials["status"], strict=True)) == [(64, "failed")]
    assert "the script exited with code 1" in proc.stderr
    assert "the script's last lines (stderr.log):" in proc.stderr
    assert "  | FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: trial 1 (recurrence 1, batch size 64) failed")
    assert "recurrence 2" not in proc.stdout
    # Fixed, it runs again from the default batch size: the bandit forgot the failure (and nothing is in flight).
    (work / "data").mkdir()
    (work / "data" / "train.csv").write_text("x,y\n")
    fixed = run(work, "--command", command, "--spec", "job.yaml", "-r", "1")
    assert fixed.returncode == 0, fixed.stderr
    assert list(stored(work, "crashing")["batch_size"]) == [64, 64]
    assert list(stored(work, "crashing")["status"]) == ["failed", "reached"]


@pytest.mark.slow
def test_a_target_no_trial_reaches_is_a_miss_retried_and_the_run_fails(tmp_path) -> None:
    work = user_dir(tmp_path, "slow_start.py", job="too-high", target=1.0)  # the stand-in stays below 1
    command = "{python} slow_start.py --batch-size {batch_size}"
    proc = run(work, "--command", command, "--spec", "job.yaml", "--max-epochs", "2", "--attempts", "2", "-r", "1")
    assert proc.returncode == 1
    trials = stored(work, "too-high")
    assert list(trials["status"]) == ["not_reached", "not_reached"]  # a miss: the next attempt tried another size
    assert trials["batch_size"].nunique() == 2
    best = max(1 - 0.5 ** (2 * 64 / b) for b in trials["batch_size"])
    assert f"no recurrence of this run reached the target val_acc >= 1: the best val_acc seen was {best:.4g}" in (
        proc.stderr
    )


# -- 8. Katib's collector cases, end to end ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_json_metrics_file_with_a_broken_line_fails_the_trial_naming_the_line(tmp_path) -> None:
    """Katib's file collector fails a JSON file at a line that is not JSON (errParseJson); so does this one."""
    work = user_dir(tmp_path, "json_metrics.py", job="json-metrics")
    collector = '{"kind": "file", "source": {"fileSystemPath": {"path": "metrics.json", "format": "json"}}}'
    command = "{python} json_metrics.py --batch-size {batch_size} --metrics metrics.json"
    proc = run(work, "--command", command, "--spec", "job.yaml", "--metrics-collector", collector, "-r", "2")
    assert proc.returncode == 1
    (reason,) = stored(work, "json-metrics")["reason"]
    assert 'line 2 is not a JSON object: \'{"epoch": 2, "val_acc": 0.75\' (format json)' in reason
    assert "metrics.json, json): line 2 is not a JSON object" in proc.stderr


@pytest.mark.slow
def test_tensorboard_subdirectories_name_the_metric_as_katib_does(tmp_path) -> None:
    """A writer per phase (train/, validation/), each with a scalar `accuracy`: the job's `validation/accuracy` is
    the validation writer's (Katib's "{{dirname}}/{{metric name}}"), not the training accuracy that runs ahead."""
    work = user_dir(tmp_path, "tb_subdirs.py", job="tb-subdirs", metric="validation/accuracy")
    collector = '{"collector": {"kind": "TensorFlowEvent"}, "source": {"fileSystemPath": {"path": "{log_dir}/tb"}}}'
    command = "{python} tb_subdirs.py --batch-size {batch_size} --logdir {log_dir}/tb"
    proc = run(work, "--command", command, "--spec", "job.yaml", "--metrics-collector", collector, "-r", "1")
    assert proc.returncode == 0, proc.stderr
    (row,) = stored(work, "tb-subdirs").itertuples()
    assert (row.status, row.batch_size, row.num_epochs) == ("reached", 64, EPOCHS_TO_093[64])
    assert row.metric == pytest.approx(0.9375)


# -- 4. a step that fails records its trial failed and ends the recurrence ---------------------------------------


@pytest.mark.slow
def test_a_train_step_that_dies_leaves_no_trial_dispatched(tmp_path) -> None:
    """The train step is killed outright (the script stands in for the kernel's OOM killer, which takes the
    step's process): the run records the trial failed with the step's error, ends, and the next run starts from
    the default batch size instead of skipping it as in flight for a day."""
    work = user_dir(tmp_path, "katib_mnist.py", job="killed-step")
    (work / "oom_killer.py").write_text(
        "import os, signal\nprint('epoch=1 val_acc=0.5', flush=True)\nos.kill(os.getppid(), signal.SIGKILL)\n"
    )
    proc = run(work, "--command", "{python} oom_killer.py --batch-size {batch_size}", "--spec", "job.yaml", "-r", "2")
    assert proc.returncode == 1 and "the attempt-1-train step failed" in proc.stderr
    (row,) = stored(work, "killed-step").itertuples()
    assert (row.status, row.batch_size) == ("failed", 64) and "the attempt-1-train step failed" in row.reason
    listed = run_cli("jobs", "--store", "store", "--json", cwd=work)
    assert json.loads(listed.stdout)["jobs"][0]["phase"] == "completed"
    fixed = f"{{python}} katib_mnist.py --batch-size {{batch_size}} --log-path {work / 'metrics.log'}"
    collector = json.dumps({"kind": "file", "source": {"fileSystemPath": {"path": str(work / "metrics.log")}}})
    again = run(work, "--command", fixed, "--spec", "job.yaml", "--metrics-collector", collector, "-r", "1")
    assert again.returncode == 0, again.stderr
    assert list(stored(work, "killed-step")["batch_size"]) == [64, 64]


# -- a script people write, saving against the default configuration ---------------------------------------------


@pytest.mark.slow
def test_a_tensorboard_cnn_script_saves_against_the_default_configuration_in_3_recurrences(tmp_path) -> None:
    """tb_cnn.py is written as PyTorch's tutorials write one (argparse, a DataLoader, SummaryWriter, the best
    model saved), its events read by Katib's TensorFlowEvent collector at an absolute path, as a Katib user
    gives it. Its start-up (importing torch, making the data) is never charged: each trial costs at most its
    reported training steps at the slowest power limit. Over 3 recurrences the bandit leaves the default batch
    size (16) for a cheaper one and the last recurrence saves against the default configuration."""
    work = user_dir(tmp_path, "tb_cnn.py", job="tb-cnn", target=0.84, metric="accuracy", default=16, max_epochs=6)
    events = work / "var" / "log" / "katib" / "tfevent"
    collector = katib_yaml(work, "TensorFlowEvent", events, kind="Directory")
    command = f"{{python}} tb_cnn.py --batch-size {{batch_size}} --epochs 6 --logdir {events} --model-dir {{log_dir}}"
    proc = run(work, "--command", command, "--spec", "job.yaml", "--metrics-collector", collector, "-r", "3")
    assert proc.returncode == 0, proc.stderr
    trials = stored(tmp_path, "tb-cnn")
    assert trials["recurrence"].nunique() == 3 and trials["recurrence"].iloc[0] == 1
    assert trials["batch_size"].iloc[0] == 16 and set(trials["batch_size"]) > {16}  # it explored
    slowest = PowerModel()
    for row in trials.itertuples():  # training only: (its epochs + 1) x its steps an epoch, each at 100 W at worst
        steps = (row.num_epochs + 1) * -(-384 // row.batch_size)
        assert 0 < row.time_s <= steps * slowest.step(100.0, row.batch_size)[0], row
    assert "cost_exceeded" not in set(trials["status"])
    last = re.search(r"^saving vs the default config: recurrence 3 ([+-]\d+\.\d)%; cumulative", proc.stdout, re.M)
    assert last is not None and float(last.group(1)) > 0, proc.stdout
    shown = json.loads(run_cli("show", "tb-cnn", "--store", "store", "--json", cwd=tmp_path).stdout)
    baseline = shown["default_config_cost"]["cost"]
    last_shown = next(r for r in shown["recurrences"] if r["recurrence"] == 3)
    assert f"{1 - last_shown['cost'] / baseline:+.1%}" == f"{float(last.group(1)):+.1f}%"  # `show` says the same saving
    # The model of the trial that reached, where `run` said it is, loads as the script saved it.
    models = re.findall(r"^  model \(trial \d+\): (\S+)$", proc.stdout, re.M)
    assert len(models) == 3
    import torch

    assert set(torch.load(models[-1], weights_only=True)) == {"0.weight", "0.bias", "3.weight", "3.bias"}
