"""Trials nobody will finish (zeus_kfp.steps.abandoned), against a real local store and the real policies:
the bandit step records a trial unfinished past dispatch_timeout_s as failed, never the one it is
deciding, and the policies then forget it exactly as they forget a script that crashed.

Time is handed in (`now`), taken from the store's own dispatch timestamp: no test waits on the clock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec, TrialResult, TrialStatus
from zeus_kfp.policy import POLICY_NAMES, get_policy
from zeus_kfp.policy.base import Decision
from zeus_kfp.signals import Interrupted, interruptible
from zeus_kfp.steps import DEFAULT_DISPATCH_TIMEOUT_S, fail_interrupted
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.store import open_store

SPEC = JobSpec(job_id="lost-job", batch_sizes=(8, 16, 32, 64), default_batch_size=16, target_metric=0.9, max_epochs=4)


@pytest.fixture
def store(tmp_path):
    store = open_store(str(tmp_path / "store"))
    store.ensure_job(SPEC)
    return store


def _dispatch(store, recurrence_id: str, attempt: int, batch_size: int) -> int:
    store.begin_recurrence(SPEC.job_id, recurrence_id)
    decision = Decision(batch_size, None, "exploration", "test")
    trial, _ = store.dispatch_trial(SPEC.job_id, recurrence_id, attempt, decision)
    return trial


def _finish(store, recurrence_id: str, attempt: int, batch_size: int, status: TrialStatus, energy_j: float) -> None:
    result = TrialResult.build(SPEC, batch_size=batch_size, status=status, time_s=10.0, energy_j=energy_j, num_epochs=2)
    store.finish_trial(SPEC.job_id, recurrence_id, attempt, result)


def _started_at(store, trial: int):
    trials = store.trials(SPEC.job_id)
    return trials.loc[trials["trial"] == trial, "started_at"].iloc[0].to_pydatetime()


def _ask(store, recurrence_id: str, attempt: int, timeout_s: float, now):
    store.begin_recurrence(SPEC.job_id, recurrence_id)
    return bandit(
        store_uri=store.uri,
        job_id=SPEC.job_id,
        recurrence_id=recurrence_id,
        attempt=attempt,
        policy="default",
        dispatch_timeout_s=timeout_s,
        now=now,
    )


def test_the_bandit_step_records_a_trial_unfinished_past_the_timeout_as_failed(store) -> None:
    _dispatch(store, "r1", 1, 16)
    _finish(store, "r1", 1, 16, TrialStatus.REACHED, 1000.0)
    lost = _dispatch(store, "r2", 1, 32)  # its pod was lost: no feedback ever comes
    dispatched = _started_at(store, lost)

    early = _ask(store, "r3", 1, timeout_s=100.0, now=dispatched + timedelta(seconds=99.9))
    assert early.abandoned == ()
    assert store.trials(SPEC.job_id).set_index("trial").loc[lost, "status"] == "dispatched"

    late = _ask(store, "r4", 1, timeout_s=100.0, now=dispatched + timedelta(seconds=100))
    (abandoned,) = late.abandoned
    assert (abandoned.trial, abandoned.recurrence, abandoned.attempt, abandoned.batch_size) == (lost, 2, 1, 32)
    row = store.trials(SPEC.job_id).set_index("trial").loc[lost]
    assert row["status"] == "failed" and row["finished"]
    assert row["reason"] == (
        "no result 1.67 min after it was dispatched (dispatch_timeout_s=100): its process was killed or lost"
    )
    assert (row["energy_j"], row["time_s"], row["cost"]) == (0.0, 0.0, 0.0)
    assert row["source"] == "none (no result was reported)"
    # r3's own trial, dispatched before r4 decided, is younger than the timeout: left alone.
    assert store.trials(SPEC.job_id).set_index("trial").loc[early.trial, "status"] == "dispatched"


def test_a_retried_bandit_step_never_fails_its_own_trial(store) -> None:
    first = _ask(store, "r1", 1, timeout_s=0.0, now=None)
    much_later = _started_at(store, first.trial) + timedelta(days=30)
    again = _ask(store, "r1", 1, timeout_s=0.0, now=much_later)
    assert again.trial == first.trial and again.abandoned == ()
    assert store.trials(SPEC.job_id)["status"].tolist() == ["dispatched"]


def test_timeout_zero_fails_every_other_unfinished_trial_and_bad_values_name_the_parameter(store) -> None:
    lost = _dispatch(store, "r1", 1, 8)
    choice = _ask(store, "r2", 1, timeout_s=0.0, now=_started_at(store, lost))
    assert [a.trial for a in choice.abandoned] == [lost]
    for bad in (-1.0, float("nan"), True, "1h"):
        with pytest.raises(FieldError, match="dispatch_timeout_s"):
            _ask(store, "r3", 1, timeout_s=bad, now=None)


def test_a_lost_trial_whose_result_arrives_first_keeps_its_result(store) -> None:
    lost = _dispatch(store, "r1", 1, 8)
    _finish(store, "r1", 1, 8, TrialStatus.NOT_REACHED, 500.0)  # feedback won the race
    choice = _ask(store, "r2", 1, timeout_s=0.0, now=_started_at(store, lost) + timedelta(days=1))
    assert choice.abandoned == ()
    assert store.trials(SPEC.job_id).set_index("trial").loc[lost, "status"] == "not_reached"


def test_an_interrupted_recurrence_fails_only_its_own_unfinished_trials(store) -> None:
    other = _dispatch(store, "r1", 1, 8)  # another recurrence, still running somewhere
    _dispatch(store, "r2", 1, 16)
    _finish(store, "r2", 1, 16, TrialStatus.NOT_REACHED, 400.0)
    mine = _dispatch(store, "r2", 2, 32)
    (abandoned,) = fail_interrupted(store, SPEC.job_id, "r2", "SIGTERM")
    assert abandoned.trial == mine and abandoned.reason == "interrupted by SIGTERM"
    statuses = store.trials(SPEC.job_id).set_index("trial")["status"]
    assert statuses.to_dict() == {other: "dispatched", mine - 1: "not_reached", mine: "failed"}


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_the_policies_forget_an_abandoned_trial_as_they_forget_a_crashed_one(store, policy) -> None:
    for rec, (size, status) in enumerate([(16, TrialStatus.NOT_REACHED), (32, TrialStatus.REACHED)], start=1):
        _dispatch(store, f"r{rec}", 1, size)
        _finish(store, f"r{rec}", 1, size, status, 1000.0 * rec)
    without = store.history(SPEC.job_id)
    lost = _dispatch(store, "r3", 1, 64)
    fail_interrupted(store, SPEC.job_id, "r3", "SIGINT")
    history = store.history(SPEC.job_id)
    assert [r.status for r in history][-1] is TrialStatus.FAILED and history[-1].trial == lost
    rule = get_policy(policy)
    assert rule.arm_states(SPEC, history) == rule.arm_states(SPEC, without)


def test_the_component_default_timeout_is_the_steps_default() -> None:
    import inspect

    from zeus_kfp.components.bandit import bandit

    assert inspect.signature(bandit.python_func).parameters["dispatch_timeout_s"].default == DEFAULT_DISPATCH_TIMEOUT_S


def test_interruptible_turns_sigterm_into_interrupted_once_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as caught, interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()  # the handler raises before this returns
    assert caught.value.signal_name == "SIGTERM" and isinstance(caught.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is before


TRAIN_STEP = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from zeus_kfp.steps.train import train
    from zeus_kfp.steps.request import TrialRequest

    class Sink:
        def log_metric(self, name, value): pass

    class Artifact:
        def __init__(self, path): self.path, self.metadata = path, {}

    out = Path(sys.argv[1])
    script = out / "hold.py"
    script.write_text("import os, pathlib, time\\n"
                      "pathlib.Path(os.environ['HOLD_PID']).write_text(str(os.getpid()))\\n"
                      "while True: time.sleep(0.2)\\n")
    spec = {"job_id": "held", "batch_sizes": [8], "default_batch_size": 8, "target_metric": 0.9, "max_epochs": 2}
    request = TrialRequest(spec_json=json.dumps(spec), batch_size=8, cost_threshold=-1.0,
                           command=["{python}", str(script)], zeus_aware=False, metric_pattern="",
                           metrics_collector="", trial_backend="script", seed=0)
    result = train(request, data_dir="", profile=Artifact(str(out / "profile.parquet")), metrics=Sink(),
                   model=Artifact(str(out / "model")), gpu="simulated")
    (out / "result.json").write_text(result.to_json())
    """
)


@pytest.mark.slow
def test_sigterm_to_the_train_step_stops_the_script_and_returns_a_failed_trial(tmp_path) -> None:
    """What a stopped pod does: the step gets SIGTERM, its script (in its own session) must not live on."""
    import psutil
    from ux.cli_process import wait_for

    pid_file = tmp_path / "script.pid"
    env = dict(os.environ, HOLD_PID=str(pid_file))
    step = subprocess.Popen([sys.executable, "-c", TRAIN_STEP, str(tmp_path)], env=env)
    script_pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), "the script to start"))
    step.send_signal(signal.SIGTERM)
    assert step.wait(timeout=60) == 0
    result = TrialResult.from_json((tmp_path / "result.json").read_text())
    assert result.status is TrialStatus.FAILED and result.reason.startswith("interrupted by SIGTERM")
    assert (tmp_path / "model").read_text() == "the training script wrote no model\n"
    with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie nobody reaped yet
        assert psutil.Process(script_pid).status() == psutil.STATUS_ZOMBIE
