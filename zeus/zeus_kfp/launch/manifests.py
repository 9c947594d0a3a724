"""The TrainJob and PyTorchJob manifests of one cluster trial, as plain dicts.

Why dicts: the kubernetes client creates custom objects from dicts, `zeus-kfp dry-run` prints them, and
the tests validate the very same dicts against the CRDs' OpenAPI schemas (Kubeflow Trainer v2.1.0, v2.2.0
and v2.3.0 TrainJob, Training Operator 1.9 PyTorchJob). A TrainJob takes one of two shapes
(zeus_kfp.launch.trainer_api says which the cluster has): Trainer v2.2+ patches the runtime's pod template
through `runtimePatches` and bounds the job with `activeDeadlineSeconds`; v2.1, which Kubeflow 1.11 ships,
has neither (its API server would silently drop them) and takes `podTemplateOverrides` instead. Both kinds
carry the same trial:

- the image and the pod command: zeus_kfp.launch.torchrun wrapping the user's command, with torchrun's
  settings from the operator's PET_* variables (one node per pod, `gpus_per_node` ranks each);
- the ZEUS_* trial settings, the handoff location (zeus_kfp.launch.handoff), the store's endpoint and
  its keys *by reference* to the Secret the pipeline uses (never the values), and ZEUSD_HOST from
  the pod's own node IP (zeusd sets power limits for unprivileged pods);
- `gpus_per_node` GPUs per node (none when `gpu_resource` is empty: a CPU cluster);
- labels tying it to the job, recurrence, attempt and run (on the job object and on its pods), and
  annotations with the run and a digest of everything else, so a retried step can tell its
  predecessor's job (adopt it) from a different one (replace it);
- the train step's scheduling (tolerations, node selector, the GPU resource name), image pull secrets and
  a memory-backed /dev/shm; `sidecar.istio.io/inject: "false"`, as KFP's own pods have (a profile
  namespace injects Istio, and a classic sidecar keeps a finished pod Running for ever);
- for a job with an early stop, the trial's live-threshold ConfigMap (zeus_kfp.launch.threshold_sink) mounted as a
  directory on the trainer container (never subPath: the kubelet does not update a subPath mount), optional
  (a pod starts whether or not the ConfigMap exists), and ZEUS_THRESHOLD_FILE naming the file in it;
- no retries (backoffLimit 0 / restartPolicy Never: a restarted rank spends the energy twice) and
  the trial's timeout as activeDeadlineSeconds (v2.2+, PyTorchJob) and as the pod command's own
  deadline (every kind: the only bound Trainer v2.1 has), so an orphaned job cannot run for ever.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from zeus_kfp.launch.config import LaunchConfig
from zeus_kfp.launch.handoff import STORE_PLAIN_ENV, STORE_SECRET_KEY_TO_ENV, Handoff
from zeus_kfp.launch.torchrun import DEADLINE_ENV, pod_command
from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE
from zeus_kfp.train.runner import substitute_placeholders

LABEL_PREFIX = "zeus-kfp.ml/"
RUN_ANNOTATION = f"{LABEL_PREFIX}run"
DIGEST_ANNOTATION = f"{LABEL_PREFIX}digest"
PATCH_MANAGER = "zeus-kfp.ml/launcher"
POD_WORK_DIR = "/tmp/zeus-trial"
POD_LOG_DIR = f"{POD_WORK_DIR}/logs"
NODE_IP_FIELD = "status.hostIP"
ISTIO_OPT_OUT = {"sidecar.istio.io/inject": "false"}
SHM_VOLUME = "dshm"
THRESHOLD_VOLUME = "zeus-threshold"
THRESHOLD_MOUNT = "/etc/zeus-kfp/threshold"  # a directory mount: the kubelet updates its files in place
THRESHOLD_PATH = f"{THRESHOLD_MOUNT}/{LIVE_THRESHOLD_FILE}"  # the pods' ZEUS_THRESHOLD_FILE; the ConfigMap's key
TRAINER_NODE = "node"  # the torch runtimes' replicated job and trainer container
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class JobKind:
    """One Kubeflow job API: where it lives, its trainer container, and how its master pod is labelled."""

    launcher: str
    group: str
    version: str
    plural: str
    kind: str
    container: str
    master_label: tuple[str, str]  # (label, value) of the pod that runs node rank 0

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


KINDS = {
    "trainjob": JobKind(
        "trainjob",
        "trainer.kubeflow.org",
        "v1alpha1",
        "trainjobs",
        "TrainJob",
        "node",  # the trainer container of the torch runtimes (ancestor "trainer", name "node")
        ("batch.kubernetes.io/job-completion-index", "0"),  # node rank = the Indexed Job's completion index
    ),
    "pytorchjob": JobKind(
        "pytorchjob",
        "kubeflow.org",
        "v1",
        "pytorchjobs",
        "PyTorchJob",
        "pytorch",  # the Training Operator's required container name
        ("training.kubeflow.org/replica-type", "master"),
    ),
}


@dataclass(frozen=True)
class TrialJob:
    """Everything one cluster trial's manifest says."""

    config: LaunchConfig
    handoff: Handoff
    command: tuple[str, ...]  # the user's command, placeholders already filled for the pod
    trial_env: Mapping[str, str]  # ZEUS_* (zeus_kfp.train.env) as the pod sees them
    step_env: Mapping[str, str]  # the train step's environment: store endpoint, zeusd
    reuse: bool = False  # the step uploaded a stored profile for the trial to reuse
    threshold_configmap: str = ""  # the live threshold's ConfigMap the pods mount ("": none, no early stop)

    @property
    def kind(self) -> JobKind:
        return KINDS[self.config.launcher]


