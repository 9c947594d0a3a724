"""Will this compiled pipeline run on that KFP backend? Rules for the hazards found by reading the
backend's driver at each release tag (hazards 1-8 of the project's BACKENDS.md), each with the
upstream issue and the backend versions it hits.

`check(docs, version)` takes the compiled YAML's documents (PipelineSpec, then the PlatformSpec)
and a backend version, and returns the violations; `zeus-kfp compile` refuses to write a
pipeline that has any for the backend it compiles for, and the test suite runs every compiled
variant through it for every target. The rules read the YAML as the backend does, not our
Python code, so they also catch what a kfp or kfp-kubernetes upgrade changes behind our back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Version = tuple[int, int, int]
PIPELINE_JOB_UUID = "{{$.pipeline_job_uuid}}"


@dataclass(frozen=True)
class TaskRef:
    """One task of the compiled pipeline, where it sits and what it is."""

    name: str
    task: dict[str, Any]
    dag_name: str  # "root" or the component holding the DAG
    kind: str  # container | condition | branches | loop | exit-handler | sub-pipeline
    in_condition: bool  # inside an If/Elif/Else branch, at any depth
    nested: bool  # not in the root DAG

    @property
    def caching_on(self) -> bool:
        return bool(self.task.get("cachingOptions", {}).get("enableCache"))


@dataclass(frozen=True)
class Violation:
    hazard: int
    task: str
    message: str

    def __str__(self) -> str:
        rule = RULES[self.hazard]
        return f"hazard {self.hazard} ({rule.title}; {rule.upstream}) at {self.task}: {self.message}"


class Pipeline:
    """The compiled documents, walked once: every task with its context."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.spec = docs[0]
        platform = docs[1] if len(docs) > 1 and docs[1] else {}
        self.executor_configs: dict[str, dict[str, Any]] = (
            platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
        )
        self.components: dict[str, dict[str, Any]] = self.spec.get("components", {})
        self.tasks: list[TaskRef] = list(self._walk("root", self.spec["root"]["dag"], False, False))
        self.by_dag: dict[str, dict[str, TaskRef]] = {}
        for ref in self.tasks:
            self.by_dag.setdefault(ref.dag_name, {})[ref.name] = ref

    def _kind(self, task: dict[str, Any]) -> str:
        ref = task.get("componentRef", {}).get("name", "")
        if "dag" not in self.components.get(ref, {}):
            return "container"
        if task.get("triggerPolicy", {}).get("condition"):
            return "condition"
        if "parameterIterator" in task or "artifactIterator" in task:
            return "loop"
        # The compiler's own names for the groups it makes (kfp.compiler.pipeline_spec_builder).
        for prefix, kind in (("comp-condition-branches-", "branches"), ("comp-exit-handler-", "exit-handler")):
            if ref.startswith(prefix):
                return kind
        if ref.startswith("comp-condition-"):
            return "condition"
        return "sub-pipeline"

    def _walk(self, dag_name: str, dag: dict[str, Any], in_condition: bool, nested: bool) -> Iterator[TaskRef]:
        for name, task in dag.get("tasks", {}).items():
            kind = self._kind(task)
            yield TaskRef(name, task, dag_name, kind, in_condition, nested)
            if kind != "container":
                child = task["componentRef"]["name"]
                yield from self._walk(child, self.components[child]["dag"], in_condition or kind == "condition", True)

    def consumed(self) -> Iterator[tuple[str, str, str]]:
        """(dag name, producer task, consumer) for every task output read in the same DAG."""
        dags = {"root": self.spec["root"]["dag"]} | {
            name: comp["dag"] for name, comp in self.components.items() if "dag" in comp
        }
        for dag_name, dag in dags.items():
            for name, task in dag.get("tasks", {}).items():
                for kind in ("parameters", "artifacts"):
                    for spec in task.get("inputs", {}).get(kind, {}).values():
                        for key in ("taskOutputParameter", "taskOutputArtifact"):
                            if key in spec:
                                yield dag_name, spec[key]["producerTask"], name
            for spec in dag.get("outputs", {}).get("parameters", {}).values():
                selectors = [spec.get("valueFromParameter", {})]
                selectors += spec.get("valueFromOneof", {}).get("parameterSelectors", [])
                for sel in selectors:
                    if "producerSubtask" in sel:
                        yield dag_name, sel["producerSubtask"], f"{dag_name} outputs"
            for spec in dag.get("outputs", {}).get("artifacts", {}).values():
                for sel in spec.get("artifactSelectors", []):
                    yield dag_name, sel["producerSubtask"], f"{dag_name} outputs"

    def executor_config(self, ref: TaskRef) -> dict[str, Any]:
        label = self.components.get(ref.task["componentRef"]["name"], {}).get("executorLabel", "")
        return self.executor_configs.get(label, {})


@dataclass(frozen=True)
class Rule:
    hazard: int
    title: str
    upstream: str
    applies: Callable[[Version], bool]
    find: Callable[[Pipeline], Iterator[tuple[str, str]]]


