"""The Kubernetes API calls of a cluster trial, through the kubernetes Python client, and what they mean.

Why its own module: the client is imported only here (lazily, so zeus imports without it being
used), and reading a job's state from its status conditions and its pods is pure logic the
launcher and the tests share. TrainJob (Trainer v2) ends with condition Complete or Failed;
PyTorchJob (Training Operator v1) with Succeeded or Failed. Pods say the rest: whether they all
started, why one is waiting (unschedulable, image pull) and whether one failed or was evicted.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from zeus_kfp.launch.manifests import LABEL_PREFIX, JobKind

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, RUNNING, PENDING = "Succeeded", "Failed", "Running", "Pending"
DONE_CONDITIONS = {"trainjob": ("Complete", "Failed"), "pytorchjob": ("Succeeded", "Failed")}
LOG_TAIL_LINES = 40
SETUP_HINTS = {
    403: "the pipeline's service account may not do that here: apply deploy/rbac (kubectl apply -k deploy/rbac)",
    404: "is the operator installed? (Kubeflow Trainer v2 for trainjob, the Training Operator v1 for pytorchjob)",
    422: "the cluster's CRD refused a field: check the operator's version (ZEUS_LAUNCH_TRAINER_API for a TrainJob)",
}


class LaunchSetupError(RuntimeError):
    """The cluster refused the job for a reason of its setup (RBAC, a missing operator): the step fails, saying
    what to check, rather than record a failed trial that says nothing about the batch size."""


def load_api_client() -> Any:
    """In a pod: its service account (in-cluster config); elsewhere: the kubeconfig ($KUBECONFIG, read now: the
    client reads it once, at import)."""
    from kubernetes import client, config  # deferred: 0.7 s to import (the module docstring)

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)
    return client.ApiClient()


def job_phase(kind: JobKind, job: dict[str, Any]) -> tuple[str, str]:
    """(Succeeded | Failed | Running, message) from the job's conditions (Running until one says it ended)."""
    ok, bad = DONE_CONDITIONS[kind.launcher]
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == ok:
            return SUCCEEDED, condition.get("message", "")
        if condition.get("type") == bad:
            reason, message = condition.get("reason", ""), condition.get("message", "")
            return FAILED, ": ".join(part for part in (reason, message) if part)
    return RUNNING, ""


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return (pod.get("status") or {}).get("containerStatuses") or []


def pod_failure(pods: list[dict[str, Any]]) -> str:
    """Why a pod of the job failed (evicted, killed, exited non-zero), or "" while none has."""
    for pod in pods:
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        if status.get("phase") == FAILED:
            why = ": ".join(part for part in (status.get("reason", ""), status.get("message", "")) if part)
            terminated = [
                c["state"]["terminated"] for c in _containers(pod) if (c.get("state") or {}).get("terminated")
            ]
            if terminated and not why:
                t = terminated[0]
                why = f"{t.get('reason', 'Error')} (exit code {t.get('exitCode')}): {t.get('message', '')}".strip(": ")
            return f"pod {name} failed: {why or 'no reason given'}"
        for c in _containers(pod):
            t = (c.get("state") or {}).get("terminated")
            if t and t.get("exitCode", 0) != 0:
                return (
                    f"pod {name} failed: {t.get('reason', 'Error')} (exit code {t['exitCode']}) {t.get('message', '')}"
                )
    return ""


def pending_reasons(pods: list[dict[str, Any]]) -> str:
    """Why pods have not started (unschedulable, pulling, config errors), for a stuck-Pending failure."""
    reasons = []
    for pod in pods:
        status = pod.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                reasons.append(f"{pod['metadata']['name']}: {condition.get('reason')}: {condition.get('message', '')}")
        for c in _containers(pod):
            waiting = (c.get("state") or {}).get("waiting")
            if waiting:
                reasons.append(f"{pod['metadata']['name']}: {waiting.get('reason')}: {waiting.get('message', '')}")
    return "; ".join(reasons)


