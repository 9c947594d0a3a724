"""Everything the train step would refuse, checked in one place: before a local run stores anything
(pipelines.local.run_local), when a pipeline is compiled, and by the train step itself.

Why one place: a bad regex or a typo in a placeholder used to surface only inside the pipeline, after
the job's spec was stored and a trial dispatched. Checked here first, it is one line naming the
field; checked again by the train step (a cluster run's parameters may be overridden per run), it
becomes that trial's failure, recorded by feedback with the reason, and the recurrence ends: a train
step never fails on its inputs, so no trial is left `dispatched` behind it (zeus_kfp.steps.train).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zeus_kfp.errors import FieldError
from zeus_kfp.launch.config import DEFAULT_RUNTIME, LaunchConfig
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps.keep import for_launcher, keep_globs
from zeus_kfp.steps.params import PYTHON_TOKEN
from zeus_kfp.train.collectors import CollectorSpec
from zeus_kfp.train.collectors.spec import PATH_KIND_OF
from zeus_kfp.train.metrics import PATTERN_ALLOWED, MetricPatternError, compile_patterns
from zeus_kfp.train.runner import COMMAND_PLACEHOLDERS, PLAIN_KINDS_ALLOWED

PLACEHOLDER = re.compile(r"\{(\w*)\}")
COLLECTOR_PATH_PLACEHOLDERS = ("log_dir", "work_dir")
SCRIPT_SUFFIXES = (".py", ".sh")  # an argument naming a script file, checked to exist in a local run


@dataclass(frozen=True)
class TrialInputs:
    """The train step's inputs, parsed: how a plain script's metrics are collected, the trace backend
    (None: run the command) and where the trial runs."""

    collector: CollectorSpec
    backend: TraceBackend | None
    launch: LaunchConfig


def placeholders_allowed() -> str:
    return ", ".join("{" + name + "}" for name in (PYTHON_TOKEN.strip("{}"), *COMMAND_PLACEHOLDERS))


def check_command(command: Sequence[str], *, local_files: bool = False) -> None:
    """Every {placeholder} is one the train step fills; with `local_files`, every argument that names a
    script file (*.py, *.sh, no placeholder) exists, relative to this directory (a local run)."""
    if isinstance(command, str) or not command or not all(isinstance(arg, str) for arg in command):
        raise FieldError("command", command, "a non-empty list of strings (program and arguments)")
    known = {PYTHON_TOKEN.strip("{}"), *COMMAND_PLACEHOLDERS}
    for arg in command:
        unknown = [name for name in PLACEHOLDER.findall(arg) if name not in known]
        if unknown:
            raise FieldError("command", arg, f"placeholders {placeholders_allowed()} ({{{unknown[0]}}} is none)")
    if local_files:
        for arg in command:
            if arg.endswith(SCRIPT_SUFFIXES) and "{" not in arg and not Path(arg).is_file():
                raise FieldError("command", arg, f"a script file that exists ({Path(arg).resolve()} does not)")


def check_metric_pattern(pattern: str) -> None:
    if not pattern:
        return
    try:
        compile_patterns([pattern])
    except MetricPatternError as err:
        allowed = f"{PATTERN_ALLOWED}; this one: {err.why}"
        raise FieldError("metric_pattern", pattern, allowed) from None


def check_trial_inputs(
    *,
    command: Sequence[str],
    zeus_aware: bool,
    metric_pattern: str = "",
    metrics_collector: Any = "",
    trial_backend: str = "script",
    launcher: str = "local",
    num_nodes: int = 1,
    gpus_per_node: int = 1,
    runtime: str = DEFAULT_RUNTIME,
    local_files: bool = False,
    keep: str = "",
) -> TrialInputs:
    """The parsed inputs, or FieldError naming the first one the train step would refuse."""
    keep_globs(keep)
    backend = TraceBackend.parse(trial_backend)
    launch = LaunchConfig.from_params(launcher, num_nodes, gpus_per_node, runtime)
    if backend is None:
        for_launcher(keep, launcher, launch.cluster)
    check_metric_pattern(metric_pattern)
    collector = CollectorSpec.from_params(metrics_collector, metric_pattern)
    if backend is None:
        check_command(command, local_files=local_files)
        if not zeus_aware and collector.kind == "none":
            raise FieldError("metrics_collector.kind", "none", PLAIN_KINDS_ALLOWED)
        if collector.kind in PATH_KIND_OF:
            unknown = [n for n in PLACEHOLDER.findall(collector.path or "") if n not in COLLECTOR_PATH_PLACEHOLDERS]
            if unknown:
                allowed = "a path; placeholders {log_dir} and {work_dir}"
                raise FieldError("metrics_collector.source.fileSystemPath.path", collector.path, allowed)
    return TrialInputs(collector, backend, launch)