def _cached_in_condition(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if ref.kind == "container" and ref.in_condition and ref.caching_on:
            yield ref.name, "cached inside a condition: on a cache hit its condition DAG never completes"


def _sub_pipeline_in_condition(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if ref.kind == "sub-pipeline" and ref.in_condition:
            yield ref.name, "a sub-pipeline inside a condition: the condition DAG never reaches COMPLETE"


def _secret_optional(p: Pipeline) -> Iterator[tuple[str, str]]:
    for label, config in p.executor_configs.items():
        if any("optional" in binding for binding in config.get("secretAsEnv", [])):
            yield label, "secretAsEnv[].optional is unknown to this backend's KubernetesExecutorConfig"


def _renamed_producer(p: Pipeline) -> Iterator[tuple[str, str]]:
    for dag_name, producer, consumer in p.consumed():
        ref = p.by_dag.get(dag_name, {}).get(producer)
        shown = ref.task.get("taskInfo", {}).get("name", producer) if ref else producer
        if shown != producer:
            yield producer, f"display name {shown!r} on a task whose output {consumer} consumes"


def _sub_pipeline_output_consumed(p: Pipeline) -> Iterator[tuple[str, str]]:
    for dag_name, producer, consumer in p.consumed():
        ref = p.by_dag.get(dag_name, {}).get(producer)
        if ref is not None and ref.kind == "sub-pipeline":
            yield producer, f"a sub-pipeline's output consumed by {consumer}"


def _nested_retry(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if "retryPolicy" in ref.task and ref.nested:
            yield ref.name, "set_retry on a nested task: this backend ignores it"


def _root_retry(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if "retryPolicy" in ref.task and not ref.nested:
            yield ref.name, "set_retry on a root task: this backend ignores it"


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _job_uuid_placeholder(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if any(PIPELINE_JOB_UUID in s for s in _strings(ref.task.get("inputs", {}))):
            yield ref.name, f"{PIPELINE_JOB_UUID} arrives as the literal string"


def _caching_on_sub_pipeline(p: Pipeline) -> Iterator[tuple[str, str]]:
    for ref in p.tasks:
        if ref.kind == "sub-pipeline" and "cachingOptions" in ref.task and not ref.caching_on:
            yield ref.name, "caching turned off on a sub-pipeline task: the DAG driver never reads it"


def _below(version: Version) -> Callable[[Version], bool]:
    return lambda v: v < version


RULES: dict[int, Rule] = {
    r.hazard: r
    for r in (
        Rule(
            1,
            "cached task inside a condition",
            "no upstream issue filed; backend/src/v2/driver: a cache hit skips the launcher, which alone "
            "updates the parent DAG (then 'processing OneOf: No successful task found')",
            lambda v: True,
            _cached_in_condition,
        ),
        Rule(
            2,
            "sub-pipeline inside a condition",
            "kubeflow/pipelines#11979, fixed by #13322 in 2.17.0",
            _below((2, 17, 0)),
            _sub_pipeline_in_condition,
        ),
        Rule(
            3,
            "secretAsEnv.optional",
            "kubeflow/pipelines#12495, #12049, #11662, #12216 (driver fails <= 2.4.0, 2.14.x rejects the run, "
            "2.4.1-2.5.x ignore it; known from 2.15.0)",
            _below((2, 15, 0)),
            _secret_optional,
        ),
        Rule(
            4,
            "display name on a consumed task",
            "kubeflow/pipelines#11173, fixed by #11938 and #12061 (after 2.5.0)",
            _below((2, 6, 0)),
            _renamed_producer,
        ),
        Rule(
            5,
            "sub-pipeline output consumed",
            "kubeflow/pipelines#10039, #10041, fixed by #11196 (2.4.0)",
            _below((2, 4, 0)),
            _sub_pipeline_output_consumed,
        ),
        Rule(
            6,
            "retry policy the backend ignores",
            "kubeflow/pipelines#11288 -> #11908 (nested, 2.14.0), #9950 -> #11673 (root, 2.4.1), #14266",
            _below((2, 14, 0)),
            _nested_retry,
        ),
        Rule(
            7,
            "pipeline_job_uuid placeholder",
            "kubeflow/pipelines#11599 (resolved from 2.5.0)",
            _below((2, 5, 0)),
            _job_uuid_placeholder,
        ),
        Rule(
            8,
            "caching options on a sub-pipeline",
            "no upstream issue filed; backend/src/v2/driver: the DAG driver never reads cachingOptions",
            lambda v: True,
            _caching_on_sub_pipeline,
        ),
    )
}
# Hazard 6 has a second edge: before 2.4.1 not even a root task's retry policy is applied.
_ROOT_RETRY = Rule(6, RULES[6].title, RULES[6].upstream, _below((2, 4, 1)), _root_retry)


def check(docs: list[dict[str, Any]], version: Version) -> list[Violation]:
    """Every hazard this compiled pipeline trips on a backend of `version`; [] when it will run."""
    pipeline = Pipeline(docs)
    out = []
    for rule in (*RULES.values(), _ROOT_RETRY):
        if rule.applies(version):
            out.extend(Violation(rule.hazard, where, what) for where, what in rule.find(pipeline))
    return out
