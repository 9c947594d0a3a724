"""The launch settings, the rank environment, and naming the rank that failed first: worked by hand."""

from __future__ import annotations

import pytest

from zeus_kfp.job import JobSpec, JobSpecError, TrialStatus
from zeus_kfp.launch import LaunchConfig, LaunchError
from zeus_kfp.launch.failures import RankFailure, failed_result, rank_failures, root_cause
from zeus_kfp.train.distributed import RankEnvError, RankInfo

SPEC = JobSpec(job_id="j", batch_sizes=(32, 64), default_batch_size=64, target_metric=0.9, max_epochs=3, num_gpus=4,
               max_power_w=700.0, eta_knob=0.5)  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"launcher": "mpijob"}, "launcher"),
        ({"launcher": "torchrun", "num_nodes": 2}, "num_nodes"),
        ({"launcher": "trainjob", "gpus_per_node": 0}, "gpus_per_node"),
        ({"launcher": "trainjob", "runtime": "Torch_Distributed"}, "runtime"),
        ({"launcher": "pytorchjob", "pending_timeout_s": 0}, "pending_timeout_s"),
    ],
)
def test_bad_launch_settings_name_the_setting(settings, field):
    with pytest.raises(LaunchError) as err:
        LaunchConfig(**settings)
    assert err.value.field == field and "allowed" in str(err.value)


def test_settings_come_from_the_parameters_and_the_steps_environment():
    environ = {"ZEUS_LAUNCH_NAMESPACE": "team-a", "ZEUS_LAUNCH_IMAGE": "img:1", "ZEUS_LAUNCH_PENDING_TIMEOUT_S": "60",
               "ZEUS_S3_SECRET_NAME": "mlpipeline-minio-artifact"}  # fmt: skip
    config = LaunchConfig.from_params("trainjob", 2.0, 2, "torch-distributed", environ=environ)  # KFP's doubles
    assert (config.num_nodes, config.world_size, config.namespace, config.pending_timeout_s) == (2, 4, "team-a", 60.0)
    assert config.store_secret == "mlpipeline-minio-artifact" and config.cluster and config.distributed
    with pytest.raises(LaunchError) as err:
        LaunchConfig.from_params("trainjob", environ={"ZEUS_LAUNCH_TIMEOUT_S": "an hour"})
    assert err.value.field == "ZEUS_LAUNCH_TIMEOUT_S"


def test_a_distributed_trial_must_price_every_gpu_and_split_every_batch():
    LaunchConfig("pytorchjob", num_nodes=2, gpus_per_node=2).check_spec(SPEC)  # 4 GPUs, sizes divisible by 4
    LaunchConfig("local").check_spec(SPEC.with_changes(num_gpus=3))  # one process: the job's own count
    with pytest.raises(JobSpecError) as err:
        LaunchConfig("torchrun", gpus_per_node=2).check_spec(SPEC)
    assert err.value.field == "num_gpus" and "2 (num_nodes 1 x gpus_per_node 2" in err.value.allowed
    with pytest.raises(JobSpecError) as err:
        LaunchConfig("torchrun", gpus_per_node=3).check_spec(SPEC.with_changes(num_gpus=3))
    assert err.value.field == "batch_sizes"


