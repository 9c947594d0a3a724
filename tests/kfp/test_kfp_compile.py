"""The compiled YAML: what a Kubeflow cluster will run. Checked on the parsed documents, not by grep."""

import re
from pathlib import Path

import pytest
import yaml
from kfp import components

from zeus_kfp.job import JobSpec
from zeus_kfp.pipelines.compile import compile_pipeline

SPEC = JobSpec(job_id="yaml-job", batch_sizes=(8, 16, 32), default_batch_size=16, target_metric=0.9, max_epochs=3)
COMMAND = ["python", "/opt/train.py"]
STORE_STEPS = ("gate", "preprocess", "bandit", "feedback", "report")


def _compile(tmp_path, **kwargs):
    path = compile_pipeline(tmp_path / "p.yaml", spec=SPEC, command=COMMAND, **kwargs)
    docs = list(yaml.safe_load_all(path.read_text()))
    pipeline_spec = docs[0]
    platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"] if len(docs) > 1 else {}
    return path, pipeline_spec, platform


def _executors(spec, component):
    """Executor labels of one component: exec-attempt-1-train, exec-attempt-2-train, ... or
    exec-report-after-attempt-1, ..."""
    pattern = re.compile(rf"^exec-(attempt-\d+-)?{component}(-after-attempt-\d+)?$")
    return sorted(k for k in spec["deploymentSpec"]["executors"] if pattern.match(k))


def _all_tasks(spec):
    """(task name, task) across the root DAG and every sub-DAG (conditions)."""
    dags = [spec["root"]["dag"]] + [c["dag"] for c in spec["components"].values() if "dag" in c]
    return [(name, task) for dag in dags for name, task in dag["tasks"].items()]


def test_attempts_nested_in_the_previous_attempts_not_reached_branch(tmp_path):
    path, spec, _ = _compile(tmp_path, attempts=4, minio_secret="zeus-minio")
    for component in ("bandit", "train", "feedback"):
        assert len(_executors(spec, component)) == 4, component
    assert len(_executors(spec, "preprocess")) == 1
    assert len(_executors(spec, "report")) == 4, "one report per place a recurrence can end; one runs"
    conditions = [t["triggerPolicy"]["condition"] for _, t in _all_tasks(spec) if "triggerPolicy" in t]
    # everything after the gate under "the gate opened a recurrence"; attempts 2..4 under "attempt k-1 not
    # reached"; the reports 1..3 under its negation (Else)
    assert sorted(conditions) == sorted(
        ["inputs.parameter_values['pipelinechannel--gate-Output'] == true"]
        + [f"inputs.parameter_values['pipelinechannel--attempt-{k}-feedback-Output'] == false" for k in (1, 2, 3)]
        + [f"!(inputs.parameter_values['pipelinechannel--attempt-{k}-feedback-Output'] == false)" for k in (1, 2, 3)]
    )
    # the attempt budget is part of the job's spec
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    assert "max_attempts" not in inputs
    assert inputs["job_id"]["defaultValue"] == "yaml-job"
    assert inputs["batch_sizes"]["defaultValue"] == [8, 16, 32]
    loaded = components.load_component_from_file(str(path))
    assert loaded.name == "zeus-recurrence"
    assert {"job_id", "store_uri", "policy", "train_command", "recurrence_id"} <= set(loaded.component_spec.inputs)


def test_the_runs_policy_reaches_the_steps_that_use_it(tmp_path):
    """bandit decides with it, train's live threshold follows its early-stop rule, and report shows its view of
    the history; feedback stores nothing it derives."""
    _, spec, _ = _compile(tmp_path, attempts=2)
    taking = {
        name: task["inputs"]["parameters"]["policy"]
        for name, task in _all_tasks(spec)
        if "policy" in task.get("inputs", {}).get("parameters", {})
    }
    bandits, reports = [f"attempt-{k}-bandit" for k in (1, 2)], [f"report-after-attempt-{k}" for k in (1, 2)]
    trains = [f"attempt-{k}-train" for k in (1, 2)]
    assert sorted(taking) == sorted(bandits + trains + reports)
    assert {source["componentInputParameter"] for source in taking.values()} <= {"policy", "pipelinechannel--policy"}


def test_caching_off_on_every_task(tmp_path):
    _, spec, _ = _compile(tmp_path, attempts=3)
    containers = [(n, t) for n, t in _all_tasks(spec) if not n.startswith("condition-")]
    assert len(containers) == 3 + 3 * 3 + 3  # gpu-power, gate, preprocess, 3 x (bandit, train, feedback), 3 reports
    assert all(t.get("cachingOptions", {}).get("enableCache") is not True for _, t in containers)
    assert all("cachingOptions" in t for _, t in containers), "set explicitly off, not left to the backend"


@pytest.mark.parametrize(("backend", "nested_retries"), [("2.17", True), ("2.15", True), ("2.5", False)])
def test_store_steps_retry_where_the_backend_honours_it_and_train_never(tmp_path, backend, nested_retries):
    _, spec, _ = _compile(tmp_path, attempts=2, kfp_backend=backend)
    root = set(spec["root"]["dag"]["tasks"])
    for name, task in _all_tasks(spec):
        store_step = any(step in name for step in STORE_STEPS)
        if store_step and (nested_retries or name in root):
            assert task["retryPolicy"]["maxRetryCount"] == 3, name
        else:
            assert "retryPolicy" not in task, name


