"""Where the train step writes a trial's live threshold (zeus_kfp.train.live_threshold): the seam between the step's
feed (zeus_kfp.steps.threshold_feed, which reads the store) and the training script (which reads a file).

Two sinks, one format (`threshold_json`):
- `FileSink`: the file in the trial's work directory, for a script on the step's machine (launcher local,
  torchrun), which shares the step's file system.
- `ThresholdConfigMap`: for a cluster trial (TrainJob, PyTorchJob), whose pods do not. The launcher creates one
  ConfigMap per trial once the trial's job exists, owned by that job (the garbage collector removes it with the
  job, whoever deletes the job: the step, its retry, a person), and deletes it itself when the trial ends. The
  pods mount it as a directory (zeus_kfp.launch.manifests: never subPath, which the kubelet never updates; a
  directory-mounted ConfigMap is updated in place within the kubelet's sync period, about a minute) and read
  the key LIVE_THRESHOLD_FILE there as a file, through ZEUS_THRESHOLD_FILE. The feed patches that key.

Never a reason to stop a trial. The pods need no Kubernetes rights (the kubelet reads the ConfigMap for them)
and no store credentials; the step's service account needs create, patch and delete on configmaps
(deploy/rbac). A cluster that refuses the ConfigMap (403: a Role without those verbs), or any failure to
create it, is logged once, whichever call meets it first, and the trial runs on at its dispatched threshold
(`SinkUnavailable` tells the feed to stop following). A write before the ConfigMap exists, or after the trial
deleted it, is `SinkNotReady` (retried, not logged); any other failure of a write is raised for the feed, which
logs it once and retries at its next poll, as it does a store's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE, threshold_json, write_live_threshold

log = logging.getLogger(__name__)

RBAC_HINT = "the step's service account needs create, patch and delete on configmaps (deploy/rbac)"


class ThresholdSink(Protocol):
    """Takes the job's early stop each time it changes what the trial stops at."""

    def write(self, threshold: float) -> None: ...


class SinkUnavailable(RuntimeError):
    """The sink takes no more writes, and has said why once: the feed stops following the store."""


class SinkNotReady(RuntimeError):
    """Nothing to write into now (a cluster trial's ConfigMap before its job exists, or after the trial): the feed
    tries again at its next poll, saying nothing."""


@dataclass(frozen=True)
class FileSink:
    """The live threshold file itself, written atomically (a script on the step's machine reads it)."""

    path: Path

    def write(self, threshold: float) -> None:
        write_live_threshold(self.path, threshold)


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    """A reference to the trial's job (as the API server returned it), for the objects that live and die with it."""
    meta = job["metadata"]
    return {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"], "uid": meta["uid"]}


class ThresholdConfigMap:
    """One cluster trial's live-threshold ConfigMap `name` in `namespace` (see the module docstring). The launcher
    calls `create` and `delete`, the feed's thread `write`; `api_client` None: the step's own (in-cluster, else
    the kubeconfig), loaded at the first call."""

    def __init__(self, namespace: str, name: str, api_client: Any = None) -> None:
        self.namespace, self.name = namespace, name
        self._client, self._core = api_client, None
        self.unavailable = ""  # why there is no ConfigMap to write to, once logged
        self.created = False
        self._lock = threading.Lock()

    def _api(self) -> Any:
        with self._lock:
            if self._core is None:
                from kubernetes import client  # deferred: 0.7 s to import; only a cluster trial uses it

                from zeus_kfp.launch.kube import load_api_client

                self._core = client.CoreV1Api(self._client or load_api_client())
            return self._core

    def _give_up(self, what: str, exc: BaseException) -> None:
        """Note, and log once (whichever call meets it first), that the trial has no live threshold."""
        status = getattr(exc, "status", None)
        why = f"{status} {getattr(exc, 'reason', '')}".strip() if status else f"{type(exc).__name__}: {exc}"
        with self._lock:
            first, self.unavailable = not self.unavailable, self.unavailable or why
        if first:
            hint = f"; {RBAC_HINT}" if status == 403 else ""
            log.warning(
                "live threshold: could not %s ConfigMap %s/%s (%s): the trial's pods keep their dispatched "
                "threshold%s",
                what, self.namespace, self.name, why, hint,
            )  # fmt: skip

    def create(self, owner: Mapping[str, Any]) -> None:
        """The ConfigMap with no threshold yet, owned by the trial's job `owner` and labelled as it is. One a
        predecessor of this step left (a retried step) is taken over: `owner` becomes its only owner. Any
        failure is logged once and leaves the trial at its dispatched threshold; nothing is raised."""
        from kubernetes.client.exceptions import ApiException  # deferred: see _api

        reference = owner_reference(owner)
        labels = dict(owner["metadata"].get("labels") or {})
        metadata = {"name": self.name, "labels": labels, "ownerReferences": [reference]}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}
        if self.unavailable:
            return
        try:
            try:
                self._api().create_namespaced_config_map(self.namespace, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                take_over = [{"op": "add", "path": "/metadata/ownerReferences", "value": [reference]}]
                self._api().patch_namespaced_config_map(self.name, self.namespace, take_over)
            self.created = True
        except Exception as exc:  # nothing the API does may fail the trial: it keeps its dispatched threshold
            self._give_up("create", exc)

    def write(self, threshold: float) -> None:
        """Set the ConfigMap's key to the threshold's JSON (the kubelet then rewrites the file in every pod)."""
        from kubernetes.client.exceptions import ApiException  # deferred: see _api

        if self.unavailable:
            raise SinkUnavailable(self.unavailable)
        patch = {"data": {LIVE_THRESHOLD_FILE: threshold_json(threshold)}}
        try:
            self._api().patch_namespaced_config_map(self.name, self.namespace, patch)
        except ApiException as exc:
            if exc.status == 404:
                raise SinkNotReady(f"no ConfigMap {self.namespace}/{self.name} now") from exc
            if exc.status == 403:
                self._give_up("patch", exc)
                raise SinkUnavailable(self.unavailable) from exc
            raise

    def delete(self) -> bool:
        """Delete the ConfigMap this trial created; False when there was none (or it was gone already). A failure
        is logged: the garbage collector removes the ConfigMap with its job regardless."""
        from kubernetes.client.exceptions import ApiException  # deferred: see _api

        if not self.created:
            return False
        try:
            self._api().delete_namespaced_config_map(self.name, self.namespace)
            return True
        except Exception as exc:  # the trial's outcome stands whatever happens here
            if not (isinstance(exc, ApiException) and exc.status == 404):
                log.warning("live threshold: could not delete ConfigMap %s/%s (%s); it goes with its job",
                            self.namespace, self.name, exc)  # fmt: skip
            return False