def test_rank_info_from_torchrun_variables():
    info = RankInfo.from_env({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    assert (info.rank, info.local_rank, info.distributed, info.is_leader) == (5, 1, True, False)
    assert RankInfo.from_env({}) == RankInfo()  # no torchrun: one process
    with pytest.raises(RankEnvError):
        RankInfo.from_env({"RANK": "8", "WORLD_SIZE": "8"})
    with pytest.raises(RankEnvError):
        RankInfo.from_env({"RANK": "x", "WORLD_SIZE": "2"})


PEER = "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.3]:4021"


def test_the_rank_that_failed_for_its_own_reasons_is_named_not_the_ones_it_took_down():
    # rank 2 raised; rank 0 then lost its peer; torchrun stopped rank 1 and 3 with SIGTERM
    records = {
        0: {"status": "failed", "error": PEER, "peer_lost": True, "recorded_at": 100.0},
        1: {"status": "failed", "reason": "terminated by signal 15", "signal": 15, "recorded_at": 100.2},
        2: {"status": "failed", "error": "ValueError: loss is nan", "recorded_at": 100.1},
    }
    failures = rank_failures({0: 1, 1: 143, 2: 1, 3: -15}, records)
    assert {f.rank: f.secondary for f in failures} == {0: True, 1: True, 2: False, 3: True}
    assert root_cause(failures) == RankFailure(2, "ValueError: loss is nan", False, 100.1)


def test_a_rank_killed_without_a_word_comes_before_ranks_that_wrote_theirs():
    records = {0: {"status": "failed", "error": "OSError: disk full", "recorded_at": 5.0}}
    failures = rank_failures({0: 1, 3: -9}, records, {3: "some output\n"})
    cause = root_cause(failures)
    assert (cause.rank, cause.error) == (3, "killed by signal 9 (SIGKILL)")


def test_without_a_primary_failure_the_first_secondary_is_reported_and_stderr_names_unrecorded_errors():
    failures = rank_failures({1: 1, 0: 143}, {}, {1: "Traceback ...\nRuntimeError: Connection reset by peer\n"})
    assert all(f.secondary for f in failures)
    assert root_cause(failures).rank == 0  # both unrecorded: by rank


def test_failed_result_adds_up_the_ranks_energy_and_says_who_is_missing():
    records = {
        0: {"energy_j": 1000.0, "time_s": 10.0, "epochs": 1, "power_limit_w": 500.0, "simulated": False},
        1: {"energy_j": 1200.0, "time_s": 11.0, "epochs": 1, "power_limit_w": 500.0, "simulated": False},
    }
    cause = RankFailure(2, "killed by signal 9 (SIGKILL)", False)
    result = failed_result(SPEC, 64, cause, records, None, world_size=4)
    assert (result.status, result.energy_j, result.time_s) == (TrialStatus.FAILED, 2200.0, 11.0)
    # the job's one cost function, all 4 GPUs: 0.5 * 2200 J + 0.5 * 700 W * 4 * 11 s
    assert result.cost == pytest.approx(0.5 * 2200 + 0.5 * 700 * 4 * 11)
    assert result.reason.startswith("rank 2 failed: killed by signal 9 (SIGKILL)")
    assert "ranks [2, 3] left no record" in result.reason
    oom = failed_result(SPEC, 64, RankFailure(1, "torch.OutOfMemoryError: CUDA out of memory", False), records, None, 4)
    assert oom.status is TrialStatus.OOM
    # rank 0 had finished the trial in lockstep: its figures (every rank's) stand, the status is failed
    leader = {"status": "reached", "time_s": 30.0, "energy_j": 9000.0, "num_epochs": 3, "power_limit_w": 450.0}
    after = failed_result(SPEC, 64, RankFailure(3, "SystemError: teardown", False), records, leader, 4)
    assert (after.status, after.energy_j, after.num_epochs) == (TrialStatus.FAILED, 9000.0, 3)


def test_a_rank_drives_only_its_own_device_of_a_multi_gpu_backend():
    from zeus_kfp.power.simulated import SimulatedGPU
    from zeus_kfp.train.distributed import DeviceView

    node = SimulatedGPU(num_devices=4)
    mine = DeviceView(node, 2)  # LOCAL_RANK 2
    mine.set_power_limit(0, 150.0)
    assert [node.get_power_limit(i) for i in range(4)] == [250.0, 250.0, 150.0, 250.0]
    assert mine.device_count() == 1 and mine.get_power_limit(0) == 150.0
    with pytest.raises(IndexError):
        mine.get_power_limit(1)


def test_in_a_pod_torchrun_takes_the_operators_settings(monkeypatch, tmp_path):
    from torch.distributed.run import parse_args

    from zeus_kfp.launch.torchrun import _parse, _torchrun_args

    # a PyTorchJob worker pod (Training Operator 1.9): PET_NNODES/NODE_RANK/NPROC_PER_NODE, but MASTER_ADDR/PORT
    for name, value in {"PET_NNODES": "3", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "4",
                        "MASTER_ADDR": "zeus-job-master-0", "MASTER_PORT": "23456"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PET_MASTER_ADDR", raising=False)
    ours, command = _parse(["--", "python", "train.py", "--lr", "0.1"])
    args = parse_args(_torchrun_args(ours, command, tmp_path))
    assert (args.nnodes, args.node_rank, args.nproc_per_node) == ("3", 2, "4")
    assert (args.master_addr, args.master_port) == ("zeus-job-master-0", 23456)
    assert args.no_python and args.max_restarts == 0 and not args.standalone
    assert [args.training_script, *args.training_script_args] == ["python", "train.py", "--lr", "0.1"]
