"""Every TrainJob and PyTorchJob the launcher can produce validates against the shipped CRD schemas
(Kubeflow Trainer v2.3.0, Training Operator release-1.9, tests/data/crds), and wrong fields are caught."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import re

import pytest

from zeus.launch import LaunchConfig
from zeus.launch.handoff import Handoff
from zeus.launch.manifests import TrialJob, digest, job_name, labels, manifest

from . import crds

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


def _trial(launcher: str = "trainjob", reuse: bool = False, step_env=None, **changes) -> TrialJob:
    config = LaunchConfig(launcher, image="ghcr.io/zeus-kfp/zeus-kfp:0.1.0", **changes)
    return TrialJob(config, HANDOFF, COMMAND, TRIAL_ENV, STEP_ENV if step_env is None else step_env, reuse)


def every_manifest():
    """One manifest per combination of everything that changes a manifest's shape."""
    options = itertools.product(
        ("trainjob", "pytorchjob"),
        (1, 4),  # nodes: a PyTorchJob gets Workers beyond the Master
        (1, 8),  # GPUs per node
        ("nvidia.com/gpu", ""),  # a GPU request, or none (a CPU cluster)
        (None, "pipeline-runner"),  # service account
        (None, 5400.5),  # timeout -> activeDeadlineSeconds
        (None, "mlpipeline-minio-artifact"),  # store Secret
        (STEP_ENV, {}),  # zeusd and a store endpoint (and a profile to reuse), or none of them
    )
    for launcher, nodes, gpus, resource, account, timeout, secret, step_env in options:
        sizes = {"num_nodes": nodes, "gpus_per_node": gpus, "gpu_resource": resource}
        cluster = {"service_account": account, "timeout_s": timeout, "store_secret": secret}
        trial = _trial(launcher, bool(step_env), step_env, **sizes, **cluster)
        yield manifest(trial, job_name(HANDOFF.job_id, HANDOFF.recurrence_id, HANDOFF.attempt), "team-a")


def test_every_manifest_the_launcher_can_produce_validates_against_the_crds():
    produced = list(every_manifest())
    assert {m["kind"] for m in produced} == {"TrainJob", "PyTorchJob"} and len(produced) == 256
    for m in produced:
        assert crds.errors(m) == [], json.dumps(m)[:400]
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
    good = manifest(_trial(launcher), "zeus-trial", "team-a")
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
    base = _trial()
    other_run = TrialJob(base.config, dataclasses.replace(HANDOFF, run="ffff"), COMMAND, TRIAL_ENV, STEP_ENV)
    assert digest(other_run) == digest(base)
    assert digest(_trial(num_nodes=2)) != digest(base)
    assert digest(TrialJob(base.config, HANDOFF, (*COMMAND, "--lr", "0.1"), TRIAL_ENV, STEP_ENV)) != digest(base)
