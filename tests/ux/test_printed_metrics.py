"""Scripts that print their metrics the way real tools print them, each read with the simplest pattern a user
writes (two groups, name and value), are power-profiled: the progress counter is read wherever the tool puts it.

tests/ux/user_scripts/: Keras's `model.fit(verbose=2)` (the epoch on a line of its own, the metrics on the
next), Python's `logging` with its default format (to stderr), HuggingFace's Trainer (Python dict lines with a
fractional epoch) and a hand-rolled loop (`Epoch 1: train_loss=1.000 val_acc=0.4500`). Each runs as a plain
script through run_trial on the simulated GPU; training stands in as a formula, metric = 1 - 0.5 ** (epoch * 64
/ batch size), so at batch size 64 the metric is 0.5, 0.75, 0.875, 0.9375 and the target 0.93 is reached at the
fourth evaluation, by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.train import run_trial
from zeus_kfp.train.collectors import StdoutCollector
from zeus_kfp.train.metrics import compile_patterns
from zeus_kfp.train.process import CapturedProcess

SCRIPTS = Path(__file__).parent / "user_scripts"
HANG_S = 60.0  # only a hung script makes a test wait this long


# (script, the job's metric, the user's pattern, the counter the trial is profiled on)
IDIOMS = {
    "keras_fit.py": ("val_accuracy", r"(val_accuracy): ([0-9.]+)", "epoch"),
    "logging_stderr.py": ("val_acc", r"(val_acc)=([0-9.]+)", "step"),
    "hf_trainer.py": ("eval_accuracy", r"'(eval_accuracy)': ([0-9.]+)", "epoch"),
    "hand_loop.py": ("val_acc", r"(val_acc)=([0-9.]+)", "epoch"),
}


def spec(metric: str) -> JobSpec:
    return JobSpec(
        job_id="printed", batch_sizes=(16, 32, 64, 128), default_batch_size=64, target_metric=0.93, max_epochs=8,
        metric_name=metric,
    )  # fmt: skip


@pytest.mark.parametrize("script", list(IDIOMS))
def test_each_idiom_reaches_its_target_profiled_on_the_counter_it_prints(script, tmp_path):
    metric, pattern, counter = IDIOMS[script]
    out = run_trial(
        spec(metric),
        batch_size=64,
        cost_threshold=None,
        command=[sys.executable, str(SCRIPTS / script), "--batch-size", "{batch_size}"],
        work_dir=tmp_path / "work",
        zeus_aware=False,
        gpu="simulated",
        metric_patterns=[pattern],
        timeout_s=120,
    )
    assert out.result.status is TrialStatus.REACHED, out.result.reason
    result = json.loads((tmp_path / "work" / "logs" / "result.json").read_text())
    assert result["metrics"] == [0.5, 0.75, 0.875, 0.9375]
    assert result["profiling"]["progress"] == counter
    assert "unprofiled" not in out.result.reason


def observed(tmp_path: Path, script: str, pattern: str) -> list[tuple]:
    """What the stdOut collector reads of `script` at batch size 64 over two epochs (stdout and stderr)."""
    collector = StdoutCollector(compile_patterns([pattern]))
    command = [sys.executable, str(SCRIPTS / script), "--batch-size", "64", "--epochs", "2"]
    proc = CapturedProcess(command, cwd=tmp_path, env={}, on_line=collector.feed)
    assert proc.wait(HANG_S) == 0, proc.tail_text()
    proc.join_output()
    return [o.key() for o in collector.finish()]


def test_keras_epoch_line_carries_to_the_metrics_line_after_it(tmp_path):
    assert observed(tmp_path, "keras_fit.py", IDIOMS["keras_fit.py"][1]) == [
        ("epoch", 1.0, 1, None), ("val_accuracy", 0.5, 1, None),
        ("epoch", 2.0, 2, None), ("val_accuracy", 0.75, 2, None),
    ]  # fmt: skip


def test_logging_lines_on_stderr_carry_their_step_and_epoch(tmp_path):
    got = observed(tmp_path, "logging_stderr.py", IDIOMS["logging_stderr.py"][1])
    # 782 steps an epoch at batch size 64, the loss logged every 100: the last step logged before each evaluation
    # is 700, then 1500; 15 step lines in 1564 steps.
    assert [k for k in got if k[0] == "val_acc"] == [("val_acc", 0.5, 1, 700), ("val_acc", 0.75, 2, 1500)]
    assert [k[3] for k in got if k[0] == "step"] == list(range(100, 1501, 100))


def test_huggingface_dict_lines_carry_fractional_epochs(tmp_path):
    # logging_steps=500 of 782 steps an epoch: epochs 0.64, 1.28, 1.92; the final summary's epoch 2.0 is no news.
    assert observed(tmp_path, "hf_trainer.py", IDIOMS["hf_trainer.py"][1]) == [
        ("epoch", 0.64, 0.64, None), ("eval_accuracy", 0.5, 1, None),
        ("epoch", 1.28, 1.28, None), ("epoch", 1.92, 1.92, None), ("eval_accuracy", 0.75, 2, None),
    ]  # fmt: skip


def test_a_hand_rolled_loops_epoch_is_read_outside_the_pattern(tmp_path):
    assert observed(tmp_path, "hand_loop.py", IDIOMS["hand_loop.py"][1]) == [
        ("val_acc", 0.5, 1, None),
        ("val_acc", 0.75, 2, None),
    ]


def charged(tmp_path: Path, name: str, command: list[str], metric: str, **collect) -> float:
    """The energy a plain trial of `command` at batch size 64 is charged on the simulated GPU (model clock)."""
    out = run_trial(spec(metric), batch_size=64, cost_threshold=None, command=command, work_dir=tmp_path / name,
                    zeus_aware=False, gpu="simulated", timeout_s=120, **collect)  # fmt: skip
    assert out.result.status is TrialStatus.REACHED and out.result.num_epochs == 4, out.result.reason
    return out.result.energy_j


def test_the_same_training_is_charged_alike_however_it_is_printed(tmp_path):
    """Four epochs of the same work (50,000 samples each): whether the script prints as Keras, logging, HuggingFace's
    Trainer or a hand-rolled loop, or logs its accuracy to TensorBoard at the epoch index or at the global step,
    the simulated GPU charges it within 10 % of the same figure: the counters name the same work, and a
    TensorBoard metric logged at the epoch index is read as epochs, never as that many steps."""
    energies = {
        script: charged(
            tmp_path,
            script,
            [sys.executable, str(SCRIPTS / script), "--batch-size", "{batch_size}"],
            metric,
            metric_patterns=[pattern],
        )
        for script, (metric, pattern, _) in IDIOMS.items()
    }
    for at in ("epoch", "global"):
        command = [sys.executable, str(SCRIPTS / "tb_axes.py"), "--batch-size", "{batch_size}", "--logdir",
                   "{log_dir}/tb", "--at", at]  # fmt: skip
        tfevent = {"kind": "tfEvent", "source": {"fileSystemPath": {"path": "{log_dir}/tb"}}}
        energies[f"tensorboard at the {at}"] = charged(tmp_path, f"tb-{at}", command, "Accuracy/val", collector=tfevent)
    print("charged (J, simulated GPU):", json.dumps({k: round(v, 1) for k, v in energies.items()}))  # pytest -s
    low, high = min(energies.values()), max(energies.values())
    assert high <= 1.10 * low, energies
