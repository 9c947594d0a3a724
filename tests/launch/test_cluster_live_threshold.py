"""The mid-trial early stop of a cluster trial: the train step runs a TrainJob on a STAND-IN Kubernetes API server
and kubelet (no cluster is used) whose pod runs a real Zeus-aware script (test_live_threshold's: ZeusDataLoader,
torch, the simulated GPU's model clock) against a real store, and a result another recurrence writes to that
store while the trial runs reaches the pod through the trial's ConfigMap and stops it at its next epoch end.

The pod does not share the step's file system (the stand-in kubelet gives it its own directories): the only way
the threshold gets there is the step's patch of the ConfigMap, which the stand-in kubelet projects into the
directory the pod mounts (kube_configmaps.py). No sleep is a synchronisation: the script writes the concurrent
result at the end of its first epoch and waits until the file ZEUS_THRESHOLD_FILE names exists; the kubelet's
delivery is an event (the stand-in syncs the pods right after each change of a ConfigMap), not a period.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from zeus_kfp.job import TrialResult, TrialStatus
from zeus_kfp.launch.manifests import THRESHOLD_MOUNT, job_name
from zeus_kfp.launch.threshold_sink import SinkNotReady, SinkUnavailable, ThresholdConfigMap
from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE, threshold_json

from .cluster_fixtures import NAMESPACE
from .kube_api_server import Scenario, StandInServer, api_client
from .stand_in_kubelet import trainer_pod
from .test_cluster_launchers import _not_allowed_by_the_shipped_rbac
from .test_live_threshold import CONCURRENT, SPEC, _train_step
from .test_train_step import _kubeconfig

RECURRENCE = "running"
CONFIGMAP = job_name(SPEC.job_id, RECURRENCE, 1) + "-threshold"
THRESHOLD_LOGGERS = ("zeus_kfp.launch.threshold_sink", "zeus_kfp.steps.threshold_feed")


def _cluster_train_step(tmp_path: Path, api, monkeypatch, *script_args: str, launcher: str = "trainjob") -> TrialResult:
    """test_live_threshold's train step (recurrence "running", attempt 1, dispatched with no threshold), as a
    `launcher` job (one node, one rank) whose pod runs the script with the concurrent result and `script_args`."""
    api.scenario = Scenario(run_pods_in=tmp_path / "pods")
    for name, value in {
        "KUBECONFIG": str(_kubeconfig(tmp_path / "kubeconfig", api.url)),
        "ZEUS_LAUNCH_NAMESPACE": NAMESPACE,
        "ZEUS_LAUNCH_IMAGE": "ghcr.io/zeus-kfp/zeus-kfp:0.1.0",
        "ZEUS_LAUNCH_ALLOW_LOCAL_STORE": "1",  # the "pods" are processes on this machine: they share the store
        "ZEUS_LAUNCH_GPU_RESOURCE": "",
        "ZEUS_LAUNCH_PENDING_TIMEOUT_S": "600",
    }.items():
        monkeypatch.setenv(name, value)
    launch = {"launcher": launcher, "num_nodes": 1, "gpus_per_node": 1}
    return _train_step(tmp_path, str(tmp_path / "store"), CONCURRENT, *script_args, **launch)


@pytest.mark.parametrize(
    ("launcher", "trainer"), [("trainjob", "v2.3.0"), ("trainjob", "v2.1.0"), ("pytorchjob", None)]
)
def test_a_cheaper_concurrent_result_reaches_the_pods_through_the_configmap_and_stops_the_trial(
    tmp_path, monkeypatch, launcher, trainer
):
    """On each shape of pod template (Trainer v2.2+'s runtimePatches, v2.1's podTemplateOverrides, a PyTorchJob's
    Master), the mount the manifest puts there is where the kubelet delivers the threshold."""
    with StandInServer() as api:
        api.trainer = trainer or api.trainer
        result = _cluster_train_step(tmp_path, api, monkeypatch, launcher=launcher)
    assert result.status is TrialStatus.COST_EXCEEDED, result.reason
    assert result.num_epochs == 1  # epoch 1 ran; the check before epoch 2 read the threshold the kubelet delivered
    assert "(the job's early stop, moved since dispatch)" in result.reason
    # it came through the ConfigMap: the step patched it with the job's new early stop (beta 2 x 0.0015 spent)
    patched = [json.loads(data[LIVE_THRESHOLD_FILE]) for data in api.configmaps.versions(NAMESPACE, CONFIGMAP)[1:]]
    assert patched and patched[-1]["threshold"] == pytest.approx(0.003)
    (job,) = api.created  # whose pods mount it as a directory, the file ZEUS_THRESHOLD_FILE names
    assert ("podTemplateOverrides" in job["spec"]) == (trainer == "v2.1.0")  # the shape this Trainer takes
    _, pod_spec, container = trainer_pod(job)
    assert {"name": "zeus-threshold", "configMap": {"name": CONFIGMAP, "optional": True}} in pod_spec["volumes"]
    assert {"name": "zeus-threshold", "mountPath": THRESHOLD_MOUNT, "readOnly": True} in container["volumeMounts"]
    # and it is gone with the trial, deleted by the step after its job
    assert api.verbs("ConfigMap")[0] == "create" and api.verbs("ConfigMap")[-1] == "delete"
    assert not api.configmaps.objects and not api.jobs
    assert _not_allowed_by_the_shipped_rbac(api.calls) == []


def test_a_cluster_that_refuses_the_configmap_runs_the_trial_at_its_dispatched_threshold_saying_so_once(
    tmp_path, monkeypatch, caplog
):
    """RBAC without configmaps (403 on every verb): the same cheaper result, written by the pod after its first
    epoch, cannot reach it; the trial runs its 3 epochs (no dispatched threshold), and the step's log has one
    warning about it, whichever of the launcher's create and the feed's patch met the refusal first."""
    caplog.set_level(logging.WARNING)
    with StandInServer() as api:
        api.configmaps.forbidden = True
        result = _cluster_train_step(tmp_path, api, monkeypatch, "no-wait")
    assert (result.status, result.num_epochs) == (TrialStatus.NOT_REACHED, 3), result.reason
    warnings = [r for r in caplog.records if r.name in THRESHOLD_LOGGERS and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert "403" in message and CONFIGMAP in message and "deploy/rbac" in message, message
    assert not api.configmaps.versions(NAMESPACE, CONFIGMAP) and "delete" not in api.verbs("ConfigMap")
    assert not api.jobs


def test_the_configmap_sink_waits_for_its_configmap_and_gives_up_once_on_a_refusal(caplog):
    """The sink alone, against the stand-in: a write before the launcher created the ConfigMap (the feed starts
    before the job exists) is SinkNotReady, retried and unlogged; once created, owned by the job, a write sets
    the key; a Role that lets the step create but not patch makes the next write SinkUnavailable with one
    warning, and every later one too, without another; delete removes it, once."""
    caplog.set_level(logging.WARNING)
    with StandInServer() as api:
        sink = ThresholdConfigMap(NAMESPACE, CONFIGMAP, api_client(api.url))
        with pytest.raises(SinkNotReady):
            sink.write(0.5)
        owner = {"name": CONFIGMAP.removesuffix("-threshold"), "uid": "u-1", "labels": {"a": "b"}}
        job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": owner}
        sink.create(job)
        sink.write(0.25)
        assert api.configmaps.data(NAMESPACE, CONFIGMAP) == {LIVE_THRESHOLD_FILE: threshold_json(0.25)}
        assert not caplog.records
        api.configmaps.forbidden = True
        for _ in range(2):
            with pytest.raises(SinkUnavailable):
                sink.write(0.125)
        api.configmaps.forbidden = False
        assert sink.delete() is True and sink.delete() is False and not api.configmaps.objects
    assert api.verbs("ConfigMap") == ["patch", "create", "patch", "patch", "delete", "delete"]
    (warning,) = [r.getMessage() for r in caplog.records if r.name in THRESHOLD_LOGGERS]
    assert "could not patch" in warning and "403" in warning
