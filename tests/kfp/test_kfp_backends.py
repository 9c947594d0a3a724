"""Will the compiled pipeline run on the KFP backends people have (2.5, 2.15, 2.16, 2.17)?

Every compiled variant (default; attempts 1..8; gpus 0, 1, 8; with and without the Secret) is
compiled once per target (module-scoped) and must (a) parse strictly against that backend's own
protos (tests/kfp/protos, see backend_protos.py) and (b) trip none of the hazard rules of
pipelines/compat.py for that backend. The shape itself is checked here too: no OneOf, no
sub-pipeline, no display name, nothing cached, at most 3 pods per attempt, and exactly one report.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from backend_protos import load_schema

from zeus_kfp.pipelines.backends import TARGETS
from zeus_kfp.pipelines.compat import Pipeline, check
from zeus_kfp.pipelines.compile import compile_pipeline

# Each attempt count once, each GPU count and Secret setting several times (9 variants, not 48), and a cluster launcher.
VARIANTS = (
    {"default": {}}
    | {
        f"attempts={k}-gpus={[0, 1, 8][k % 3]}-{'secret' if k % 2 else 'nosecret'}": {
            "attempts": k,
            "gpus": [0, 1, 8][k % 3],
            **({"minio_secret": "mlpipeline-minio-artifact"} if k % 2 else {}),
        }
        for k in range(1, 9)
    }
    | {  # a train step that launches its trials as jobs, with what its pods inherit
        "launcher=trainjob-pull-secret-node-selector": {
            "launcher": "trainjob",
            "image_pull_secrets": ["regcred"],
            "train_node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "minio_secret": "mlpipeline-minio-artifact",
        }
    }
)
CASES = [(target, variant) for target in TARGETS for variant in VARIANTS]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[tuple[str, str], list[dict]]:
    """Every (target, variant) compiled once for the whole module."""
    root = tmp_path_factory.mktemp("compiled")
    out = {}
    for target, variant in CASES:
        path = compile_pipeline(root / f"{target}-{variant}.yaml", kfp_backend=target, **VARIANTS[variant])
        out[(target, variant)] = list(yaml.load_all(Path(path).read_text(), Loader=yaml.CSafeLoader))
    return out


@pytest.fixture(scope="module")
def schemas(tmp_path_factory):
    work = tmp_path_factory.mktemp("protoc")
    return {name: load_schema(backend.release, work) for name, backend in TARGETS.items()}


def test_variants_cover_every_attempt_count_gpu_count_and_secret_setting():
    assert sorted(v.get("attempts", 5) for v in VARIANTS.values()) == [1, 2, 3, 4, 5, 5, 5, 6, 7, 8]
    assert {v.get("gpus", 1) for v in VARIANTS.values() if "launcher" not in v} == {0, 1, 8}
    assert {"minio_secret" in v for v in VARIANTS.values()} == {True, False}


@pytest.mark.parametrize(("target", "variant"), CASES)
def test_parses_strictly_against_the_targets_protos(compiled, schemas, target, variant):
    assert schemas[target].problems(compiled[(target, variant)]) == []


@pytest.mark.parametrize(("target", "variant"), CASES)
def test_trips_no_hazard_of_its_target(compiled, target, variant):
    assert check(compiled[(target, variant)], TARGETS[target].version) == []


def test_the_schema_check_can_fail(compiled, schemas):
    """The 2.17 pipeline with the Secret carries secretAsEnv.optional, which 2.5 does not know:
    the strict parse must say so (and the 2.5 compile drops the field, as the test above shows)."""
    docs = compiled[("2.17", "attempts=1-gpus=1-secret")]
    problems = schemas["2.5"].problems(docs)
    assert problems and all('no field named "optional"' in p for p in problems)
    assert len(problems) == sum(1 for cfg in docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
                                if "secretAsEnv" in cfg)  # fmt: skip


def _executor_labels(docs) -> list[str]:
    return sorted(docs[0]["deploymentSpec"]["executors"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_at_most_three_pods_per_attempt_and_one_report_per_recurrence(compiled, variant):
    """Pods on a cluster = executors run. Per attempt: bandit, train, feedback; per recurrence:
    gpu-power, the gate, preprocess and one report, whichever attempt it follows."""
    docs = compiled[("2.5", variant)]
    attempts = VARIANTS[variant].get("attempts", 5)
    labels = _executor_labels(docs)
    per_attempt = {k: [lb for lb in labels if lb.startswith(f"exec-attempt-{k}-")] for k in range(1, attempts + 1)}
    assert all(len(v) == 3 for v in per_attempt.values()), per_attempt
    assert {re.sub(r"^exec-attempt-\d+-", "", lb) for v in per_attempt.values() for lb in v} == {
        "bandit",
        "train",
        "feedback",
    }
    reports = [lb for lb in labels if lb.startswith("exec-report-after-attempt-")]
    assert len(reports) == attempts
    root = ["exec-gate", "exec-gpu-power", "exec-preprocess"]
    assert sorted(labels) == sorted([*root, *reports, *(lb for v in per_attempt.values() for lb in v)])


def _branches(pipeline: Pipeline) -> dict[str, str]:
    """Task name -> the condition it runs under ('' at the root), following the compiled DAG."""
    under: dict[str, str] = {}

    def walk(dag_name: str, dag: dict, condition: str) -> None:
        for name, task in dag.get("tasks", {}).items():
            ref = task["componentRef"]["name"]
            here = task.get("triggerPolicy", {}).get("condition", condition)
            under[name] = here
            if "dag" in pipeline.components.get(ref, {}):
                walk(ref, pipeline.components[ref]["dag"], here)

    walk("root", pipeline.spec["root"]["dag"], "")
    return under


def test_the_report_runs_once_after_the_last_attempt_that_ran(compiled):
    """Attempt k+1 runs under 'attempt k not reached'; report k under its negation (the Else);
    the last attempt's report unconditionally after it. So exactly one report runs."""
    docs = compiled[("2.17", "attempts=4-gpus=1-nosecret")]
    under = _branches(Pipeline(docs))
    for k in (1, 2, 3):
        reached = f"inputs.parameter_values['pipelinechannel--attempt-{k}-feedback-Output'] == false"
        assert under[f"attempt-{k + 1}-bandit"] == reached
        assert under[f"report-after-attempt-{k}"] == f"!({reached})"
    last = "inputs.parameter_values['pipelinechannel--attempt-3-feedback-Output'] == false"
    assert under["report-after-attempt-4"] == under["attempt-4-feedback"] == last
    opened = "inputs.parameter_values['pipelinechannel--gate-Output'] == true"
    assert under["attempt-1-bandit"] == under["preprocess"] == opened  # all after the gate, if it opened one
    assert under["gate"] == ""


