"""A local run stopped by Ctrl-C or killed outright, then run again: the trial it held is recorded
failed with its reason, the job is not left `running`, and nothing else in the store changed.

Real processes throughout: the `zeus-kfp` console script in its own process group, kfp.local's step
subprocesses, and a plain training script (below) that reaches the target at its first epoch, except
on its Nth start, when it writes its pid and waits to be killed. The test signals only once that pid
file exists, i.e. once the trial is dispatched and training: the kill lands in the same place every
time, whatever the machine's load. (A trace-backed trial finishes in milliseconds, so it offers no such
moment; a held script is what a long real trial looks like.)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import textwrap

import pandas as pd
import psutil
import pytest

from ux.cli_process import run_cli, start_cli, wait_for
from zeus_kfp.power import PowerModel
from zeus_kfp.store import open_store

HOLDING_SCRIPT = textwrap.dedent(
    """
    import argparse, os, pathlib, time
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--hold-on", type=int, required=True)
    args = parser.parse_args()
    here = pathlib.Path(__file__).parent
    count = here / "starts"
    starts = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(starts))
    if starts == args.hold_on:
        print("epoch=1 accuracy=0.5", flush=True)  # one epoch of work below the target, then it holds
        (here / "held.pid").write_text(str(os.getpid()))
        while True:
            time.sleep(0.2)
    print(f"epoch=1 accuracy=0.95 batch={args.batch_size}", flush=True)
    """
)
# No early stop (beta_knob null): the held trial's cost grows with the wall clock, and a cost threshold
# would end it by itself, sooner or later depending on the machine's load.
JOB = {
    "job_id": "held-job",
    "batch_sizes": [16, 32, 64],
    "default_batch_size": 32,
    "target_metric": 0.9,
    "max_epochs": 3,
    "beta_knob": None,
}


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "train.py").write_text(HOLDING_SCRIPT)
    (tmp_path / "job.json").write_text(json.dumps(JOB))
    return tmp_path


def run_args(hold_on: int, recurrences: int, *extra: str) -> list[str]:
    command = f"{{python}} train.py --batch-size {{batch_size}} --hold-on {hold_on}"
    return ["run", "--command", command, "--spec", "job.json", "-r", str(recurrences), "--store", "store",
            "--runs-dir", "runs", "--plots-dir", "plots", *extra]  # fmt: skip


def trials(workdir) -> pd.DataFrame:
    return open_store(str(workdir / "store")).trials(JOB["job_id"]).set_index("trial")


def phase(workdir) -> str:
    jobs = open_store(str(workdir / "store")).list_jobs()
    return str(jobs.set_index("job_id").loc[JOB["job_id"], "phase"])


def start_and_hold(workdir):
    """Run 2 recurrences; the second one's first trial holds. Returns (process, held pid, store before)."""
    proc = start_cli(*run_args(2, 2), cwd=workdir, stdout=workdir / "out.txt", stderr=workdir / "err.txt")
    held = wait_for(lambda: (workdir / "held.pid").exists() and (workdir / "held.pid").read_text(), "the held trial")
    before = trials(workdir)
    assert list(before["status"]) == ["reached", "dispatched"], before  # recurrence 1 done, recurrence 2 in flight
    return proc, int(held), before


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def group_runs(group: int) -> bool:
    """Whether a process of `group` is still running (SIGKILL is delivered at once, acted on a moment later)."""
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == group and not gone(process.pid):
                return True
        except OSError:  # it ended meanwhile
            continue
    return False


def assert_only_the_held_trial_changed(before: pd.DataFrame, after: pd.DataFrame, held_trial: int) -> None:
    finished_before = before.drop(index=held_trial)
    pd.testing.assert_frame_equal(after.loc[finished_before.index], finished_before)
    assert after.loc[held_trial, "batch_size"] == before.loc[held_trial, "batch_size"]
    assert after.loc[held_trial, "recurrence_id"] == before.loc[held_trial, "recurrence_id"]