def job_name(job_id: str, recurrence_id: str, attempt: int) -> str:
    """A deterministic RFC 1035 name (<= 63 chars; TrainJob demands it): a retried step finds the same one."""
    digest = hashlib.sha256(f"{job_id}\0{recurrence_id}\0{attempt}".encode()).hexdigest()[:10]
    return f"zeus-{job_id[:20].rstrip('-')}-{digest}-a{attempt}"


def configmap_name(job: str) -> str:
    """The trial's live-threshold ConfigMap, named after its job (`job_name`: a retried step finds it again)."""
    return f"{job}-threshold"


def _label_value(value: str) -> str:
    """`value` when it is a valid label value, else a short digest of it (label values are <= 63 chars)."""
    if len(value) <= 63 and LABEL_VALUE.match(value):
        return value
    return "h-" + hashlib.sha256(value.encode()).hexdigest()[:20]


def labels(handoff: Handoff) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "zeus-kfp",
        f"{LABEL_PREFIX}job": _label_value(handoff.job_id),
        f"{LABEL_PREFIX}recurrence": _label_value(handoff.recurrence_id),
        f"{LABEL_PREFIX}attempt": str(handoff.attempt),
        f"{LABEL_PREFIX}run": _label_value(handoff.run),
    }


def env_list(trial: TrialJob) -> list[dict[str, Any]]:
    """The pods' variables: plain values, the store's keys from their Secret, ZEUSD_HOST from the node."""
    plain = dict(trial.trial_env)
    plain.update(trial.handoff.to_env())
    plain.update({name: trial.step_env[name] for name in STORE_PLAIN_ENV if trial.step_env.get(name)})
    if trial.step_env.get("ZEUSD_PORT"):
        plain["ZEUSD_PORT"] = trial.step_env["ZEUSD_PORT"]
    if trial.reuse:
        plain["ZEUS_HANDOFF_REUSE"] = "1"
    if trial.config.timeout_s:
        plain[DEADLINE_ENV] = str(_deadline_s(trial.config.timeout_s))
    plain.update(trial.config.extra_env)
    env: list[dict[str, Any]] = [{"name": name, "value": str(value)} for name, value in sorted(plain.items())]
    if trial.config.store_secret:
        for key, name in STORE_SECRET_KEY_TO_ENV.items():
            ref = {"secretKeyRef": {"name": trial.config.store_secret, "key": key}}
            env.append({"name": name, "valueFrom": ref})
    if trial.step_env.get("ZEUSD_HOST"):  # the step talks to zeusd: so does every pod, on its own node
        env.append({"name": "ZEUSD_HOST", "valueFrom": {"fieldRef": {"fieldPath": NODE_IP_FIELD}}})
        if trial.config.zeusd_token_secret:  # with zeusd's bearer token, from its Secret (never a plain value)
            ref = {"secretKeyRef": {"name": trial.config.zeusd_token_secret, "key": "token"}}
            env.append({"name": "ZEUSD_TOKEN", "valueFrom": ref})
    return env


def _deadline_s(timeout_s: float) -> int:
    """Whole seconds, at least 1 (both CRDs demand a positive integer)."""
    return max(1, math.ceil(timeout_s))


def _gpus(config: LaunchConfig) -> dict[str, Any]:
    return {"limits": {config.gpu_resource: config.gpus_per_node}} if config.gpu_resource else {}


def pod_metadata(trial: TrialJob) -> dict[str, Any]:
    """The pods' labels (how the step finds them) and the Istio opt-out."""
    return {"labels": labels(trial.handoff), "annotations": dict(ISTIO_OPT_OUT)}


def pod_settings(trial: TrialJob) -> dict[str, Any]:
    """What the pods inherit from the train step, as PodSpec fields (every kind and version takes these), and
    their volumes."""
    config = trial.config
    spec: dict[str, Any] = {}
    if config.service_account:
        spec["serviceAccountName"] = config.service_account
    if config.tolerations:
        spec["tolerations"] = [dict(t) for t in config.tolerations]
    if config.node_selector:
        spec["nodeSelector"] = dict(config.node_selector)
    if config.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in config.image_pull_secrets]
    volumes = []
    if config.shm_size:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": config.shm_size}})
    if trial.threshold_configmap:
        volumes.append({"name": THRESHOLD_VOLUME, "configMap": {"name": trial.threshold_configmap, "optional": True}})
    if volumes:
        spec["volumes"] = volumes
    return spec


