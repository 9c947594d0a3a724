"""What the STAND-IN operator says about a job (kube_api_server.py serves it): the job's status and
conditions, the pods it would create, their container states, and the API server's Status bodies.

A job lives through a `Scenario` (its phases, optionally held), or through local processes
(stand_in_kubelet.py) whose phase is the job's. No cluster is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .stand_in_kubelet import PodProcesses, trainer_pod

TERMINAL = ("Succeeded", "Failed", "Evicted")
CONTAINER = {"TrainJob": "node", "PyTorchJob": "pytorch"}


@dataclass
class Scenario:
    """How the stand-in's operator runs every job created while this scenario is set."""

    phases: tuple[str, ...] = ("Pending", "Running", "Succeeded")
    hold: str | None = None  # stop at this phase until `StandInApi.release()`
    log: tuple[str, ...] = ("epoch=1 accuracy=0.5", "epoch=2 accuracy=0.9")
    on_end: Callable[[dict[str, Any]], None] | None = None
    message: str = ""  # the Failed condition's message, or why the pod was evicted / is unschedulable
    run_pods_in: Path | None = None  # run the pods' command as local processes (stand_in_kubelet), here


@dataclass
class StandInJob:
    obj: dict[str, Any]
    scenario: Scenario
    step: int = 0
    processes: PodProcesses | None = None
    shown: str = ""  # the phase the job object last said

    @property
    def kind(self) -> str:
        return self.obj["kind"]

    @property
    def phase(self) -> str:
        return self.processes.phase() if self.processes else self.scenario.phases[self.step]

    @property
    def message(self) -> str:
        return self.processes.failure() if self.processes else self.scenario.message


def _condition(kind: str, reason: str, message: str = "") -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}


def job_status(job: StandInJob) -> dict[str, Any]:
    phase, message = job.phase, job.message
    if job.kind == "TrainJob":
        done = {
            "Succeeded": [_condition("Complete", "JobSetCompleted", "jobset completed")],
            "Failed": [_condition("Failed", "JobSetFailed", message)],
        }
        return {"conditions": done.get(phase, [])}
    conditions = [_condition("Created", "PyTorchJobCreated")]
    if phase != "Pending":
        conditions.append(_condition("Running", "PyTorchJobRunning"))
    if phase == "Succeeded":
        conditions.append(_condition("Succeeded", "PyTorchJobSucceeded"))
    if phase == "Failed":
        conditions.append(_condition("Failed", "PyTorchJobFailed", message))
    return {"conditions": conditions}


def _pod_labels(job: StandInJob) -> dict[str, str]:
    """The labels the operator gives the job's pods: from the pod template the job patches (Trainer v2.2+:
    runtimePatches; v2.1: podTemplateOverrides), none when it patches nothing (the fields were dropped)."""
    return dict(trainer_pod(job.obj)[0].get("labels", {}))


def pods_of(job: StandInJob) -> list[dict[str, Any]]:
    name = job.obj["metadata"]["name"]
    nodes = (
        job.obj["spec"]["trainer"]["numNodes"]
        if job.kind == "TrainJob"
        else sum(r["replicas"] for r in job.obj["spec"]["pytorchReplicaSpecs"].values())
    )
    pods = []
    for index in range(nodes):
        labels = _pod_labels(job)
        if job.kind == "TrainJob":
            pod_name = f"{name}-node-0-{index}"
            labels.update(
                {"jobset.sigs.k8s.io/jobset-name": name, "batch.kubernetes.io/job-completion-index": str(index)}
            )
        else:
            role = "master" if index == 0 else "worker"
            pod_name = f"{name}-{role}-{0 if index == 0 else index - 1}"
            labels.update({"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": role})
        status = _pod_status(job, index)
        pods.append(
            {
                "metadata": {"name": pod_name, "namespace": job.obj["metadata"]["namespace"], "labels": labels},
                "status": status,
            }
        )
    return pods


def _container(job: StandInJob, state: dict[str, Any]) -> list[dict[str, Any]]:
    image = (
        job.obj["spec"]["trainer"]["image"]
        if job.kind == "TrainJob"
        else job.obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"]
    )
    status = {"name": CONTAINER[job.kind], "image": image, "imageID": "", "ready": "running" in state}
    return [{**status, "restartCount": 0, "state": state}]


def _pod_status(job: StandInJob, index: int) -> dict[str, Any]:
    """Pod `index`'s status: its own process's (run_pods_in), else what the job's phase implies for it."""
    if job.processes is not None:
        code = job.processes.procs[index].poll()
        return _ran(job, {"running": {}}) if code is None else _ended(job, code)
    master, phase = index == 0, job.phase
    if phase == "Pending":
        reason = "Unschedulable" if job.scenario.message else "ContainerCreating"
        scheduled = {"type": "PodScheduled", "status": "False", "reason": reason, "message": job.scenario.message}
        return {"phase": "Pending", "conditions": [scheduled] if job.scenario.message else []}
    if phase == "Running" or (phase == "Evicted" and not master):
        return _ran(job, {"running": {}})
    if phase == "Evicted":
        return {"phase": "Failed", "reason": "Evicted", "message": job.scenario.message}
    return _ended(job, 0 if phase == "Succeeded" or not master else 1)


def _ran(job: StandInJob, state: dict[str, Any]) -> dict[str, Any]:
    return {"phase": "Running", "containerStatuses": _container(job, state)}


def _ended(job: StandInJob, code: int) -> dict[str, Any]:
    terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "message": job.message}
    phase = "Succeeded" if code == 0 else "Failed"
    return {"phase": phase, "containerStatuses": _container(job, {"terminated": terminated})}


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