@pytest.mark.parametrize("gpus", [0, 2])
def test_gpu_request_on_train_only(tmp_path, gpus):
    _, spec, _ = _compile(tmp_path, attempts=2, gpus=gpus)
    for label, executor in spec["deploymentSpec"]["executors"].items():
        accelerator = executor["container"].get("resources", {}).get("accelerator")
        if ("-train" in label or label == "exec-gpu-power") and gpus:  # gpu-power reads one GPU like the trials'
            assert accelerator["resourceType"] == "nvidia.com/gpu"
            assert accelerator["resourceCount"] == (str(gpus) if "-train" in label else "1")
        else:
            assert accelerator is None, label


def test_credentials_come_from_the_secret_and_never_appear(tmp_path, monkeypatch):
    access, secret = "AKIAZEUSNEVERINYAML", "s3cr3t-never-in-yaml"
    monkeypatch.setenv("ZEUS_S3_ACCESS_KEY", access)
    monkeypatch.setenv("ZEUS_S3_SECRET_KEY", secret)
    path, spec, platform = _compile(tmp_path, attempts=2, minio_secret="zeus-minio", s3_endpoint="minio.kf:9000")
    text = path.read_text()
    assert access not in text and secret not in text
    store_execs = [e for step in STORE_STEPS for e in _executors(spec, step)]
    assert len(store_execs) == 1 + 1 + 2 + 2 + 2  # gate, preprocess, bandit and feedback per attempt, reports
    for label in store_execs:
        (binding,) = platform[label]["secretAsEnv"]
        assert binding["secretName"] == "zeus-minio"
        assert {k["envVar"] for k in binding["keyToEnv"]} == {"ZEUS_S3_ACCESS_KEY", "ZEUS_S3_SECRET_KEY"}
        env = {e["name"]: e["value"] for e in spec["deploymentSpec"]["executors"][label]["container"]["env"]}
        assert env == {"ZEUS_S3_ENDPOINT": "http://minio.kf:9000"}, "a bare host:port is http, said explicitly"
    for label in _executors(spec, "train"):
        # train reads a cluster trial's result back from the store (zeus_kfp.launch): the same Secret, by reference,
        # whose name (not its keys) the trial's pods get to reference in turn
        (binding,) = platform[label]["secretAsEnv"]
        assert binding["secretName"] == "zeus-minio"
        env = {e["name"]: e["value"] for e in spec["deploymentSpec"]["executors"][label]["container"]["env"]}
        assert env["ZEUS_S3_SECRET_NAME"] == "zeus-minio" and env["ZEUS_S3_ENDPOINT"] == "http://minio.kf:9000"
        assert {"fieldPath": "status.hostIP", "name": "ZEUSD_HOST"} in platform[label]["fieldPathAsEnv"]


def test_without_a_secret_no_platform_credentials(tmp_path):
    _, _, platform = _compile(tmp_path, attempts=2, zeusd=False)
    assert not any("secretAsEnv" in e for e in platform.values())
    namespace_only = [{"fieldPath": "metadata.namespace", "name": "ZEUS_NAMESPACE"}]  # not a credential: the pod's own
    assert all(e["fieldPathAsEnv"] == namespace_only for e in platform.values())


@pytest.mark.parametrize(("gpus", "train_image"), [(1, "registry.example/zeus-kfp:cuda"), (0, None)])
def test_image_overrides_reach_every_executor(tmp_path, gpus, train_image):
    cpu = "registry.example/zeus-kfp:cpu"
    _, spec, _ = _compile(tmp_path, attempts=2, gpus=gpus, image=cpu, train_image=train_image)
    images = {label: e["container"]["image"] for label, e in spec["deploymentSpec"]["executors"].items()}
    for label, image in images.items():
        on_train_image = "-train" in label or label == "exec-gpu-power"
        assert image == ((train_image or cpu) if on_train_image else cpu), label


@pytest.mark.parametrize(("kwargs", "field"), [({"attempts": 0}, "attempts"), ({"gpus": -1}, "gpus")])
def test_bad_compile_options_name_the_field(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=rf"invalid {field}="):
        _compile(tmp_path, **kwargs)


def test_default_job_compiles_portably(tmp_path, monkeypatch):
    """The example job's YAML names the image's copy of the script, not a path on this machine."""
    from zeus_kfp.components.image import IMAGE_EXAMPLES_DIR
    from zeus_kfp.train import example_spec

    path = compile_pipeline(tmp_path / "default.yaml", gpus=1)
    spec = yaml.safe_load_all(path.read_text()).__next__()
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    assert inputs["train_command"]["defaultValue"] == ["{python}", f"{IMAGE_EXAMPLES_DIR}/train_zeus.py"]
    assert inputs["preprocess_ref"]["defaultValue"] == "zeus_kfp.train.example:make_dataset"
    assert inputs["batch_sizes"]["defaultValue"] == list(example_spec().batch_sizes)
    assert inputs["store_uri"]["defaultValue"].startswith("s3://")
    assert str(Path.cwd()) not in path.read_text()
