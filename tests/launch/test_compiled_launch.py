"""What the compiled train step hands a cluster trial: the pods inherit its scheduling, and a train step that
holds GPUs itself never launches a job (its GPUs would sit idle while the job's pods train).

The compiled package's own train environment is read back (pipelines/package.py) and given to
LaunchConfig.from_params exactly as the step's process would see it, and the manifests built from it are
checked: the chain compile -> train step -> pods, without a cluster.
"""

from __future__ import annotations

import json

import pytest

from zeus_kfp.errors import FieldError
from zeus_kfp.launch import LaunchConfig, LaunchError
from zeus_kfp.launch.manifests import TrialJob, manifest
from zeus_kfp.pipelines.compile import compile_pipeline
from zeus_kfp.pipelines.package import CompiledPackage

from .cluster_fixtures import COMMAND
from .test_manifests import HANDOFF, STEP_ENV, TRIAL_ENV, effective_pod

SCHEDULING = {
    "accelerator": "nvidia.com/mig-3g.40gb",
    "train_node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "image_pull_secrets": ["regcred"],
    "shm_size": "32Gi",
    "trial_timeout_s": 7200.0,
}


@pytest.mark.parametrize("launcher", ["trainjob", "pytorchjob"])
def test_a_cluster_launcher_compiles_a_train_step_without_gpus_whose_pods_inherit_its_scheduling(tmp_path, launcher):
    package = CompiledPackage.read(compile_pipeline(tmp_path / "p.yaml", attempts=1, launcher=launcher, **SCHEDULING))
    assert package.default("launcher") == launcher
    train = package.spec["deploymentSpec"]["executors"]["exec-attempt-1-train"]["container"]
    assert "accelerator" not in train.get("resources", {})  # the job's pods hold the GPUs, not the step
    k8s = package.kubernetes("attempt-1-train")
    assert "tolerations" not in k8s and "nodeSelector" not in k8s  # the step may run on any node
    assert package.kubernetes("gpu-power")["nodeSelector"] == {"labels": SCHEDULING["train_node_selector"]}
    env = package.env("attempt-1-train")
    config = LaunchConfig.from_params(launcher, 1, 2, environ=env)  # what the step's process reads
    assert config.step_gpus == 0 and config.gpu_resource == "nvidia.com/mig-3g.40gb"
    m = manifest(TrialJob(config, HANDOFF, COMMAND, TRIAL_ENV, STEP_ENV), "zeus-trial", "team-a")
    _, pod_spec, container = effective_pod(m)
    assert pod_spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod_spec["nodeSelector"] == SCHEDULING["train_node_selector"]
    assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod_spec["volumes"][0]["emptyDir"]["sizeLimit"] == "32Gi"
    gpus = m["spec"]["trainer"]["resourcesPerNode"] if launcher == "trainjob" else container["resources"]
    assert gpus == {"limits": {"nvidia.com/mig-3g.40gb": 2}}
    assert config.timeout_s == 7200.0
    for task in ("preprocess", "attempt-1-bandit", "attempt-1-train", "gpu-power"):  # every step pulls privately
        assert [s["secretName"] for s in package.kubernetes(task)["imagePullSecret"]] == ["regcred"], task


def test_a_train_step_with_gpus_refuses_to_launch_a_job():
    """Compiled for launcher local with a GPU, a run that asks for trainjob would leave train's GPU idle for the
    whole trial, and on a cluster with exactly the GPUs the job needs, the job could never schedule."""
    env = {"ZEUS_STEP_GPUS": "1", "ZEUS_LAUNCH_IMAGE": "img:1"}
    for launcher in ("trainjob", "pytorchjob"):
        with pytest.raises(LaunchError) as err:
            LaunchConfig.from_params(launcher, environ=env)
        assert err.value.field == "launcher" and f"--launcher {launcher}" in str(err.value)
    assert LaunchConfig.from_params("torchrun", environ=env).step_gpus == 1  # ranks on train's own GPUs: fine


def test_compile_refuses_a_gpu_on_the_train_step_of_a_cluster_launcher(tmp_path):
    with pytest.raises(FieldError) as err:
        compile_pipeline(tmp_path / "p.yaml", attempts=1, launcher="trainjob", gpus=1)
    assert err.value.field == "gpus" and "idle" in str(err.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("ZEUS_LAUNCH_TOLERATIONS", "nvidia.com/gpu"), ("ZEUS_LAUNCH_NODE_SELECTOR", "[1]"), ("ZEUS_STEP_GPUS", "one")],
)
def test_a_malformed_inherited_setting_names_its_variable(variable, value):
    with pytest.raises(LaunchError) as err:
        LaunchConfig.from_params("trainjob", environ={variable: value})
    assert err.value.field == variable


def test_tolerations_travel_as_the_pod_spec_writes_them():
    raw = json.dumps([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}])
    config = LaunchConfig.from_params("pytorchjob", environ={"ZEUS_LAUNCH_TOLERATIONS": raw})
    assert config.tolerations == ({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"},)


@pytest.mark.parametrize("launcher", ["local", "pytorchjob"])
def test_zeusds_token_reaches_train_and_the_pods_by_reference_never_as_a_value(tmp_path, launcher):
    """deploy/zeusd's port sets power limits for whoever reaches it; with zeusd's JWT auth on, the token comes
    from a Secret: train gets it as ZEUSD_TOKEN (secretAsEnv), a cluster trial's pods by secretKeyRef."""
    gpus = 1 if launcher == "local" else 0
    path = compile_pipeline(tmp_path / "p.yaml", attempts=1, launcher=launcher, gpus=gpus,
                            zeusd_token_secret="zeusd-token")  # fmt: skip
    package = CompiledPackage.read(path)
    bindings = package.kubernetes("attempt-1-train")["secretAsEnv"]
    assert {"secretName": "zeusd-token", "keyToEnv": [{"secretKey": "token", "envVar": "ZEUSD_TOKEN"}]} in [
        {key: b[key] for key in ("secretName", "keyToEnv")} for b in bindings
    ]
    env = package.env("attempt-1-train")
    assert env["ZEUSD_TOKEN_SECRET_NAME"] == "zeusd-token" and "ZEUSD_TOKEN" not in env
    if launcher == "pytorchjob":
        config = LaunchConfig.from_params(launcher, 1, 2, environ=env)
        m = manifest(TrialJob(config, HANDOFF, COMMAND, TRIAL_ENV, STEP_ENV), "zeus-trial", "team-a")
        _, _, container = effective_pod(m)
        ref = {"secretKeyRef": {"name": "zeusd-token", "key": "token"}}
        assert {"name": "ZEUSD_TOKEN", "valueFrom": ref} in container["env"]


def test_a_zeusd_token_without_zeusd_is_refused_naming_it(tmp_path):
    with pytest.raises(FieldError) as err:
        compile_pipeline(tmp_path / "p.yaml", attempts=1, zeusd=False, zeusd_token_secret="zeusd-token")
    assert err.value.field == "zeusd_token_secret"