@pytest.mark.parametrize("target", list(TARGETS))
def test_shape_has_no_oneof_sub_pipeline_display_name_or_cached_task(compiled, target):
    docs = compiled[(target, "default")]
    pipeline = Pipeline(docs)
    kinds = {ref.kind for ref in pipeline.tasks}
    assert kinds <= {"container", "condition", "branches"}, kinds
    assert "valueFromOneof" not in yaml.safe_dump(docs[0])
    assert all(ref.task["taskInfo"]["name"] == ref.name for ref in pipeline.tasks)
    containers = [ref for ref in pipeline.tasks if ref.kind == "container"]
    assert len(containers) == 3 + 5 * 3 + 5  # gpu-power, gate, preprocess, 5 x (bandit, train, feedback), 5 reports
    assert not any(ref.caching_on for ref in containers)


def test_retries_only_where_the_backend_honours_them(compiled):
    """2.5 ignores set_retry on nested tasks, so only root store steps carry one there: the gate (every other
    store step sits in its condition)."""
    for target in TARGETS:
        pipeline = Pipeline(compiled[(target, "default")])
        retried = {ref.name for ref in pipeline.tasks if "retryPolicy" in ref.task}
        root_store = {"gate"}
        store_steps = {
            r.name for r in pipeline.tasks if r.kind == "container" and "-train" not in r.name and r.name != "gpu-power"
        }
        assert retried == (store_steps if TARGETS[target].retries_nested else root_store), target


def test_targets_differ_only_in_what_the_backend_needs(compiled):
    """The 2.15, 2.16 and 2.17 pipelines are the 2.5 one plus nested retries and secretAsEnv.optional,
    a different store endpoint for 2.16 and 2.17 (SeaweedFS) and the target named in the description: same
    tasks, wiring and conditions. So the
    end-to-end kfp.local run of the 2.5 YAML (test_kfp_e2e_compiled) speaks for the others."""

    def normalized(docs):
        spec = yaml.safe_load(yaml.safe_dump(docs[0]))
        dags = [spec["root"]["dag"]] + [c["dag"] for c in spec["components"].values() if "dag" in c]
        for dag in dags:
            for task in dag["tasks"].values():
                task.pop("retryPolicy", None)
        for executor in spec["deploymentSpec"]["executors"].values():
            executor["container"].pop("env", None)
        spec["sdkVersion"] = None
        spec["pipelineInfo"]["description"] = spec["pipelineInfo"]["description"].split(" Compiled for")[0]
        return spec

    base = normalized(compiled[("2.5", "attempts=7-gpus=1-secret")])
    for target in ("2.15", "2.16", "2.17"):
        assert normalized(compiled[(target, "attempts=7-gpus=1-secret")]) == base, target
