"""The compiled default store names no namespace: every step reads its pod's own at run time.

One compiled (and, on a cluster, uploaded and shared) pipeline, run from two namespaces, keeps two
histories under two prefixes, each the one that namespace's key may use. The compiled YAML runs through
kfp.local (trace-backed trials: seconds), with the pod's namespace given as the downward API would give it
($ZEUS_NAMESPACE); a step that did not resolve "{namespace}" would write under a literal "{namespace}".
"""

from __future__ import annotations

import pytest
from kfp import components

from zeus_kfp.job import JobSpecError
from zeus_kfp.pipelines.compile import DEFAULT_STORE_URI, compile_pipeline
from zeus_kfp.pipelines.local import run_recurrence
from zeus_kfp.pipelines.package import CompiledPackage
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import spec_to_params
from zeus_kfp.steps.params import resolve_store_uri
from zeus_kfp.store import open_store


def test_the_compiled_default_store_names_no_namespace(tmp_path, monkeypatch):
    monkeypatch.setenv("KFP_NAMESPACE", "the-compiling-machines-namespace")
    path = compile_pipeline(tmp_path / "p.yaml", attempts=1)
    package = CompiledPackage.read(path)
    assert package.default("store_uri") == DEFAULT_STORE_URI == "s3://mlpipeline/private/{namespace}/zeus-kfp"
    assert "the-compiling-machines-namespace" not in path.read_text()
    labels = package.images()  # every step's executor
    platform = package.platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for label in labels:
        fields = platform[label].get("fieldPathAsEnv", [])
        assert {"name": "ZEUS_NAMESPACE", "fieldPath": "metadata.namespace"} in fields, label


def test_outside_a_pod_the_placeholder_is_refused_naming_the_store(tmp_path, monkeypatch):
    import zeus_kfp.launch.config

    account = tmp_path / "serviceaccount-namespace"
    monkeypatch.setattr(zeus_kfp.launch.config, "SERVICE_ACCOUNT_NAMESPACE", str(account))  # no such file: no pod
    with pytest.raises(JobSpecError) as err:
        resolve_store_uri("s3://mlpipeline/private/{namespace}/zeus-kfp", {})
    assert err.value.field == "store_uri" and "ZEUS_NAMESPACE" in str(err.value)
    assert resolve_store_uri("s3://b/p", {}) == "s3://b/p"
    assert resolve_store_uri("s3://b/{namespace}/p", {"ZEUS_NAMESPACE": "team-a"}) == "s3://b/team-a/p"
    account.write_text("team-c\n")  # a pod without the downward API variable: its service account says
    assert resolve_store_uri("s3://b/{namespace}/p", {}) == "s3://b/team-c/p"


@pytest.mark.slow
def test_one_compiled_pipeline_keeps_each_namespaces_history_apart(tmp_path, monkeypatch):
    path = compile_pipeline(tmp_path / "p.yaml", kfp_backend="2.15", attempts=1, gpus=0, store_retries=0)
    pipeline = components.load_component_from_file(str(path))
    trace = TraceBackend("cifar100", "v100")
    spec = trace.spec("shared-job", max_attempts=1)
    params = spec_to_params(spec)
    params.pop("max_attempts")
    template = str(tmp_path / "stores" / "{namespace}" / "zeus-kfp")
    arguments = dict(params, store_uri=template, trial_backend=trace.name, preprocess_ref="")
    for namespace, n in (("team-a", 0), ("team-b", 0), ("team-a", 1)):
        monkeypatch.setenv("ZEUS_NAMESPACE", namespace)  # what metadata.namespace gives each step's pod
        run_recurrence(
            pipeline,
            dict(arguments, recurrence_id=f"{namespace}-{n}"),
            outputs_dir=tmp_path / "runs" / f"{namespace}-{n}",
            log_path=tmp_path / "runs" / f"{namespace}-{n}.log",
        )
    assert sorted(p.name for p in (tmp_path / "stores").iterdir()) == ["team-a", "team-b"]
    a = open_store(str(tmp_path / "stores" / "team-a" / "zeus-kfp")).trials("shared-job")
    b = open_store(str(tmp_path / "stores" / "team-b" / "zeus-kfp")).trials("shared-job")
    assert sorted(set(a["recurrence_id"])) == ["team-a-0", "team-a-1"] and list(a["recurrence"].unique()) == [1, 2]
    assert sorted(set(b["recurrence_id"])) == ["team-b-0"] and list(b["recurrence"].unique()) == [1]
    assert a["finished"].all() and b["finished"].all()  # feedback wrote to the same prefix bandit dispatched in
