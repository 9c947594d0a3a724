"""End to end: a TrainJob whose pods really run the trial, on a STAND-IN API server and kubelet (no cluster).

The stand-in runs each pod's container command, with the container's environment and the
operator's torchrun variables, as a local process with its own directory (stand_in_kubelet.py): two
"nodes" of one rank each, gloo on CPU, each rank its own simulated GPU. So the manifest the launcher
created is shown to carry everything the trial needs: torchrun across nodes through the operator's
PET_* variables, the ZEUS_* settings, and the handoff through the store, from which the step reads
rank 0's result. Each node's rank record (read from that pod's own directory) gives the expected
energy: the result is the sum over both nodes' GPUs.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.launch.cluster import run_cluster_trial
from zeus_kfp.train.distributed import read_rank_records

from .cluster_fixtures import launch_config
from .kube_api_server import Scenario, StandInServer, api_client

SCRIPT = Path(__file__).with_name("ddp_trial.py").resolve()
SPEC = JobSpec(job_id="pods-job", batch_sizes=(64,), default_batch_size=64, target_metric=1.5, max_epochs=3,
               num_gpus=2, max_power_w=250.0, beta_knob=None)  # fmt: skip


def test_a_trainjobs_pods_run_the_trial_across_two_nodes_and_hand_rank_0s_result_back(tmp_path):
    pods_root = tmp_path / "pods"
    out = io.StringIO()
    with StandInServer() as api:
        api.scenario = Scenario(run_pods_in=pods_root)
        outcome = run_cluster_trial(
            launch_config("trainjob", num_nodes=2, gpus_per_node=1, gpu_resource="", pending_timeout_s=120.0),
            SPEC,
            batch_size=64,
            cost_threshold=None,
            command=[sys.executable, str(SCRIPT)],
            store_uri=str(tmp_path / "store"),
            recurrence_id="run-pods",
            attempt=1,
            work_dir=tmp_path / "work",
            gpu="simulated",
            warmup_iters=0,
            profile_iters=2,
            api_client=api_client(api.url),
            out=out,
        )
    result = outcome.result
    assert result.status is TrialStatus.NOT_REACHED and result.simulated, (result.reason, out.getvalue()[-3000:])
    nodes = sorted(pods_root.glob("*/pod-*"))
    records = {rank: rec for node in nodes for rank, rec in read_rank_records(node / "zeus-trial" / "logs").items()}
    assert sorted(records) == [0, 1]  # rank 0 on node 0, rank 1 on node 1
    assert result.energy_j == pytest.approx(records[0]["energy_j"] + records[1]["energy_j"], rel=1e-9)
    assert records[0]["trained_at_w"] == records[1]["trained_at_w"] == result.power_limit_w
    assert len(outcome.profile.rows[outcome.profile.rows["phase"] == "train"]) == 7
    assert outcome.model_path is not None and outcome.model_path.stat().st_size > 0
    assert "epoch=3 accuracy=" in out.getvalue()  # the master's log, streamed into the step's log
    assert not api.jobs
