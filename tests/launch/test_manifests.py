"""Every TrainJob and PyTorchJob the launcher can produce validates against the shipped CRD schemas of every
version it is meant for (Kubeflow Trainer v2.1.0, v2.2.0 and v2.3.0, Training Operator release-1.9,
tests/data/crds), and against no version it is not meant for; wrong fields are caught; the pods inherit
the train step's scheduling, pull secrets and shared memory, opt out of Istio, and mount the trial's
live-threshold ConfigMap as a directory."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import re
from pathlib import PurePosixPath

import pytest

from zeus_kfp.job import JobSpec
from zeus_kfp.launch import LaunchConfig
from zeus_kfp.launch.cluster import trial_job
from zeus_kfp.launch.handoff import Handoff
from zeus_kfp.launch.manifests import KINDS, TrialJob, digest, job_name, labels, manifest
from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE

from . import crds
from .stand_in_kubelet import trainer_pod as effective_pod

HANDOFF = Handoff("s3://zeus/prod", "resnet50-nightly", "5c3b1e0a-9f6e-4a53-b8f0-0d0c6b0f2f11", 3, "0a1b2c3d4e5f")
TRIAL_ENV = {"ZEUS_BATCH_SIZE": "256", "ZEUS_NUM_GPUS": "8", "ZEUS_LOG_DIR": "/tmp/zeus-trial/logs"}
STEP_ENV = {
    "ZEUS_S3_ENDPOINT": "minio-service.kubeflow:9000",
    "ZEUS_S3_SECURE": "false",
    "ZEUS_S3_ACCESS_KEY": "AKIA-THE-ACCESS-KEY",  # the step's own credentials: never copied into a manifest
    "ZEUS_S3_SECRET_KEY": "the-secret-key-value",
    "ZEUSD_HOST": "10.0.0.7",
    "ZEUSD_TOKEN": "the-zeusd-token",
}
COMMAND = ("python", "/opt/zeus-kfp/examples/train_zeus.py", "--epochs", "5")
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


INHERITED = {
    "tolerations": ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
    "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "image_pull_secrets": ("regcred",),
    "shm_size": "16Gi",
}
# The CRD versions each shape is meant for: a TrainJob for v2.1 (Kubeflow 1.11) or v2.2+, a PyTorchJob.
FITS = {("trainjob", "v2.1"): ("v2.1.0",), ("trainjob", "v2.2"): ("v2.2.0", "v2.3.0"), ("pytorchjob", None): (None,)}


THRESHOLD_CONFIGMAP = "zeus-resnet50-nightly-0123456789-a3-threshold"


def trial(launcher: str = "trainjob", reuse: bool = False, step_env=None, threshold: str = "", **changes) -> TrialJob:
    config = LaunchConfig(launcher, image="registry.example.com/ml/zeus-kfp:0.1.0-cuda", **changes)
    return TrialJob(config, HANDOFF, COMMAND, TRIAL_ENV, STEP_ENV if step_env is None else step_env, reuse, threshold)


def every_manifest():
    """(shape, manifest), one manifest per combination of everything that changes a manifest's shape."""
    options = itertools.product(
        FITS,  # the kind, and for a TrainJob the Trainer's shape
        ((1, 1), (4, 8)),  # nodes (a PyTorchJob gets Workers beyond the Master) x GPUs per node
        ("nvidia.com/gpu", ""),  # a GPU request, or none (a CPU cluster)
        (None, "pipeline-runner"),  # service account
        (None, 5400.5),  # timeout -> activeDeadlineSeconds, the pods' deadline
        (None, "mlpipeline-minio-artifact"),  # store Secret
        (STEP_ENV, {}),  # zeusd and a store endpoint (and a profile to reuse), or none of them
        ({}, INHERITED),  # train's scheduling, pull secrets and /dev/shm, or none of them
        ("", THRESHOLD_CONFIGMAP),  # the live threshold's ConfigMap (a job with an early stop), or none
    )
    for (launcher, api), (nodes, gpus), resource, account, timeout, secret, step_env, inherited, cm in options:
        sizes = {"num_nodes": nodes, "gpus_per_node": gpus, "gpu_resource": resource}
        cluster = {"service_account": account, "timeout_s": timeout, "store_secret": secret, "trainer_api": api}
        made = trial(launcher, bool(step_env), step_env, cm, **sizes, **cluster, **inherited)
        yield (
            (launcher, api),
            manifest(made, job_name(HANDOFF.job_id, HANDOFF.recurrence_id, HANDOFF.attempt), "team-a"),
        )


