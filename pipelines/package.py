"""What a compiled pipeline package says: the one place that reads it.

Why its own module: `upload`, `submit`, `schedule`, `doctor` and `dry-run` all act on what `compile`
wrote, never on a pipeline built again (a second build could differ in any option). They read the same
facts from it: the KFP backend it was compiled for, its run parameters and their defaults, its images,
and the train step's environment (what a cluster trial's pods inherit). A package is the YAML file
`compile` wrote, or the pipeline spec of a version the KFP API holds (`from_api`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from zeus_kfp.errors import FieldError

TARGET_MARK = re.compile(r"Compiled for KFP backend (\d+\.\d+)")


class PackageError(FieldError):
    """A file or API answer that is not a pipeline package (names the package and what it should be)."""


@dataclass(frozen=True)
class CompiledPackage:
    """A compiled pipeline: its PipelineSpec and (when it has one) its Kubernetes PlatformSpec."""

    spec: dict[str, Any]
    platform: dict[str, Any]
    source: str = ""

    @classmethod
    def read(cls, path: str | Path) -> CompiledPackage:
        where = str(path)
        if not Path(path).is_file():
            raise PackageError(
                "package",
                where,
                "an existing pipeline YAML written by `zeus-kfp compile` (upload, submit and schedule send exactly "
                "that file, and never compile one of their own)",
            )
        try:
            docs = [d for d in yaml.load_all(Path(path).read_text(), Loader=yaml.CSafeLoader) if d]
        except yaml.YAMLError as err:
            raise PackageError("package", where, f"a pipeline YAML ({' '.join(str(err).split())})") from None
        return cls._of(docs, where)

    @classmethod
    def from_api(cls, pipeline_spec: dict[str, Any], where: str) -> CompiledPackage:
        """A version's pipeline_spec as the KFP API returns it: the PipelineSpec itself, or
        {"pipeline_spec": ..., "platform_spec": ...} when the upload had a PlatformSpec."""
        if isinstance(pipeline_spec, dict) and "pipeline_spec" in pipeline_spec:
            return cls._of([pipeline_spec["pipeline_spec"], pipeline_spec.get("platform_spec") or {}], where)
        return cls._of([pipeline_spec], where)

    @classmethod
    def _of(cls, docs: list[Any], where: str) -> CompiledPackage:
        if not docs or not isinstance(docs[0], dict) or "root" not in docs[0]:
            raise PackageError("package", where, "a KFP pipeline (a PipelineSpec with a root DAG)")
        platform = docs[1] if len(docs) > 1 and isinstance(docs[1], dict) else {}
        return cls(docs[0], platform, where)

    @property
    def docs(self) -> list[dict[str, Any]]:
        return [self.spec, self.platform] if self.platform else [self.spec]

    @property
    def target(self) -> str | None:
        """The KFP backend it was compiled for (None: not compiled by zeus-kfp, or by an old one)."""
        mark = TARGET_MARK.search(self.spec.get("pipelineInfo", {}).get("description", ""))
        return mark.group(1) if mark else None

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        """The run parameters {name: {parameterType, defaultValue?, description?}}."""
        return dict(self.spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}))

    def default(self, name: str) -> Any:
        return self.parameters.get(name, {}).get("defaultValue")

    def constants(self, task: str) -> dict[str, Any]:
        """A task's constant inputs (what compile fixed, not a run parameter), wherever in the DAG it is
        (preprocess sits in the recurrence gate's condition, the gate at the root)."""
        inputs = self._task(task).get("inputs", {})
        out = {}
        for name, value in inputs.get("parameters", {}).items():
            runtime = value.get("runtimeValue", {})
            if "constant" in runtime:
                out[name] = runtime["constant"]
        return out

    def fixed_settings(self) -> dict[str, Any]:
        """The job settings compile fixed, not run parameters (max_attempts: the unrolled loop's length), as the
        gate, the one step that takes the job's settings, is handed them."""
        from zeus_kfp.job import JobSpec
        from zeus_kfp.settings import settings_of

        constants = self.constants("gate")
        fixed = [f.name for f in settings_of(JobSpec) if not f.setting.run_parameter]
        return {name: constants[name] for name in fixed if name in constants}

    def has_task(self, task: str) -> bool:
        try:
            self._executor(task)
        except PackageError:
            return False
        return True

    def _task(self, task: str) -> dict[str, Any]:
        """A task, wherever in the DAG it is ({} if none is named so)."""
        for component in [self.spec.get("root", {}), *self.spec.get("components", {}).values()]:
            found = component.get("dag", {}).get("tasks", {}).get(task)
            if found is not None:
                return found
        return {}

    def _executor(self, task: str) -> str:
        """The executor label of a task, wherever in the DAG it is (attempt tasks sit in conditions)."""
        found = self._task(task)
        if found:
            return self.spec["components"][found["componentRef"]["name"]]["executorLabel"]
        raise PackageError("package", self.source, f"a zeus-kfp pipeline with a task named {task!r}")

    def image(self, task: str) -> str:
        return self.spec["deploymentSpec"]["executors"][self._executor(task)]["container"]["image"]

    def images(self) -> dict[str, str]:
        """{executor label: image} of every step."""
        return {label: e["container"]["image"] for label, e in self.spec["deploymentSpec"]["executors"].items()}

    def env(self, task: str) -> dict[str, str]:
        """A task's plain environment variables as compiled."""
        container = self.spec["deploymentSpec"]["executors"][self._executor(task)]["container"]
        return {item["name"]: item["value"] for item in container.get("env", [])}

    def kubernetes(self, task: str) -> dict[str, Any]:
        """A task's KubernetesExecutorConfig (Secrets, tolerations, node selector, volumes, ...)."""
        executors = self.platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {})
        return dict(executors.get("executors", {}).get(self._executor(task), {}))
