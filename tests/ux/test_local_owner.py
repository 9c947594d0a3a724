"""pipelines.local_owner with real processes: when a local run's claim counts as dead, and what the next run
does about a dead one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace

import psutil
import pytest

from zeus_kfp.job import Decision, JobSpec
from zeus_kfp.pipelines.local_owner import OWNER_FILE, Owner, claim, read_owner, reclaim_killed
from zeus_kfp.store import open_store
from zeus_kfp.store.gating import GateRequest

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def owner_of(proc: subprocess.Popen, *, leads_group: bool) -> Owner:
    started = psutil.Process(proc.pid).create_time()
    return Owner(socket.gethostname(), proc.pid, started, proc.pid if leads_group else None)


def kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=60)  # reaped, as a shell reaps its job


def test_a_running_process_is_alive_and_a_killed_one_dead() -> None:
    proc = subprocess.Popen(SLEEPER)
    owner = owner_of(proc, leads_group=False)
    try:
        assert not owner.is_dead()
    finally:
        kill(proc)
    assert owner.is_dead()


def test_a_pid_with_another_start_time_is_another_process() -> None:
    proc = subprocess.Popen(SLEEPER)
    try:
        assert replace(owner_of(proc, leads_group=False), started=1.0).is_dead()
    finally:
        kill(proc)


def test_a_claim_from_another_host_is_never_dead_from_here() -> None:
    proc = subprocess.Popen(SLEEPER)
    owner = replace(owner_of(proc, leads_group=False), host=socket.gethostname() + "-elsewhere")
    kill(proc)
    assert not owner.is_dead()


def test_a_group_leader_killed_alone_is_alive_while_a_process_of_its_group_is() -> None:
    # The leader starts a member of its own group, then the leader alone is killed: `kill -9 <driver pid>`
    # leaves kfp.local's step subprocess running, and still training.
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
         "'import time; time.sleep(600)']); print(p.pid, flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    member = int(leader.stdout.readline())
    owner = owner_of(leader, leads_group=True)
    try:
        kill(leader)
        assert os.getpgid(member) == leader.pid
        assert not owner.is_dead()
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(member).wait(timeout=60)  # not our child: init reaps it
    assert owner.is_dead()


def test_claim_holds_the_file_while_the_block_runs_and_removes_it_after(tmp_path) -> None:
    run_dir = tmp_path / "job" / "local-1"
    with claim(run_dir) as owner:
        assert read_owner(run_dir / OWNER_FILE) == owner and owner.pid == os.getpid()
        assert not owner.is_dead()
    assert not (run_dir / OWNER_FILE).exists()
    with pytest.raises(RuntimeError), claim(run_dir):
        raise RuntimeError("a failed step")
    assert not (run_dir / OWNER_FILE).exists()


def test_an_unreadable_claim_is_no_claim(tmp_path) -> None:
    (tmp_path / OWNER_FILE).write_text("{not json")
    assert read_owner(tmp_path / OWNER_FILE) is None
    (tmp_path / OWNER_FILE).write_text(json.dumps({"host": "h"}))
    assert read_owner(tmp_path / OWNER_FILE) is None


def test_reclaim_ends_only_the_dead_runs_recurrence_and_fails_its_trial(tmp_path) -> None:
    store = open_store(str(tmp_path / "store"))
    spec = JobSpec(job_id="j", batch_sizes=[16, 32], default_batch_size=32, target_metric=0.5, max_epochs=3)
    store.ensure_job(spec)
    runs = tmp_path / "runs" / "j"
    dead = subprocess.Popen(SLEEPER)
    dead_owner = owner_of(dead, leads_group=False)
    kill(dead)
    alive = subprocess.Popen(SLEEPER)
    cap_two = GateRequest(period_s=0, max_running=2, max_attempts=20, timeout_s=86400)
    try:
        for rid, owner in (("local-dead", dead_owner), ("local-alive", owner_of(alive, leads_group=False))):
            assert store.open_recurrence("j", rid, cap_two).opened
            store.dispatch_trial("j", rid, 1, Decision(32, None, "exploration", "test"))
            (runs / rid).mkdir(parents=True)
            (runs / rid / OWNER_FILE).write_text(json.dumps(owner.__dict__))
        assert store.open_recurrence("j", "local-early", cap_two).why == "no free slot"

        assert reclaim_killed(store, "j", runs) == ["local-dead"]
        assert reclaim_killed(store, "j", runs) == []  # its claim went with it
        assert (runs / "local-alive" / OWNER_FILE).exists()
        trials = store.trials("j").set_index("recurrence_id")
        assert trials.loc["local-dead", "status"] == "failed"
        assert (
            trials.loc["local-dead", "reason"] == f"its local run (pid {dead.pid} on {socket.gethostname()}) was killed"
        )
        assert trials.loc["local-alive", "status"] == "dispatched"
        assert store.open_recurrence("j", "local-next", cap_two).opened  # the dead run's slot is free
    finally:
        kill(alive)
