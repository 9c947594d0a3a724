"""run_trial with real subprocesses: stop rules, kill escalation, oom and failure paths, hostile output."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from zeus_kfp.job import JobSpec, JobSpecError, TrialStatus
from zeus_kfp.power import PowerModel
from zeus_kfp.train import run_trial

SPEC = JobSpec(
    job_id="runner-test",
    batch_sizes=(8, 16),
    default_batch_size=8,
    target_metric=0.9,
    max_epochs=4,
    max_power_w=250.0,
)


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def plain(tmp_path: Path, body: str, **kw):
    kw.setdefault("cost_threshold", None)
    return run_trial(
        SPEC,
        batch_size=8,
        command=script(tmp_path, body),
        work_dir=tmp_path / "work",
        zeus_aware=False,
        gpu="simulated",
        **kw,
    )


def test_reaching_the_target_stops_a_script_that_would_run_on(tmp_path):
    started = time.monotonic()
    out = plain(
        tmp_path,
        """
        import time
        for i, acc in enumerate([0.5, 0.7, 0.95] + [0.2] * 1000):
            print(f"epoch={i+1} loss=0.3 accuracy={acc}", flush=True)
            time.sleep(0.05)
        """,
    )
    assert out.result.status is TrialStatus.REACHED
    assert (out.result.num_epochs, out.result.metric) == (3, 0.95)
    # An epoch counter and no step counter, on the simulated GPU: from the first report on the model clock,
    # each reported epoch charged as 50,000 samples in steps of 8 (zeus_kfp.power.simulated), one power limit an
    # epoch (250, 225, 200 W): the figures are the model's, whatever the machine's load.
    assert out.result.simulated and out.result.source == "simulated (GPU model)"
    model, steps = PowerModel(), 50_000 // 8
    epochs = [model.step(limit, 8) for limit in (250.0, 225.0, 200.0)]
    assert out.result.time_s == pytest.approx(steps * sum(t for t, _ in epochs))
    assert out.result.energy_j == pytest.approx(steps * sum(e for _, e in epochs))
    # Zeus's cost at eta 0.5 and 250 W, worked out: 0.5 E + 0.5 x 250 W x t.
    assert out.result.cost == pytest.approx(0.5 * out.result.energy_j + 125.0 * out.result.time_s)
    # The script would print for 50 s more: it was stopped once the target was reached (the bound is
    # loose on purpose: CI runs at load 10-25, and the outcome must not hang on timing).
    assert time.monotonic() - started < 40
    assert out.profile.rows["power_limit_w"].tolist() == [250.0, 225.0, 200.0]
    assert "throughput from metric progress (epoch counter" in out.result.reason
    assert "ended while profiling: chose among 3 of 7 limits" in out.result.reason


def test_max_epochs_without_the_target_is_not_reached_and_the_script_is_stopped(tmp_path):
    out = plain(
        tmp_path,
        """
        import itertools, time
        for i in itertools.count():
            print(f"accuracy = {0.1 + i * 0.01}", flush=True)
            time.sleep(0.02)
        """,
    )
    assert out.result.status is TrialStatus.NOT_REACHED
    assert out.result.num_epochs == SPEC.max_epochs
    # no counter: profiled all the same, one limit per report of the metric (the simulated V100's sweep from 250 W)
    assert out.profile.rows["power_limit_w"].tolist()[:3] == [250.0, 225.0, 200.0]
    assert "throughput from the metric's reports" in out.result.reason and "unprofiled" not in out.result.reason


def test_cost_threshold_stops_the_script_and_sigkill_follows_an_ignored_sigterm(tmp_path):
    started = time.monotonic()
    out = plain(
        tmp_path,
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("accuracy=0.1", flush=True)  # an evaluation without a counter: one modelled epoch (6,250 steps of 8)
        while True:
            time.sleep(0.01)
        """,
        cost_threshold=100.0,  # the modelled epoch costs far more (over 6 s at 250 W): stop before epoch 2
        term_grace_s=0.5,
    )
    assert out.result.status is TrialStatus.COST_EXCEEDED
    assert out.result.cost > 100.0 and "stopped before epoch 2: predicted cost" in out.result.reason
    assert time.monotonic() - started < 40  # ignoring SIGTERM did not keep it running: killed after the grace


