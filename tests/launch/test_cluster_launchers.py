"""The cluster launchers (TrainJob, PyTorchJob) against a STAND-IN Kubernetes API server: no cluster is used.

The launcher talks to the stand-in (kube_api_server.py, on 127.0.0.1) through the real kubernetes
client; the stand-in validates every created job against the shipped CRD schemas, plays the
operator (pods, phases, conditions, logs) and records every call. Rank 0's node is played by a
hook that publishes a result through the real store, at the handoff the job's own environment
names. The cancel and retry tests run the step as a real process, stopped as KFP stops it
(SIGTERM) or killed outright (SIGKILL).
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from zeus_kfp.job import TrialResult, TrialStatus
from zeus_kfp.launch import LaunchError
from zeus_kfp.launch.cluster import run_cluster_trial
from zeus_kfp.launch.handoff import Handoff
from zeus_kfp.launch.kube import KubeJobs, LaunchSetupError
from zeus_kfp.launch.manifests import KINDS, TrialJob, job_name, manifest
from zeus_kfp.train.artifacts import result_from_json

from .cluster_fixtures import COMMAND, NAMESPACE, PROFILE_ROWS, SPEC, launch_config, rank0_hands_over
from .kube_api_server import Scenario, StandInServer, api_client

LAUNCHERS = ("trainjob", "pytorchjob")
STEP = Path(__file__).with_name("cluster_step.py")
KIND = {"trainjob": "TrainJob", "pytorchjob": "PyTorchJob"}


def _finished(status: TrialStatus = TrialStatus.REACHED, reason: str = "") -> TrialResult:
    figures = {"time_s": 120.0, "energy_j": 250_000.0, "num_epochs": 2, "power_limit_w": 500.0, "metric": 0.93}
    return TrialResult.build(SPEC, batch_size=64, status=status, reason=reason, source="measured (nvml)", **figures)


def _run(api, tmp_path: Path, launcher: str, rid: str = "run-1", **changes):
    out = io.StringIO()
    outcome = run_cluster_trial(
        launch_config(launcher, **changes),
        SPEC,
        batch_size=64,
        cost_threshold=None,
        command=list(COMMAND),
        store_uri=str(tmp_path / "store"),
        recurrence_id=rid,
        attempt=1,
        work_dir=tmp_path / "work",
        api_client=api_client(api.url),
        out=out,
    )
    return outcome, out.getvalue()


def _first(calls: list[tuple[str, ...]], verb: str) -> int:
    return next(i for i, call in enumerate(calls) if call[0] == verb)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_create_then_watch_then_logs_then_result_then_delete(tmp_path, monkeypatch, launcher):
    finished = _finished()
    with StandInServer() as api:
        api.scenario = Scenario(
            log=("epoch=1 accuracy=0.71", "epoch=2 accuracy=0.93"), on_end=rank0_hands_over(finished)
        )
        read_result = Handoff.read_result

        def recorded_read(self):  # the real read, noted in the stand-in's call order
            api.record("result", self.run)
            return read_result(self)

        monkeypatch.setattr(Handoff, "read_result", recorded_read)
        outcome, log = _run(api, tmp_path, launcher)
    calls = api.calls
    order = [_first(calls, verb) for verb in ("create", "watch", "log", "result", "delete")]
    assert order == sorted(order), calls
    assert api.verbs(KIND[launcher]).count("create") == 1 and not api.jobs  # one job, and it is gone
    # the live threshold's ConfigMap: created once the job exists, owned by it, deleted after it
    assert api.verbs("ConfigMap") == ["create", "delete"] and not api.configmaps.objects
    assert _first(calls, "create") < calls.index(
        ("create", "ConfigMap", job_name(SPEC.job_id, "run-1", 1) + "-threshold")
    )
    (job,), (configmap,) = api.created, api.configmaps.ever
    assert configmap["metadata"]["ownerReferences"] == [
        {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
        }
    ]
    assert configmap["metadata"]["labels"] == job["metadata"]["labels"]
    assert calls[order[2]][2] == KINDS[launcher].container  # the master's trainer container
    assert "epoch=2 accuracy=0.93" in log  # the master's log, streamed into the step's log
    assert outcome.result == result_from_json(SPEC, finished.to_dict())  # rank 0's result, priced by the job
    assert outcome.profile.rows.to_dict("records") == PROFILE_ROWS
    assert outcome.model_path is not None and outcome.model_path.read_bytes() == b"weights"
    assert _not_allowed_by_the_shipped_rbac(calls) == []


RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac"
GROUPS = {
    "TrainJob": ("trainer.kubeflow.org", "trainjobs"),
    "PyTorchJob": ("kubeflow.org", "pytorchjobs"),
    "ConfigMap": ("", "configmaps"),
}


def _not_allowed_by_the_shipped_rbac(calls: list[tuple[str, ...]]) -> list[tuple[str, str, str]]:
    """The calls the stand-in saw, as (API group, resource, verb), that deploy/rbac's Role does not grant."""
    role = yaml.safe_load((RBAC / "role.yaml").read_text())
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    needed = set()
    for call in calls:
        if call[0] in ("create", "get", "watch", "delete", "patch"):
            needed.add((*GROUPS[call[1]], call[0]))
        elif call[0] == "list-pods":
            needed.add(("", "pods", "list"))
        elif call[0] == "log":
            needed.add(("", "pods/log", "get"))
        # "openapi": a non-resource URL every authenticated client may GET (system:discovery), no Role rule
    return sorted(needed - granted)


