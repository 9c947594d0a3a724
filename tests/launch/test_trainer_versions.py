"""Kubeflow Trainer v2.1 (what Kubeflow 1.11 ships) and v2.2+: the TrainJob each accepts, found from the cluster.

Against the STAND-IN API server (kube_api_server.py) playing each Trainer version's CRD (tests/data/crds):
the train step reads the version from the TrainJob schema the cluster serves (OpenAPI v3), builds that
version's shape, and its trial runs end to end, its pods found by their labels. The old failure is shown
too: a v2.2-shaped TrainJob sent to v2.1 without strict field validation is accepted with its pod template
patch dropped, so its pods carry no label the step could find them by.
"""

from __future__ import annotations

import io

import pytest

from zeus_kfp.job import TrialResult, TrialStatus
from zeus_kfp.launch.cluster import run_cluster_trial
from zeus_kfp.launch.kube import KubeJobs, LaunchSetupError
from zeus_kfp.launch.manifests import KINDS, LABEL_PREFIX, job_name, manifest
from zeus_kfp.launch.trainer_api import TrainerApiError, api_of_crd, detect

from . import crds
from .cluster_fixtures import COMMAND, NAMESPACE, SPEC, launch_config, rank0_hands_over
from .kube_api_server import Scenario, StandInServer, api_client
from .kube_objects import StandInJob, pods_of

EXPECTED = {"v2.1.0": "v2.1", "v2.2.0": "v2.2", "v2.3.0": "v2.2"}


@pytest.mark.parametrize("trainer", crds.TRAINER_VERSIONS)
def test_the_trainjob_shape_is_read_from_the_clusters_schema(trainer):
    assert api_of_crd(crds.crd("TrainJob", trainer)) == EXPECTED[trainer]
    with StandInServer() as api:
        api.trainer = trainer
        assert detect(api_client(api.url)) == EXPECTED[trainer]
    assert api.calls == [("openapi", "trainer.kubeflow.org/v1alpha1")]  # a document every client may read


def test_a_cluster_without_trainer_v2_says_so():
    with StandInServer() as api:
        api.installed = ("PyTorchJob",)
        with pytest.raises(TrainerApiError, match="is Kubeflow Trainer v2 installed"):
            detect(api_client(api.url))


def _finished() -> TrialResult:
    figures = {"time_s": 100.0, "energy_j": 200_000.0, "num_epochs": 2, "power_limit_w": 500.0, "metric": 0.93}
    return TrialResult.build(SPEC, batch_size=64, status=TrialStatus.REACHED, source="measured (nvml)", **figures)


@pytest.mark.parametrize("trainer", crds.TRAINER_VERSIONS)
def test_a_trainjob_trial_runs_on_every_trainer_version(tmp_path, trainer):
    """Each version gets its own shape, its pods are found (the master's log is streamed) and the result is read;
    the job is bounded on every version (activeDeadlineSeconds from v2.2, the pod command's deadline always)."""
    finished = _finished()
    out = io.StringIO()
    with StandInServer() as api:
        api.trainer = trainer
        api.scenario = Scenario(log=("epoch=2 accuracy=0.93",), on_end=rank0_hands_over(finished))
        outcome = run_cluster_trial(
            launch_config("trainjob", timeout_s=7200.0),
            SPEC,
            batch_size=64,
            cost_threshold=None,
            command=list(COMMAND),
            store_uri=str(tmp_path / "store"),
            recurrence_id="run-1",
            attempt=1,
            work_dir=tmp_path / "work",
            api_client=api_client(api.url),
            out=out,
        )
    (created,) = api.created
    assert crds.errors(created, trainer) == []
    spec = created["spec"]
    if trainer == "v2.1.0":
        assert "runtimePatches" not in spec and "activeDeadlineSeconds" not in spec
        (override,) = spec["podTemplateOverrides"]
        assert override["targetJobs"] == [{"name": "node"}]
    else:
        assert "podTemplateOverrides" not in spec and spec["activeDeadlineSeconds"] == 7200
    env = {e["name"]: e.get("value") for e in spec["trainer"]["env"]}
    assert env["ZEUS_TRIAL_DEADLINE_S"] == "7200"
    assert "epoch=2 accuracy=0.93" in out.getvalue()  # the pods were found by their labels
    assert outcome.result.status is TrialStatus.REACHED


def test_the_v2_2_shape_on_a_v2_1_cluster_loses_its_pod_labels_unless_validated_strictly(tmp_path):
    """The failure Kubeflow 1.11 users met: without strict validation the API server keeps the TrainJob and
    drops runtimePatches, so the pods get none of the step's labels. The launcher creates strictly: the same
    mismatch (a wrong ZEUS_LAUNCH_TRAINER_API, say) is a clear setup error naming the field instead."""
    from .test_manifests import HANDOFF, trial

    body = manifest(trial("trainjob", trainer_api="v2.2"), job_name(SPEC.job_id, "run-1", 1), NAMESPACE)
    with StandInServer() as api:
        api.trainer = "v2.1.0"
        jobs = KubeJobs(KINDS["trainjob"], NAMESPACE, api_client(api.url))
        jobs.custom.create_namespaced_custom_object(*jobs._where, body)  # the client's default: no fieldValidation
        (stored,) = api.created
        assert "runtimePatches" not in stored["spec"] and "activeDeadlineSeconds" not in stored["spec"]
        pods = pods_of(StandInJob(stored, api.scenario))
        assert pods and all(f"{LABEL_PREFIX}run" not in p["metadata"]["labels"] for p in pods)
        assert jobs.pods(HANDOFF.run) == []  # what the step saw: no pods, until its pending timeout failed the trial

        body["metadata"]["name"] += "-strict"
        with pytest.raises(LaunchSetupError, match=r"422.*runtimePatches"):
            jobs.create(body)
