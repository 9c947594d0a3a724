"""Mutation tests for pipelines/compat.py: each hazard rule catches a pipeline that deliberately
trips it, on the backends the hazard hits, and stays quiet on a backend that fixed it and on the
same pipeline without the fault. The pipelines are real kfp pipelines, compiled by kfp."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.

import dataclasses

import pytest
import yaml
from kfp import compiler, dsl

from zeus_kfp.pipelines import backends
from zeus_kfp.pipelines.compat import RULES, check
from zeus_kfp.pipelines.compile import IncompatiblePipelineError, compile_pipeline

IMAGE = "python:3.11-slim"


@dsl.component(base_image=IMAGE)
def step(x: int) -> int:
    return x


@dsl.component(base_image=IMAGE)
def positive(x: int) -> bool:
    return x > 0


@dsl.pipeline
def inner(x: int) -> int:
    return step(x=x).set_caching_options(False).output


def compiled(pipeline, tmp_path) -> list[dict]:
    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(pipeline, str(path))
    return list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))


def hazards(docs, version) -> list[tuple[int, str]]:
    return sorted((v.hazard, v.task) for v in check(docs, version))


def test_every_hazard_1_to_8_has_a_rule_citing_its_upstream():
    assert sorted(RULES) == list(range(1, 9))
    for rule in RULES.values():
        assert "kubeflow/pipelines#" in rule.upstream or "no upstream issue filed" in rule.upstream, rule.hazard


@pytest.mark.parametrize("cached", [True, False])
def test_hazard_1_cached_task_inside_a_condition(tmp_path, cached):
    @dsl.pipeline
    def pipeline(x: int = 1):
        gate = positive(x=x).set_caching_options(False)
        with dsl.If(gate.output == True):  # noqa: E712
            step(x=x).set_caching_options(cached)
        with dsl.Else():
            step(x=x).set_caching_options(False)

    docs = compiled(pipeline, tmp_path)
    expected = [(1, "step")] if cached else []
    assert hazards(docs, (2, 17, 0)) == hazards(docs, (2, 5, 0)) == expected


def test_hazard_2_sub_pipeline_inside_a_condition(tmp_path):
    @dsl.pipeline
    def pipeline(x: int = 1):
        gate = positive(x=x).set_caching_options(False)
        with dsl.If(gate.output == True):  # noqa: E712
            inner(x=x)

    docs = compiled(pipeline, tmp_path)
    assert hazards(docs, (2, 15, 0)) == hazards(docs, (2, 5, 0)) == [(2, "inner")]
    assert hazards(docs, (2, 17, 0)) == [], "fixed by kubeflow/pipelines#13322 in 2.17.0"


def test_hazard_3_secret_optional_on_backends_that_do_not_know_it(tmp_path):
    """kfp-kubernetes 2.17 writes secretAsEnv.optional; the 2.17 compile keeps it, and it is wrong
    for 2.14 (run refused), 2.4 (driver fails) and 2.5 (unknown field)."""
    path = compile_pipeline(tmp_path / "p.yaml", kfp_backend="2.17", attempts=1, minio_secret="kfp-secret")
    docs = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
    with_the_secret = [  # the store steps, and train (it reads a cluster trial's result from the store)
        "exec-attempt-1-bandit",
        "exec-attempt-1-feedback",
        "exec-attempt-1-train",
        "exec-gate",
        "exec-preprocess",
        "exec-report-after-attempt-1",
    ]
    for version in ((2, 14, 3), (2, 4, 0), (2, 5, 0)):
        assert [t for h, t in hazards(docs, version) if h == 3] == with_the_secret, version
    assert [t for h, t in hazards(docs, (2, 15, 0)) if h == 3] == []
    fixed = compile_pipeline(tmp_path / "q.yaml", kfp_backend="2.5", attempts=1, minio_secret="kfp-secret")
    assert check(list(yaml.load_all(fixed.read_text(), Loader=yaml.CSafeLoader)), (2, 5, 0)) == []


@pytest.mark.parametrize("consumed", [True, False])
def test_hazard_4_display_name_on_a_consumed_task(tmp_path, consumed):
    @dsl.pipeline
    def pipeline(x: int = 1):
        first = step(x=x).set_caching_options(False).set_display_name("first step")
        second = step(x=first.output if consumed else x).set_caching_options(False)
        second.after(first)

    docs = compiled(pipeline, tmp_path)
    assert hazards(docs, (2, 5, 0)) == ([(4, "step")] if consumed else [])
    assert hazards(docs, (2, 15, 0)) == [], "fixed by kubeflow/pipelines#11938 and #12061 after 2.5.0"


def test_hazard_4_if_name_on_a_condition_whose_output_is_consumed(tmp_path):
    """dsl.If(name=...) renames the condition task; consuming a OneOf over it trips the rule."""

    @dsl.pipeline
    def pipeline(x: int = 1) -> int:
        gate = positive(x=x).set_caching_options(False)
        with dsl.If(gate.output == True, name="positive"):  # noqa: E712
            a = step(x=x).set_caching_options(False)
        with dsl.Else(name="not-positive"):
            b = step(x=x).set_caching_options(False)
        return dsl.OneOf(a.output, b.output)

    docs = compiled(pipeline, tmp_path)
    assert {h for h, _ in hazards(docs, (2, 5, 0))} == {4}


def test_hazard_5_sub_pipeline_output_consumed(tmp_path):
    @dsl.pipeline
    def pipeline(x: int = 1):
        sub = inner(x=x)
        step(x=sub.output).set_caching_options(False)

    docs = compiled(pipeline, tmp_path)
    assert hazards(docs, (2, 3, 0)) == [(5, "inner")]
    assert hazards(docs, (2, 4, 1)) == [], "fixed by kubeflow/pipelines#11196"


@pytest.fixture(scope="module")
def latest_docs(tmp_path_factory) -> list[dict]:
    """Our pipeline as compiled for 2.17: nested retries, the job-uuid placeholder."""
    path = compile_pipeline(tmp_path_factory.mktemp("latest") / "p.yaml", kfp_backend="2.17", attempts=2)
    return list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))


def test_hazard_6_retries_the_backend_ignores(latest_docs):
    # every store step but the gate sits in the gate's condition
    nested = ["attempt-1-bandit", "attempt-1-feedback", "attempt-2-bandit", "attempt-2-feedback", "preprocess",
              "report-after-attempt-1", "report-after-attempt-2"]  # fmt: skip
    assert [t for h, t in hazards(latest_docs, (2, 5, 0)) if h == 6] == nested
    root = ["gate"]
    assert [t for h, t in hazards(latest_docs, (2, 4, 0)) if h == 6] == sorted(nested + root)
    assert [t for h, t in hazards(latest_docs, (2, 14, 0)) if h == 6] == []


def test_hazard_7_job_uuid_placeholder(latest_docs):
    assert [t for h, t in hazards(latest_docs, (2, 4, 1)) if h == 7] == [
        "attempt-1-bandit",
        "attempt-2-bandit",
        "gate",
        "preprocess",
    ]
    assert [t for h, t in hazards(latest_docs, (2, 5, 0)) if h == 7] == []


@pytest.mark.parametrize("off", [True, False])
def test_hazard_8_caching_options_on_a_sub_pipeline(tmp_path, off):
    @dsl.pipeline
    def pipeline(x: int = 1):
        sub = inner(x=x)
        if off:
            sub.set_caching_options(False)

    docs = compiled(pipeline, tmp_path)
    assert hazards(docs, (2, 17, 0)) == ([(8, "inner")] if off else [])


def test_compile_refuses_a_pipeline_that_trips_a_hazard_of_its_target(tmp_path, monkeypatch):
    """If the backend table were wrong (2.5 said to honour nested retries), the compiled 2.5
    pipeline would carry retries 2.5 ignores: compile refuses it and writes nothing."""
    wrong = dataclasses.replace(backends.TARGETS["2.5"], retries_nested=True)
    monkeypatch.setitem(backends.TARGETS, "2.5", wrong)
    out = tmp_path / "p.yaml"
    with pytest.raises(IncompatiblePipelineError, match=r"would not run on KFP 2\.5\.0") as info:
        compile_pipeline(out, kfp_backend="2.5", attempts=2)
    assert {v.hazard for v in info.value.violations} == {6}
    assert "set_retry on a nested task" in str(info.value) and "kubeflow/pipelines#11288 -> #11908" in str(info.value)
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend", ["2.5", "2.15"])
def test_compile_refuses_what_the_backend_cannot_express(tmp_path, backend):
    with pytest.raises(backends.BackendError, match=r"invalid run_as_user=1000: allowed unset for KFP 2\.1?5"):
        compile_pipeline(tmp_path / "p.yaml", kfp_backend=backend, run_as_user=1000)
    path = compile_pipeline(tmp_path / "p.yaml", kfp_backend="2.17", run_as_user=1000)
    platform = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))[1]
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert all(cfg["securityContext"] == {"runAsUser": "1000", "runAsNonRoot": True} for cfg in executors.values())


@pytest.mark.parametrize("name", ["2.3", "3.0", "latest", "2"])
def test_unknown_backends_are_refused_naming_the_targets(tmp_path, name):
    with pytest.raises(backends.BackendError, match=r"invalid kfp_backend=.*allowed one of 2\.5, 2\.15, 2\.16, 2\.17"):
        compile_pipeline(tmp_path / "p.yaml", kfp_backend=name)