def test_the_rbac_kustomization_names_no_namespace_and_binds_the_role_where_it_is_applied():
    """`kubectl apply -k deploy/rbac -n <namespace>` puts both into that namespace; the subjects carry none, so they
    are that namespace's service accounts (a RoleBinding's subject without one is the binding's). Nothing hard-codes
    a profile: the old kustomization named kubeflow-user-example-com, which every user had to edit."""
    kustomization = yaml.safe_load((RBAC / "kustomization.yaml").read_text())
    docs = {path: yaml.safe_load((RBAC / path).read_text()) for path in kustomization["resources"]}
    role, binding = docs["role.yaml"], docs["rolebinding.yaml"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert "namespace" not in kustomization
    assert not [doc for doc in docs.values() if "namespace" in doc["metadata"]]
    assert [s for s in binding["subjects"] if "namespace" in s] == []
    assert {(s["kind"], s["name"]) for s in binding["subjects"]} == {
        ("ServiceAccount", "default-editor"),  # a Kubeflow profile's pipeline pods
        ("ServiceAccount", "pipeline-runner"),  # standalone KFP's
    }
    assert role["kind"] == "Role"  # namespaced: nothing cluster-wide


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_cancelled_step_deletes_its_job(tmp_path, launcher):
    with StandInServer() as api:
        api.scenario = Scenario(hold="Running")  # the trial runs until the step is stopped
        step = subprocess.Popen(
            [sys.executable, str(STEP), api.url, str(tmp_path / "store"), launcher, "run-c"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: "log" in api.verbs(), step)  # created, watched, its master streaming
            assert api.jobs, "the job exists while the step runs"
            step.terminate()  # what KFP does to a cancelled run's pods
            _, err = step.communicate(timeout=60)
        finally:
            step.kill()
    assert step.returncode != 0
    assert ("delete", KIND[launcher], job_name(SPEC.job_id, "run-c", 1)) in api.calls, err
    assert not api.jobs


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_retried_step_adopts_its_predecessors_job_instead_of_creating_a_second(tmp_path, launcher):
    with StandInServer() as api:
        api.scenario = Scenario(hold="Running", on_end=rank0_hands_over(_finished()))
        first = subprocess.Popen(
            [sys.executable, str(STEP), api.url, str(tmp_path / "store"), launcher, "run-r"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for(lambda: "log" in api.verbs(), first)
            first.kill()  # the step's pod is lost: no cleanup at all
            first.wait(30)
        finally:
            first.kill()
        assert len(api.jobs) == 1
        api.release()
        outcome, log = _run(api, tmp_path, launcher, rid="run-r")
    assert api.verbs(KIND[launcher]).count("create") == 1, api.calls
    assert "adopting" in log
    # the predecessor's ConfigMap is taken over (a create refused 409, then its owner set) and deleted at the end
    assert api.verbs("ConfigMap") == ["create", "create", "patch", "delete"] and not api.configmaps.objects
    assert _not_allowed_by_the_shipped_rbac(api.calls) == []
    assert outcome.result.status is TrialStatus.REACHED and outcome.result.energy_j == 250_000.0
    assert not api.jobs


def test_a_retried_step_replaces_a_job_that_runs_another_trial(tmp_path):
    name = job_name(SPEC.job_id, "run-x", 1)
    with StandInServer() as api:
        api.scenario = Scenario(hold="Pending")  # a stale job under this name, for another image: never adopted
        handoff = Handoff(str(tmp_path / "store"), SPEC.job_id, "run-x", 1, "stale0")
        stale = TrialJob(launch_config("trainjob", image="example.com/old:1"), handoff, ("python", "old.py"), {}, {})
        KubeJobs(KINDS["trainjob"], NAMESPACE, api_client(api.url)).create(manifest(stale, name, NAMESPACE))
        api.scenario = Scenario(on_end=rank0_hands_over(_finished()))
        outcome, log = _run(api, tmp_path, "trainjob", rid="run-x")
    verbs = api.verbs("TrainJob")
    assert verbs.count("create") == 2 and verbs.index("delete") < len(verbs) - 1 - verbs[::-1].index("create")
    assert "replacing" in log and outcome.result.status is TrialStatus.REACHED
    assert not api.jobs


FAILURES = {
    "stuck-pending": (
        Scenario(phases=("Pending",), message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
        {"pending_timeout_s": 0.5},
        ("stuck Pending for more than 0.5 s", "Insufficient nvidia.com/gpu"),
    ),
    "evicted": (
        Scenario(phases=("Pending", "Running", "Evicted"), message="The node was low on resource: memory."),
        {},
        ("-node-0-0 failed: Evicted: The node was low on resource: memory.",),
    ),
    "job-failed": (
        Scenario(
            phases=("Pending", "Running", "Failed"),
            message="jobset failed: node-1 exited with code 1",
            on_end=rank0_hands_over(_finished(TrialStatus.FAILED, "rank 3 failed: RuntimeError: loss is nan")),
        ),
        {},
        # the job's condition or the master pod's (whichever the launcher saw first) and rank 0's verdict
        ("jobset failed: node-1 exited with code 1", "rank 3 failed: RuntimeError: loss is nan"),
    ),
    "timeout": (Scenario(hold="Running"), {"timeout_s": 0.5}, ("timed out after 0.5 s",)),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_failures_become_recorded_failed_trials_and_the_job_is_deleted(tmp_path, case):
    scenario, changes, expected = FAILURES[case]
    with StandInServer() as api:
        api.scenario = scenario
        outcome, _ = _run(api, tmp_path, "trainjob", rid=f"run-{case}", **changes)
    assert outcome.result.status is TrialStatus.FAILED
    assert all(text in outcome.result.reason for text in expected), outcome.result.reason
    assert "delete" in api.verbs() and not api.jobs


def test_a_cluster_without_the_operator_fails_the_step_saying_what_to_check(tmp_path):
    with StandInServer() as api:
        api.installed = ("TrainJob",)  # Kubeflow 1.11 with Trainer v2 only: no PyTorchJob CRD
        with pytest.raises(LaunchSetupError, match=r"is the operator installed.*Training Operator v1 for pytorchjob"):
            _run(api, tmp_path, "pytorchjob")
    assert not api.jobs  # refused at creation: nothing runs, nothing to delete


def test_bad_cluster_settings_name_the_setting(tmp_path):
    with StandInServer() as api, pytest.raises(LaunchError) as err:
        _run(api, tmp_path, "pytorchjob", allow_local_store=False)
    assert err.value.field == "store_uri" and "s3://" in err.value.allowed
    with StandInServer() as api, pytest.raises(LaunchError) as err:
        _run(api, tmp_path, "pytorchjob", image="")
    assert err.value.field == "ZEUS_LAUNCH_IMAGE"
    assert not api.calls  # refused before any call to the cluster


def _wait_for(condition, process: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the step exited early: {process.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError("the step did not get there in time")
        time.sleep(0.05)


def test_a_missing_job_reads_as_none_and_deletes_as_already_gone():
    with StandInServer() as api:
        jobs = KubeJobs(KINDS["pytorchjob"], NAMESPACE, api_client(api.url))
        assert jobs.get("nothing-here") is None and jobs.delete("nothing-here") is False
