"""A trial of two ranks under torchrun on this CPU (gloo), each rank with its own simulated GPU.

This is the local launcher's path (launcher "torchrun"), the one a cluster pod runs too: the
runner starts zeus_kfp.launch.torchrun, which starts torchrun, which starts the ranks. The expected
figures are worked from each rank's own record (its own GPU's readings), independently of the
reductions that produced the trial's result. The simulated GPU runs on its model clock, so the
figures do not depend on this machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.launch import LaunchConfig
from zeus_kfp.launch.trial_runner import launch_runner
from zeus_kfp.power.profile_params import candidate_limits
from zeus_kfp.power.simulated import SimulatedGPU
from zeus_kfp.steps import prepare
from zeus_kfp.steps.bandit import bandit
from zeus_kfp.steps.feedback import feedback
from zeus_kfp.store import open_store
from zeus_kfp.train.artifacts import read_result_json
from zeus_kfp.train.distributed import read_rank_records

SCRIPT = Path(__file__).with_name("ddp_trial.py").resolve()
GLOBAL_BATCH, PROFILE_ITERS = 64, 2
SPEC = JobSpec(
    job_id="ddp-job",
    batch_sizes=(GLOBAL_BATCH,),
    default_batch_size=GLOBAL_BATCH,
    target_metric=1.5,  # accuracy never gets there: the trial runs all its epochs
    max_epochs=3,
    num_gpus=2,
    max_power_w=250.0,
    beta_knob=None,
)


def _launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str):
    for name, value in {"ZEUS_TEST_PID_DIR": str(tmp_path), **env}.items():
        monkeypatch.setenv(name, value)
    work_dir = tmp_path / "work"
    runner = launch_runner(
        LaunchConfig("torchrun", gpus_per_node=2),
        command=[sys.executable, str(SCRIPT)],
        gpu="simulated",
        warmup_iters=0,
        profile_iters=PROFILE_ITERS,
    )
    outcome = runner.run(SPEC, batch_size=GLOBAL_BATCH, cost_threshold=None, seed=None, reuse=None, work_dir=work_dir)
    return outcome, work_dir / "logs"


def _train_windows(record: dict) -> list[dict]:
    return [w for w in record["windows"] if w["window"].removeprefix("profile:").isdigit()]


def test_two_ranks_profile_in_lockstep_and_record_one_trial_with_both_ranks_energy(tmp_path, monkeypatch):
    outcome, log_dir = _launch(tmp_path, monkeypatch)
    result, records = outcome.result, read_rank_records(log_dir)
    assert result.status is TrialStatus.NOT_REACHED and result.simulated, result.reason
    assert sorted(records) == [0, 1]
    # energy: the sum of what each rank's own GPU drew over the trial
    assert all(records[r]["energy_j"] > 0 for r in (0, 1))
    assert result.energy_j == pytest.approx(records[0]["energy_j"] + records[1]["energy_j"], rel=1e-9)
    # lockstep: the same limits in the same order on both ranks, each GPU really at that limit in its window
    limits = candidate_limits(SimulatedGPU())
    for r in (0, 1):
        windows = _train_windows(records[r])
        assert [w["window"] for w in windows] == [f"profile:{limit:g}" for limit in limits]
        assert [w["gpu_limit_w"] for w in windows] == limits
    # each profile row is both ranks' window together: energy summed, time the slower rank's, global samples
    rows = outcome.profile.rows[outcome.profile.rows["phase"] == "train"]
    assert list(rows["power_limit_w"]) == limits
    for (_, row), w0, w1 in zip(rows.iterrows(), _train_windows(records[0]), _train_windows(records[1]), strict=True):
        slowest = max(w0["time_s"], w1["time_s"])
        assert row["average_power_w"] == pytest.approx((w0["energy_j"] + w1["energy_j"]) / slowest, rel=1e-9)
        assert row["throughput"] == pytest.approx(PROFILE_ITERS * GLOBAL_BATCH / slowest, rel=1e-9)
    # rank 0 decided, both followed: same batch size, same chosen limit, both GPUs trained at it
    assert result.power_limit_w in limits
    for r in (0, 1):
        assert (records[r]["batch_size"], records[r]["local_batch_size"]) == (GLOBAL_BATCH, GLOBAL_BATCH // 2)
        assert records[r]["power_limit_w"] == records[r]["trained_at_w"] == result.power_limit_w
    # one trial record: the attempt goes through the real bandit and feedback steps into a store
    store_uri = str(tmp_path / "store")
    open_store(store_uri).ensure_job(SPEC)  # as the gate registers it
    prepare(SPEC.job_id, store_uri=store_uri, recurrence_id="rec-1", data_dir=tmp_path / "data")
    choice = bandit(store_uri=store_uri, job_id=SPEC.job_id, recurrence_id="rec-1", attempt=1, policy="default")
    assert choice.batch_size == GLOBAL_BATCH
    profile_path = tmp_path / "profile.parquet"
    outcome.profile.to_parquet(profile_path)
    feedback(
        store_uri=store_uri,
        job_id=SPEC.job_id,
        recurrence_id="rec-1",
        attempt=1,
        result_json=json.dumps(result.to_dict()),
        profile_path=str(profile_path),
    )
    trials = open_store(store_uri).trials(SPEC.job_id)
    assert len(trials) == 1 and trials["energy_j"].iloc[0] == pytest.approx(result.energy_j)
    assert sorted(p.name for p in log_dir.glob("result.json")) == ["result.json"]


def test_killing_rank_1_mid_trial_fails_the_trial_with_its_error_and_leaves_nothing_running(tmp_path, monkeypatch):
    outcome, log_dir = _launch(tmp_path, monkeypatch, ZEUS_TEST_KILL_RANK="1", ZEUS_TEST_KILL_STEP="3")
    result = outcome.result
    assert result.status is TrialStatus.FAILED
    assert result.reason.startswith("rank 1 failed: killed by signal 9 (SIGKILL)"), result.reason
    records = read_rank_records(log_dir)
    assert sorted(records) == [0]  # rank 1 died before it could say anything; rank 0 was stopped
    assert result.energy_j == pytest.approx(records[0]["energy_j"]) and result.energy_j > 0
    assert "ranks [1] left no record" in result.reason
    for rank in (0, 1):
        pid, pgid = map(int, (tmp_path / f"rank-{rank}.pid").read_text().split())
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        with pytest.raises(ProcessLookupError):  # the launcher's whole process group is gone
            os.killpg(pgid, 0)


def test_the_pods_own_deadline_stops_a_trial_that_would_run_for_ever(tmp_path):
    """What bounds a job whose train step was killed outright, on every Kubeflow (Trainer v2.1's TrainJob has no
    activeDeadlineSeconds): the pod command stops its ranks once ZEUS_TRIAL_DEADLINE_S has passed, fails the pod,
    and rank 0 records the trial failed, saying why. The script here never ends by itself."""
    log_dir = tmp_path / "logs"
    env = dict(
        os.environ,
        ZEUS_TRIAL_DEADLINE_S="2",
        ZEUS_BATCH_SIZE="64",
        ZEUS_TARGET_METRIC="0.9",
        ZEUS_MAX_EPOCHS="3",
        ZEUS_LOG_DIR=str(log_dir),
        ZEUS_NUM_GPUS="1",
    )
    never_ends = [sys.executable, "-c", "import time; time.sleep(3600)"]
    command = [
        sys.executable,
        "-m",
        "zeus_kfp.launch.torchrun",
        "--standalone",
        "--nproc-per-node",
        "1",
        "--",
        *never_ends,
    ]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert "the trial's deadline of 2 s passed (ZEUS_TRIAL_DEADLINE_S)" in proc.stderr
    result = read_result_json(log_dir)
    assert result["status"] == TrialStatus.FAILED.value and "deadline of 2 s passed" in result["reason"]
