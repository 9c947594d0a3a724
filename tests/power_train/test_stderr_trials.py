"""A plain script's metrics where Python's `logging` puts them, on stderr, through run_trial.

The stdOut collector reads both streams (as Katib's StdOut collector and `kubectl logs` see a container);
each stream's log file stays its own. Whole trials on the simulated GPU, real subprocesses.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.power_train.scripts import write_script
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.train import run_trial

SPEC = JobSpec(
    job_id="stderr-test",
    batch_sizes=(8, 16),
    default_batch_size=8,
    target_metric=0.9,
    max_epochs=8,
    metric_name="val_acc",
)
LOGGED = """
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")  # stderr
log = logging.getLogger("train")
log.info("loading data, batch size 8")
for epoch in range(1, 1000):  # runs on past the target: the runner must stop it
    for step in range((epoch - 1) * 40 + 10, epoch * 40 + 1, 10):
        log.info("step=%d loss=%.3f", step, 1 / step)
    log.info("epoch %d val_acc=%.4f", epoch, 1 - 0.5 ** epoch)
"""


def plain_trial(tmp_path: Path, body: str, pattern: str, **kw):
    return run_trial(
        SPEC,
        batch_size=8,
        cost_threshold=None,
        command=write_script(tmp_path, "train.py", body),
        work_dir=tmp_path / "work",
        zeus_aware=False,
        gpu="simulated",
        metric_patterns=[pattern],
        warmup_iters=1,
        profile_iters=2,
        timeout_s=120,
        **kw,
    )


def profiling(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "work" / "logs" / "result.json").read_text())["profiling"]


def test_a_metric_logged_to_stderr_reaches_its_target_and_its_step_counter_profiles(tmp_path):
    out = plain_trial(tmp_path, LOGGED, r"(val_acc)=([0-9.]+)")
    assert out.result.status is TrialStatus.REACHED, out.log_tail
    assert (out.result.num_epochs, out.result.metric) == (4, 0.9375)  # 1 - 0.5 ** 4, the first >= 0.9
    assert profiling(tmp_path)["progress"] == "step"  # `step=N` on the logging lines, outside the pattern
    assert "step counter, 8 samples a step" in out.result.reason
    assert (tmp_path / "work" / "stdout.log").read_text() == ""
    assert "INFO epoch 1 val_acc=0.5000" in (tmp_path / "work" / "stderr.log").read_text()


def test_no_counter_is_guessed_from_numbers_that_are_not_named_as_one(tmp_path):
    body = """
    import logging
    logging.basicConfig(level=logging.INFO)  # stderr, `INFO:train:...`
    log = logging.getLogger("train")
    for n in range(1, 1000):
        log.info("batch %d/40 took 12 ms, 3 steps per batch", n)
        log.info("round %d: val_acc=%.4f", n, 1 - 0.5 ** n)
    """
    out = plain_trial(tmp_path, body, r"(val_acc)=([0-9.]+)")
    assert out.result.status is TrialStatus.REACHED, out.log_tail
    assert (out.result.num_epochs, out.result.metric) == (4, 0.9375)
    assert profiling(tmp_path)["progress"] not in ("step", "epoch")  # no number here is named as a counter


def test_a_plain_scripts_unflushed_prints_arrive_as_it_prints_them(tmp_path, monkeypatch):
    """A print to a pipe waits in Python's 8 KiB buffer unless the script flushes; the runner runs a plain
    script unbuffered, so the target line arrives while the script still runs (it would sleep on)."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    body = """
    import time
    print("epoch=1 val_acc=0.95")  # no flush
    time.sleep(600)
    """
    out = plain_trial(tmp_path, body, r"(val_acc)=([0-9.]+)")
    assert out.result.status is TrialStatus.REACHED, out.result.reason  # not "timed out after 120 s"
    assert out.result.metric == 0.95