def test_cuda_oom_text_is_status_oom(tmp_path):
    out = plain(tmp_path, 'raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")')
    assert out.result.status is TrialStatus.OOM


def test_death_by_sigkill_we_did_not_send_is_host_oom(tmp_path):
    out = plain(tmp_path, "import os, signal\nprint('accuracy=0.1', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)")
    assert out.result.status is TrialStatus.OOM


def test_a_crash_is_failed_with_the_stderr_tail(tmp_path):
    out = plain(tmp_path, "print('accuracy=0.2')\nraise ValueError('the data file is corrupt')")
    assert out.result.status is TrialStatus.FAILED
    assert "the data file is corrupt" in out.result.reason
    assert "ValueError" in out.log_tail


def test_a_missing_program_is_failed_not_an_exception(tmp_path):
    out = run_trial(
        SPEC,
        batch_size=8,
        cost_threshold=None,
        command=["/nonexistent/train"],
        work_dir=tmp_path,
        zeus_aware=False,
        gpu="simulated",
    )
    assert out.result.status is TrialStatus.FAILED and "could not start" in out.result.reason


def test_hostile_output_cannot_break_the_parser(tmp_path):
    out = plain(
        tmp_path,
        r"""
        import sys
        out = sys.stdout.buffer
        out.write(b"\xff\xfe\x00binary\x80 accuracy=\n")
        out.write(b"accuracy=+ accuracy=. accuracy=1e999999 accuracy=nan\n")
        out.write(b"x" * 2_000_000 + b"\n")
        out.write(b"accuracy=0.3\r\n")
        out.write(b"{not json accuracy=0.5e0 }\n")
        out.write(b"final accuracy=0.95 partial")
        out.flush()
        """,
    )
    assert out.result.status is TrialStatus.REACHED
    assert out.result.num_epochs == 3 and out.result.metric == 0.95


def test_user_pattern_and_placeholders(tmp_path):
    out = run_trial(
        SPEC.with_changes(metric_name="acc"),
        batch_size=16,
        cost_threshold=None,
        command=[*script(tmp_path, 'import sys\nprint(f"bs={sys.argv[1]}")\nprint("val acc: 0.91")'), "{batch_size}"],
        work_dir=tmp_path / "w",
        zeus_aware=False,
        gpu="simulated",
        metric_patterns=[r"val (acc): ([0-9.]+)"],
    )
    assert out.result.status is TrialStatus.REACHED and out.result.metric == 0.91
    assert "bs=16" in out.log_tail


def test_metrics_from_a_json_lines_file(tmp_path):
    out = plain(
        tmp_path,
        """
        import json, time
        with open("metrics.jsonl", "a") as fh:
            for acc in (0.4, 0.6):
                fh.write(json.dumps({"epoch": 1, "accuracy": acc}) + "\\n"); fh.flush(); time.sleep(0.05)
            fh.write("\\n" + json.dumps({"accuracy": "high"}) + "\\n")  # an empty line, a value that is no number
            fh.write(json.dumps({"accuracy": 0.97}) + "\\n")
        print("accuracy=0.1")  # stdout is ignored when a metrics file is given
        """,
        metrics_file="metrics.jsonl",
    )
    assert out.result.status is TrialStatus.REACHED
    assert (out.result.num_epochs, out.result.metric) == (3, 0.97)


def test_exit_without_metrics_is_failed_and_bad_arguments_name_the_field(tmp_path):
    assert plain(tmp_path, "print('hello')").result.status is TrialStatus.FAILED
    with pytest.raises(JobSpecError, match="batch_size"):
        run_trial(SPEC, batch_size=7, cost_threshold=None, command=["true"], work_dir=tmp_path)
    with pytest.raises(JobSpecError, match="command"):
        run_trial(SPEC, batch_size=8, cost_threshold=None, command="python train.py", work_dir=tmp_path)
    with pytest.raises(ValueError, match="gpu"):
        run_trial(SPEC, batch_size=8, cost_threshold=None, command=["true"], work_dir=tmp_path, gpu="tpu")


def test_timeout_stops_a_hung_script(tmp_path):
    out = plain(tmp_path, "import time\nprint('accuracy=0.1', flush=True)\ntime.sleep(60)", timeout_s=0.5)
    assert out.result.status is TrialStatus.FAILED and "timed out" in out.result.reason
    assert out.result.num_epochs == 1
