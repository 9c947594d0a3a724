"""What the cluster launcher tests share: the job, its launch settings, and what rank 0's node hands back."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zeus_kfp.job import JobSpec, TrialResult
from zeus_kfp.launch import LaunchConfig
from zeus_kfp.launch.handoff import Handoff
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train.artifacts import MODEL_FILE, write_profile, write_result

SPEC = JobSpec(
    job_id="dist-job",
    batch_sizes=(32, 64),
    default_batch_size=64,
    target_metric=0.9,
    max_epochs=5,
    num_gpus=4,
    max_power_w=700.0,
)
NAMESPACE = "team-a"
COMMAND = ("{python}", "train.py", "--batch-size", "{batch_size}", "--out", "{log_dir}")
GPU = "NVIDIA H100 80GB HBM3"  # the model rank 0's profiler names in each row
PROFILE_ROWS = [
    {"phase": "train", "power_limit_w": limit, "average_power_w": power, "throughput": throughput,
     "simulated": False, "gpu": GPU}
    for limit, power, throughput in ((700.0, 2400.0, 9000.0), (500.0, 1900.0, 8600.0))
]  # fmt: skip


def launch_config(launcher: str, **changes: Any) -> LaunchConfig:
    """2 nodes x 2 GPUs (the SPEC's 4), a directory store the 'pods' share with the step (this machine)."""
    settings: dict[str, Any] = {
        "launcher": launcher,
        "num_nodes": 2,
        "gpus_per_node": 2,
        "namespace": NAMESPACE,
        "image": "ghcr.io/zeus-kfp/zeus-kfp:0.1.0",
        "store_secret": "mlpipeline-minio-artifact",
        "allow_local_store": True,
        "pending_timeout_s": 30.0,
        "watch_s": 1.0,
        **changes,
    }
    return LaunchConfig(**settings)


def pod_env(job: dict[str, Any]) -> dict[str, str]:
    """The plain variables the job's trainer container gets (what its pods would see)."""
    spec = job["spec"]
    env = (
        spec["trainer"]["env"]
        if job["kind"] == "TrainJob"
        else spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
    )
    return {item["name"]: item["value"] for item in env if "value" in item}


def rank0_hands_over(result: TrialResult, model: bytes = b"weights") -> Callable[[dict[str, Any]], None]:
    """What rank 0's node does at the end of the trial (zeus_kfp.launch.torchrun): publish its log dir, at the
    handoff the job's own environment names."""

    def publish(job: dict[str, Any]) -> None:
        handoff = Handoff.from_env(pod_env(job))
        assert handoff is not None, "the job's pods were not told where to hand over"
        with tempfile.TemporaryDirectory() as log_dir:
            write_result(log_dir, result, metrics=[0.5, 0.93])
            write_profile(log_dir, PowerProfile.of(PROFILE_ROWS))
            (Path(log_dir) / MODEL_FILE).write_bytes(model)
            handoff.publish(log_dir)

    return publish