def test_every_manifest_validates_against_the_crds_of_every_version_it_fits_and_no_other():
    produced = list(every_manifest())
    assert {m["kind"] for _, m in produced} == {"TrainJob", "PyTorchJob"} and len(produced) == 768
    for shape, m in produced:
        if m["kind"] == "PyTorchJob":
            assert crds.errors(m) == [], json.dumps(m)[:400]
            continue
        for trainer in crds.TRAINER_VERSIONS:
            problems = crds.errors(m, trainer)
            if trainer in FITS[shape]:
                assert problems == [], (trainer, json.dumps(m)[:400])
            else:  # the other shape: a strict API server refuses it, naming what that version lacks
                assert any("runtimePatches" in p or "podTemplateOverrides" in p for p in problems), trainer
        text = json.dumps(m)
        assert (
            "AKIA-THE-ACCESS-KEY" not in text and "the-secret-key-value" not in text and "the-zeusd-token" not in text
        )
        env = (
            m["spec"]["trainer"]["env"]
            if m["kind"] == "TrainJob"
            else m["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
        )
        assert not [e["name"] for e in env if e["name"].startswith("PET_")]  # Trainer refuses torchrun's own variables
        for key, value in m["metadata"]["labels"].items():
            assert LABEL_KEY.match(key) and LABEL_VALUE.match(value), (key, value)


def _master(m: dict) -> dict:
    return m["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]


WRONG = [
    ("trainjob", lambda m: m["spec"]["trainer"].update(numNode=2), "'numNode' was unexpected"),
    ("trainjob", lambda m: m["spec"]["trainer"].update(numNodes="two"), "'two' is not of type 'integer'"),
    ("trainjob", lambda m: m["spec"].pop("runtimeRef"), "'runtimeRef' is a required property"),
    ("trainjob", lambda m: m["spec"]["trainer"]["resourcesPerNode"]["limits"].update(gpu="8 GPUs"), "does not match"),
    ("trainjob", lambda m: m["metadata"].update(name="Zeus_Trial"), "RFC 1035"),
    ("pytorchjob", lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"].update(replica=1), "'replica' was unexpected"),
    ("pytorchjob", lambda m: m["spec"].update(nprocPerNode=8), "8 is not of type 'string'"),
    ("pytorchjob", lambda m: _master(m).pop("name"), "'name' is a required property"),
    ("pytorchjob", lambda m: m.update(apiVersion="kubeflow.org/v2"), "apiVersion"),
]


@pytest.mark.parametrize(("launcher", "break_it", "caught"), WRONG)
def test_a_deliberately_wrong_field_is_caught(launcher, break_it, caught):
    good = manifest(trial(launcher), "zeus-trial", "team-a")
    assert crds.errors(good) == []
    bad = copy.deepcopy(good)
    break_it(bad)
    assert any(caught in error for error in crds.errors(bad)), crds.errors(bad)


def test_names_and_labels_are_what_kubernetes_accepts_and_tie_the_job_to_its_trial():
    long_id = "a-very-long-job-identifier-for-the-nightly-retraining-of-model-x"[:63].rstrip("-")
    names = {job_name(long_id, "5c3b1e0a_", attempt) for attempt in range(1, 6)}
    assert len(names) == 5 and all(crds.RFC1035.match(n) and len(n) <= 63 for n in names)
    assert job_name(long_id, "5c3b1e0a_", 2) == job_name(long_id, "5c3b1e0a_", 2)  # a retried step finds it again
    tied = labels(Handoff("s3://b", "resnet50-nightly", "5c3b1e0a_", 2, "abc"))
    assert tied["zeus-kfp.ml/job"] == "resnet50-nightly" and tied["zeus-kfp.ml/attempt"] == "2"
    assert LABEL_VALUE.match(tied["zeus-kfp.ml/recurrence"])  # "_" at the end is no label value: it is hashed


def test_the_digest_ignores_the_run_token_and_nothing_else():
    base = trial()
    other_run = TrialJob(base.config, dataclasses.replace(HANDOFF, run="ffff"), COMMAND, TRIAL_ENV, STEP_ENV)
    assert digest(other_run) == digest(base)
    assert digest(trial(num_nodes=2)) != digest(base)
    assert digest(trial(trainer_api="v2.1")) != digest(base)
    assert digest(TrialJob(base.config, HANDOFF, (*COMMAND, "--lr", "0.1"), TRIAL_ENV, STEP_ENV)) != digest(base)


@pytest.mark.parametrize(("launcher", "api"), list(FITS))
def test_the_pods_inherit_trains_scheduling_secrets_and_shared_memory_and_skip_istio(launcher, api):
    m = manifest(trial(launcher, trainer_api=api, **INHERITED), "zeus-trial", "team-a")
    metadata, pod_spec, container = effective_pod(m)
    assert metadata["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert metadata["labels"]["zeus-kfp.ml/run"] == HANDOFF.run
    assert pod_spec["tolerations"] == list(INHERITED["tolerations"])
    assert pod_spec["nodeSelector"] == INHERITED["node_selector"]
    assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
    (volume,) = pod_spec["volumes"]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert container["name"] == KINDS[launcher].container
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": "/dev/shm"}]
    gpus = m["spec"]["trainer"]["resourcesPerNode"] if launcher == "trainjob" else container["resources"]
    assert gpus == {"limits": {"nvidia.com/gpu": 1}}
    bare = manifest(trial(launcher, trainer_api=api), "zeus-trial", "team-a")
    _, bare_spec, _ = effective_pod(bare)
    assert not {"tolerations", "nodeSelector", "imagePullSecrets", "volumes"} & set(bare_spec)


def test_a_trial_is_bounded_by_default_on_every_kind():
    """No timeout given: the job still has a deadline (a day), as activeDeadlineSeconds where the CRD has one and
    as the pods' own deadline everywhere (a step killed outright must not leave a job holding GPUs)."""
    for (launcher, api), _fits in FITS.items():
        m = manifest(trial(launcher, trainer_api=api), "zeus-trial", "team-a")
        _, _, container = effective_pod(m)
        env = m["spec"]["trainer"]["env"] if launcher == "trainjob" else container["env"]
        assert {"name": "ZEUS_TRIAL_DEADLINE_S", "value": "86400"} in env
        deadline = m["spec"].get("activeDeadlineSeconds", m["spec"].get("runPolicy", {}).get("activeDeadlineSeconds"))
        assert deadline == (None if api == "v2.1" else 86400)


@pytest.mark.parametrize(("launcher", "api"), list(FITS))
@pytest.mark.parametrize("inherited", [{}, INHERITED], ids=["bare", "with-shm"])
def test_the_live_threshold_configmap_is_mounted_as_a_directory_and_named_by_zeus_threshold_file(
    launcher, api, inherited
):
    """A job with an early stop: its pods mount the trial's ConfigMap as a directory (a subPath mount is never
    updated by the kubelet), optional (a pod starts before the step has created it, or where the cluster refused
    it), on the trainer container of each kind and version, beside /dev/shm, and ZEUS_THRESHOLD_FILE is the key's
    file in that directory. A job without an early stop has neither. Each validates where it fits."""
    spec = JobSpec("resnet50-nightly", (128, 256), 256, 0.9, max_epochs=5, num_gpus=1)  # beta 2: early stop
    config = LaunchConfig(launcher, image="registry.example.com/zeus:1", trainer_api=api, **inherited)
    made = trial_job(config, spec, batch_size=256, cost_threshold=None, command=COMMAND, store_uri="s3://zeus/p",
                     recurrence_id=HANDOFF.recurrence_id, attempt=3, step_env={})  # fmt: skip
    m = manifest(made, job_name(spec.job_id, HANDOFF.recurrence_id, 3), "team-a")
    for trainer in FITS[(launcher, api)]:
        assert crds.errors(m, *([trainer] if trainer else [])) == []
    _, pod_spec, container = effective_pod(m)
    (volume,) = [v for v in pod_spec["volumes"] if "configMap" in v]
    assert volume["configMap"] == {"name": m["metadata"]["name"] + "-threshold", "optional": True}
    (mount,) = [v for v in container["volumeMounts"] if v["name"] == volume["name"]]
    assert "subPath" not in mount and mount["readOnly"] is True
    assert len(container["volumeMounts"]) == 1 + bool(inherited)  # /dev/shm kept beside it
    env = m["spec"]["trainer"]["env"] if launcher == "trainjob" else container["env"]
    (threshold_file,) = [e["value"] for e in env if e["name"] == "ZEUS_THRESHOLD_FILE"]
    assert PurePosixPath(threshold_file) == PurePosixPath(mount["mountPath"]) / LIVE_THRESHOLD_FILE

    without = dataclasses.replace(spec, beta_knob=None)
    made = trial_job(config, without, batch_size=256, cost_threshold=None, command=COMMAND, store_uri="s3://zeus/p",
                     recurrence_id=HANDOFF.recurrence_id, attempt=3, step_env={})  # fmt: skip
    bare = manifest(made, "zeus-trial", "team-a")
    _, pod_spec, container = effective_pod(bare)
    assert not [v for v in pod_spec.get("volumes", []) if "configMap" in v]
    assert "ZEUS_THRESHOLD_FILE" not in json.dumps(bare)