def _mounts(trial: TrialJob) -> list[dict[str, Any]]:
    """The trainer container's mounts: /dev/shm, and the live threshold's directory (read only, no subPath)."""
    mounts: list[dict[str, Any]] = []
    if trial.config.shm_size:
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if trial.threshold_configmap:
        mounts.append({"name": THRESHOLD_VOLUME, "mountPath": THRESHOLD_MOUNT, "readOnly": True})
    return mounts


def _trainer_pod_spec(trial: TrialJob) -> dict[str, Any]:
    """pod_settings plus the trainer container's mounts, as both TrainJob shapes patch a pod."""
    spec = pod_settings(trial)
    if _mounts(trial):
        spec["containers"] = [{"name": TRAINER_NODE, "volumeMounts": _mounts(trial)}]
    return spec


def trainjob_spec(trial: TrialJob) -> dict[str, Any]:
    """A TrainJob's spec on the configured ClusterTrainingRuntime (torch-distributed by default), in the shape
    of the cluster's Trainer (config.trainer_api: v2.1, else v2.2+)."""
    config = trial.config
    trainer: dict[str, Any] = {
        "image": config.image,
        "command": pod_command(trial.command),
        "numNodes": config.num_nodes,
        "numProcPerNode": config.gpus_per_node,
        "env": env_list(trial),
    }
    if config.gpu_resource:
        trainer["resourcesPerNode"] = _gpus(config)
    spec: dict[str, Any] = {
        "runtimeRef": {"name": config.runtime, "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
        "trainer": trainer,
    }
    pod_spec = _trainer_pod_spec(trial)
    if config.trainer_api == "v2.1":
        override: dict[str, Any] = {"targetJobs": [{"name": TRAINER_NODE}], "metadata": pod_metadata(trial)}
        spec["podTemplateOverrides"] = [override | ({"spec": pod_spec} if pod_spec else {})]
        return spec  # no activeDeadlineSeconds before v2.2: the pod command's deadline bounds the job
    pod_template: dict[str, Any] = {"metadata": pod_metadata(trial)} | ({"spec": pod_spec} if pod_spec else {})
    node_patch = {"name": TRAINER_NODE, "template": {"spec": {"template": pod_template}}}
    spec["runtimePatches"] = [
        {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node_patch]}}}}
    ]
    if config.timeout_s:
        spec["activeDeadlineSeconds"] = _deadline_s(config.timeout_s)
    return spec


def pytorchjob_spec(trial: TrialJob) -> dict[str, Any]:
    """A PyTorchJob's spec: one Master pod (node rank 0) and num_nodes - 1 Workers, `gpus_per_node` ranks each."""
    config = trial.config
    container: dict[str, Any] = {
        "name": trial.kind.container,
        "image": config.image,
        "command": pod_command(trial.command),
        "env": env_list(trial),
    }
    if config.gpu_resource:
        container["resources"] = _gpus(config)
    if _mounts(trial):
        container["volumeMounts"] = _mounts(trial)
    pod_spec: dict[str, Any] = {"containers": [container], **pod_settings(trial)}
    template = {"metadata": pod_metadata(trial), "spec": pod_spec}
    replicas = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
    if config.num_nodes > 1:
        replicas["Worker"] = {"replicas": config.num_nodes - 1, "restartPolicy": "Never", "template": template}
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None", "backoffLimit": 0}  # pods stay for their logs until deleted
    if config.timeout_s:
        run_policy["activeDeadlineSeconds"] = _deadline_s(config.timeout_s)
    return {"nprocPerNode": str(config.gpus_per_node), "runPolicy": run_policy, "pytorchReplicaSpecs": replicas}


SPECS = {"trainjob": trainjob_spec, "pytorchjob": pytorchjob_spec}


def manifest(trial: TrialJob, name: str, namespace: str) -> dict[str, Any]:
    """The whole object to create: apiVersion, kind, metadata (labels, run and digest annotations), spec."""
    kind = trial.kind
    metadata = {
        "name": name,
        "namespace": namespace,
        "labels": labels(trial.handoff),
        "annotations": {RUN_ANNOTATION: trial.handoff.run, DIGEST_ANNOTATION: digest(trial)},
    }
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": metadata,
        "spec": SPECS[kind.launcher](trial),
    }


def digest(trial: TrialJob) -> str:
    """What the job runs, minus its run token: equal digests mean a predecessor's job runs this very trial."""
    anonymous = replace(trial, handoff=replace(trial.handoff, run="x"))
    body = {"launcher": trial.config.launcher, "spec": SPECS[trial.config.launcher](anonymous)}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def fill_placeholders(command: Sequence[str], batch_size: int) -> tuple[str, ...]:
    """The runner's placeholders as the pod sees them: its own log and work dirs; no data dir (the step's
    dataset artifact is not mounted in the pods: the script reads its data itself)."""
    values = {"batch_size": str(batch_size), "data_dir": "", "log_dir": POD_LOG_DIR, "work_dir": POD_WORK_DIR}
    return tuple(substitute_placeholders(command, values))