def started(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in (RUNNING, SUCCEEDED, FAILED)


def is_master(kind: JobKind, pod: dict[str, Any]) -> bool:
    label, value = kind.master_label
    meta = pod.get("metadata") or {}
    return (meta.get("labels") or {}).get(label) == value or (meta.get("annotations") or {}).get(label) == value


@dataclass
class KubeJobs:
    """One job kind in one namespace, through the kubernetes client."""

    kind: JobKind
    namespace: str
    api_client: Any = None

    def __post_init__(self) -> None:
        from kubernetes import client  # deferred: 0.7 s to import (the module docstring)

        self.api_client = self.api_client or load_api_client()
        self.custom = client.CustomObjectsApi(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self._where = (self.kind.group, self.kind.version, self.namespace, self.kind.plural)

    def get(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException  # deferred: 0.7 s to import (the module docstring)

        try:
            return self.custom.get_namespaced_custom_object(*self._where, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the job, with strict field validation: a field the cluster's CRD does not know is refused
        rather than dropped (a dropped label would leave the trial's pods unfindable). A refusal that is the
        cluster's setup (not this trial's) says what to check."""
        from kubernetes.client.exceptions import ApiException  # deferred: 0.7 s to import (the module docstring)

        try:
            return self.custom.create_namespaced_custom_object(*self._where, body, field_validation="Strict")
        except ApiException as exc:
            hint = SETUP_HINTS.get(exc.status)
            if hint is None:
                raise
            what = f"{self.kind.kind} ({self.kind.api_version}) in namespace {self.namespace}"
            detail = f" ({str(exc.body)[:600]})" if exc.status == 422 and exc.body else ""
            raise LaunchSetupError(f"could not create a {what}: {exc.status} {exc.reason}{detail}; {hint}") from exc

    def delete(self, name: str) -> bool:
        """Delete the job and (by propagation) its pods; False if it was already gone."""
        from kubernetes.client import V1DeleteOptions  # deferred: 0.7 s to import (the module docstring)
        from kubernetes.client.exceptions import ApiException  # deferred: 0.7 s to import (the module docstring)

        try:
            options = V1DeleteOptions(propagation_policy="Background")
            self.custom.delete_namespaced_custom_object(*self._where, name, body=options)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    def watch(self, name: str, timeout_s: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, job) as the job changes, for up to `timeout_s` (the server ends the watch)."""
        from kubernetes import watch  # deferred: 0.7 s to import (the module docstring)

        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object,
            *self._where,
            field_selector=f"metadata.name={name}",
            timeout_seconds=max(1, int(timeout_s)),
        )
        for event in stream:
            yield event["type"], event["object"]

    def pods(self, run: str) -> list[dict[str, Any]]:
        """The job's pods as the API sends them (raw JSON: no client-side model checks to trip over)."""
        response = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{LABEL_PREFIX}run={run}", _preload_content=False
        )
        return json.loads(response.data).get("items") or []

    def follow_log(self, pod: str, sink: TextIO) -> LogFollower:
        follower = LogFollower(self, pod, sink)
        follower.start()
        return follower


class LogFollower(threading.Thread):
    """Streams one pod's log (follow=true) into the step's log until the container ends; keeps a tail."""

    def __init__(self, jobs: KubeJobs, pod: str, sink: TextIO) -> None:
        super().__init__(daemon=True, name=f"zeus-log-{pod}")
        self.jobs, self.pod, self.sink = jobs, pod, sink
        self.tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self.error = ""

    def run(self) -> None:
        from kubernetes import watch  # deferred: 0.7 s to import (the module docstring)

        try:
            lines = watch.Watch().stream(
                self.jobs.core.read_namespaced_pod_log,
                name=self.pod,
                namespace=self.jobs.namespace,
                container=self.jobs.kind.container,
            )
            for line in lines:
                self.tail.append(line)
                self.sink.write(line + "\n")
                self.sink.flush()
        except Exception as exc:  # a log that cannot be read must not fail the trial: the result comes from the store
            self.error = f"could not stream the log of {self.pod}: {exc}"
            log.warning("zeus: %s", self.error)