@pytest.mark.slow
def test_ctrl_c_records_the_trial_in_flight_as_failed_and_the_next_run_goes_on(workdir) -> None:
    proc, held_pid, before = start_and_hold(workdir)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
    assert proc.wait(timeout=120) == 130
    out, err = (workdir / "out.txt").read_text(), (workdir / "err.txt").read_text()
    assert "Traceback" not in out + err
    (line,) = err.splitlines()
    held_trial = int(before.index[-1])
    assert (
        f"trial {held_trial} (recurrence 2, attempt 1" in line and "recorded as failed: interrupted by SIGINT" in line
    )
    assert wait_for(lambda: gone(held_pid), "the training script to be stopped")  # it runs in its own session
    after = trials(workdir)
    assert after.loc[held_trial, "status"] == "failed"
    assert after.loc[held_trial, "reason"].startswith("interrupted by SIGINT")
    # What it spent up to the stop is measured and recorded (the train step's own record): the epoch it reported,
    # on the simulated GPU's model clock, at the limit its profiler had set (the maximum: the first window)
    seconds, joules = modelled_epoch(int(before.loc[held_trial, "batch_size"]), 250.0)
    assert after.loc[held_trial, "energy_j"] == pytest.approx(joules)
    assert after.loc[held_trial, "time_s"] == pytest.approx(seconds)
    assert after.loc[held_trial, "source"] == "simulated (GPU model)"
    assert_only_the_held_trial_changed(before, after, held_trial)
    assert phase(workdir) == "completed"  # not stuck "running"

    again = run_cli(*run_args(0, 1), cwd=workdir)
    assert again.returncode == 0, again.stderr
    final = trials(workdir)
    assert list(final["status"]) == ["reached", "failed", "reached"]
    assert final.loc[held_trial, "reason"].startswith("interrupted by SIGINT")
    assert phase(workdir) == "completed"
    shown = run_cli("show", JOB["job_id"], "--store", "store", cwd=workdir, COLUMNS="100")
    assert "recurrence 2 attempt 1 failed: interrupted by SIGINT" in shown.stdout
    held_cost = float(final.loc[held_trial, "cost"])
    assert held_cost > 0 and f"{held_cost:,.0f} J" in shown.stdout  # in the failed totals, as any failed trial


def modelled_epoch(batch_size: int, limit_w: float) -> tuple[float, float]:
    """(seconds, joules) of one epoch of a script that reports only epochs, on the simulated GPU: 50,000 samples in
    steps of the batch size (the last one short), at `limit_w`, by the documented model."""
    model = PowerModel()
    full, rest = divmod(50_000, batch_size)
    step_s, step_j = model.step(limit_w, batch_size)
    rest_s, rest_j = model.step(limit_w, rest) if rest else (0.0, 0.0)
    return full * step_s + rest_s, full * step_j + rest_j


def kill_outright(workdir):
    """Start a run, hold its second recurrence's trial, then SIGKILL the run's group and the held script (its own
    session): no handler runs. Returns (the run's pid, the held trial's number, the store before)."""
    proc, held_pid, before = start_and_hold(workdir)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    os.kill(held_pid, signal.SIGKILL)
    assert wait_for(lambda: not group_runs(proc.pid), "the killed group's step processes to die")
    held_trial = int(before.index[-1])
    assert trials(workdir).loc[held_trial, "status"] == "dispatched" and phase(workdir) == "running"
    return proc.pid, held_trial, before


@pytest.mark.slow
def test_a_killed_run_is_ended_by_the_next_run_on_its_machine_which_goes_on(workdir) -> None:
    killed_pid, held_trial, before = kill_outright(workdir)

    again = run_cli(*run_args(0, 1), cwd=workdir)  # the default dispatch timeout (a day) and cap (1)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stdout + again.stderr
    final = trials(workdir)
    reason = f"its local run (pid {killed_pid} on {socket.gethostname()}) was killed"
    assert final.loc[held_trial, "status"] == "failed" and final.loc[held_trial, "reason"] == reason
    assert reason in again.stderr  # said once, as it was recorded
    assert list(final["status"]) == ["reached", "failed", "reached"]  # recurrence 3 was not skipped
    assert_only_the_held_trial_changed(before, final.drop(index=final.index[-1]), held_trial)
    assert phase(workdir) == "completed"


@pytest.mark.slow
def test_a_run_killed_on_another_machine_holds_its_slot_until_the_dispatch_timeout(workdir) -> None:
    # Another machine sharing the store has its own runs dir: it cannot see whether the killed run lives.
    _, held_trial, before = kill_outright(workdir)
    elsewhere = run_args(0, 1, "--runs-dir", "runs-elsewhere")
    skipped = run_cli(*elsewhere, cwd=workdir)
    assert skipped.returncode == 0, skipped.stderr
    assert "no free slot" in skipped.stdout and trials(workdir).loc[held_trial, "status"] == "dispatched"

    again = run_cli(*elsewhere, "--dispatch-timeout", "0", cwd=workdir)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stdout + again.stderr
    final = trials(workdir)
    reason = final.loc[held_trial, "reason"]
    assert final.loc[held_trial, "status"] == "failed"
    assert reason.startswith("no result ") and "(dispatch_timeout_s=0): its process was killed or lost" in reason
    # The progress line says so: this run's count, the job's recurrence (3), then what the bandit step recorded.
    assert f"[1/1] recurrence 3: trial {held_trial} (recurrence 2, attempt 1" in again.stdout
    assert list(final["status"]) == ["reached", "failed", "reached"]
    assert_only_the_held_trial_changed(before, final.drop(index=final.index[-1]), held_trial)
    assert phase(workdir) == "completed"
