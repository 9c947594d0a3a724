"""The train step with the launch parameters: compiled into the pipeline, and run as a cluster trial against a
STAND-IN Kubernetes API server (no cluster is used), reached the way a user's machine reaches a cluster: a
kubeconfig."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
import yaml

from zeus_kfp.pipelines.compile import compile_pipeline
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.train import train

from .cluster_fixtures import COMMAND, NAMESPACE, PROFILE_ROWS, SPEC, rank0_hands_over
from .kube_api_server import Scenario, StandInServer
from .test_cluster_launchers import _finished


@dataclass
class Artifact:
    path: str
    metadata: dict = field(default_factory=dict)


class Metrics:
    def __init__(self) -> None:
        self.logged: dict[str, float] = {}

    def log_metric(self, metric: str, value: float) -> None:
        self.logged[metric] = value


def _kubeconfig(path: Path, url: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stand-in", "cluster": {"server": url}}],
        "users": [{"name": "nobody", "user": {}}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "nobody"}}],
        "current-context": "stand-in",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _train(tmp_path: Path, **launch) -> tuple:
    profile, model, metrics = Artifact(str(tmp_path / "profile.parquet")), Artifact(str(tmp_path / "model")), Metrics()
    request = TrialRequest(
        spec_json=json.dumps(SPEC.to_dict()),
        batch_size=64,
        cost_threshold=-1.0,
        command=list(COMMAND),
        zeus_aware=True,
        metric_pattern="",
        metrics_collector="",
        trial_backend="script",
        seed=0,
        store_uri=str(tmp_path / "store"),
        recurrence_id="run-step",
        attempt=2,
        **launch,
    )
    out = train(request, data_dir=str(tmp_path / "data"), profile=profile, metrics=metrics, model=model)
    return out, profile, model, metrics


@pytest.mark.parametrize("launcher", ["trainjob", "pytorchjob"])
def test_the_train_step_runs_a_cluster_trial_and_outputs_rank_0s_result(tmp_path, monkeypatch, launcher):
    finished = _finished()
    with StandInServer() as api:
        api.scenario = Scenario(on_end=rank0_hands_over(finished, model=b"the weights"))
        for name, value in {
            "KUBECONFIG": str(_kubeconfig(tmp_path / "kubeconfig", api.url)),
            "ZEUS_LAUNCH_NAMESPACE": NAMESPACE,
            "ZEUS_LAUNCH_IMAGE": "ghcr.io/zeus-kfp/zeus-kfp:0.1.0",
            "ZEUS_LAUNCH_ALLOW_LOCAL_STORE": "1",
        }.items():
            monkeypatch.setenv(name, value)
        out, profile, model, metrics = _train(tmp_path, launcher=launcher, num_nodes=2, gpus_per_node=2)
    created = next(call for call in api.calls if call[0] == "create")
    assert created[1] == {"trainjob": "TrainJob", "pytorchjob": "PyTorchJob"}[launcher]
    assert (out.status.value, out.energy_j, out.cost) == ("reached", finished.energy_j, finished.cost)
    assert out.power_limit_w == 500.0
    assert metrics.logged["energy_j"] == finished.energy_j and metrics.logged["simulated"] == 0.0
    assert pd.read_parquet(profile.path).to_dict("records") == PROFILE_ROWS
    assert Path(model.path).read_bytes() == b"the weights" and model.metadata["written"] is True


def test_bad_launch_parameters_fail_the_trial_naming_the_field_and_nothing_runs(tmp_path):
    """The step does not fail (feedback must record the trial, or it would stay dispatched): the trial does."""
    out, _, model, _ = _train(tmp_path, launcher="slurm")
    assert out.status.value == "failed" and "invalid launcher='slurm'" in out.reason
    assert model.metadata["written"] is False
    out, *_ = _train(tmp_path, launcher="torchrun", gpus_per_node=2)  # SPEC prices 4 GPUs; torchrun on 2 holds 2
    assert out.status.value == "failed" and "invalid num_gpus=4" in out.reason


def test_the_launch_parameters_reach_every_train_step_of_the_compiled_pipeline(tmp_path):
    path = compile_pipeline(
        tmp_path / "p.yaml", spec=SPEC, command=list(COMMAND), attempts=2, train_image="registry.example/zeus:1-cuda"
    )
    spec = next(yaml.safe_load_all(path.read_text()))
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    defaults = {name: inputs[name]["defaultValue"] for name in ("launcher", "num_nodes", "gpus_per_node")}
    assert defaults == {"launcher": "local", "num_nodes": 1.0, "gpus_per_node": 1.0}
    assert inputs["trainjob_runtime"]["defaultValue"] == "torch-distributed"
    dags = [spec["root"]["dag"]] + [c["dag"] for c in spec["components"].values() if "dag" in c]
    trains = [task for dag in dags for name, task in dag["tasks"].items() if name.endswith("-train")]
    assert len(trains) == 2
    for task in trains:
        bound = task["inputs"]["parameters"]
        for name in ("launcher", "num_nodes", "gpus_per_node", "trainjob_runtime", "store_uri", "attempt"):
            assert name in bound, name
    for label, executor in spec["deploymentSpec"]["executors"].items():
        if label.endswith("-train"):
            env = {e["name"]: e["value"] for e in executor["container"]["env"]}
            assert env["ZEUS_LAUNCH_IMAGE"] == "registry.example/zeus:1-cuda"
