"""What the train step is asked for, declared once: `TrialRequest`, whose fields are the train component's
parameters, the launch settings' pipeline run parameters and the DAG's wiring of every attempt's train task.

Each field is a `request_field(help, default, wired=...)`: its name, type and default are the component
parameter's (components/train.py generates the component from them, as components/preprocess.py does from
the JobSpec), its help the description the KFP UI shows, and `wired` says where the pipeline takes its
value from: a pipeline run parameter (its own pipeline parameter, with this help), an output of the
attempt's bandit step or of preprocess, or the attempt's number. pipelines/dag.py reads that to bind every
attempt's train task, and zeus_kfp.steps.train.train receives the request as one value. So a new launch
setting is one field here, and tests/test_trial_request.py fails when the component, the pipeline or the
step drifts from the declaration.

Why the same `setting(...)` metadata as the job's settings (zeus_kfp.settings): the help and the type travel
the same way (KFP parameter types, descriptions), so one reader (`settings_of`) serves both; the wiring is
the one thing a job setting does not have, kept under its own key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from enum import Enum
from typing import Any

from zeus_kfp.launch.config import DEFAULT_RUNTIME
from zeus_kfp.settings import SETTING, Setting, SettingField, settings_of

WIRED = "zeus.wired"  # the key of a request field's Wired in its dataclass metadata


class Source(Enum):
    """Where the pipeline takes a train input from."""

    RUN = "run"  # a pipeline run parameter: any run may set it
    PREPROCESS = "preprocess"  # an output of the recurrence's preprocess step
    BANDIT = "bandit"  # an output of the attempt's bandit step
    ATTEMPT = "attempt"  # the attempt's number, fixed when the pipeline is compiled


@dataclass(frozen=True)
class Wired:
    """Where a request field comes from in the pipeline: `source`, under `name` there when it is not the
    field's (the run parameter train_command is train's `command`; bandit's trial_seed is its `seed`)."""

    source: Source
    name: str = ""


def request_field(help: str, default: Any = MISSING, *, source: Source, name: str = "") -> Any:
    """A TrialRequest field: its help and where the pipeline takes it from (`default` omitted: required)."""
    return dataclasses.field(default=default, metadata={SETTING: Setting(help), WIRED: Wired(source, name)})


@dataclass(frozen=True, kw_only=True)
class TrialRequest:
    """One trial as the pipeline asks the train step for it, the values as KFP passes them (a threshold as
    its float parameter, -1.0 for none; the job as JSON). Fields without a default are required."""

    spec_json: str = request_field("The job's JobSpec as JSON (preprocess's output).", source=Source.PREPROCESS)
    batch_size: int = request_field("The batch size the bandit chose.", source=Source.BANDIT)
    cost_threshold: float = request_field(
        "The early-stop cost threshold in joules; negative for none.", source=Source.BANDIT
    )
    command: list[str] = request_field(  # noqa: RUF009  (a dataclasses.field, as setting(...) is)
        "The training command, with placeholders {python}, {batch_size}, {data_dir}, {log_dir}, {work_dir}.",
        source=Source.RUN,
        name="train_command",
    )
    zeus_aware: bool = request_field(
        "The script uses ZeusDataLoader (false: a plain script, its metrics collected).", source=Source.RUN
    )
    metric_pattern: str = request_field(
        "A plain script's metric regex: groups name and value, or named groups name, value and epoch or step "
        '("" for Katib\'s name=value).',
        source=Source.RUN,
    )
    keep: str = request_field(
        "Files the script saves that the trial keeps as its Model artifact: comma-separated globs relative to its "
        "work directory, e.g. 'checkpoints/*.pt' (\"\": {log_dir}/model.pt).",
        "",
        source=Source.RUN,
    )
    metrics_collector: str = request_field(
        'A plain script\'s Katib-style metricsCollectorSpec, JSON or YAML ("" for stdout).', source=Source.RUN
    )
    trial_backend: str = request_field(
        '"script" (run the training command) or "trace:<workload>/<gpu>" (replay the NSDI\'23 trace).',
        source=Source.RUN,
    )
    seed: int = request_field(
        "The trial's own seed (ZEUS_SEED for the script).", source=Source.BANDIT, name="trial_seed"
    )
    launcher: str = request_field(
        "Where a trial runs: local, torchrun, trainjob or pytorchjob (zeus_kfp.launch).", "local", source=Source.RUN
    )
    num_nodes: int = request_field("Nodes a cluster trial runs on.", 1, source=Source.RUN)
    gpus_per_node: int = request_field("GPUs (processes) per node of a trial.", 1, source=Source.RUN)
    trainjob_runtime: str = request_field("The TrainJob's ClusterTrainingRuntime.", DEFAULT_RUNTIME, source=Source.RUN)
    store_uri: str = request_field(
        "Where the store is: a directory, file:// or s3://bucket/prefix (a cluster trial's pods hand their "
        "result back through it).",
        "",
        source=Source.RUN,
    )
    policy: str = request_field(
        "The batch-size policy (zeus_kfp.policy); a running trial follows its early-stop rule (the live threshold).",
        "default",
        source=Source.RUN,
    )
    recurrence_id: str = request_field(
        "The trial's recurrence (labels a cluster trial's job).", "", source=Source.PREPROCESS
    )
    attempt: int = request_field("The trial's attempt (labels it too).", 1, source=Source.ATTEMPT)


def wired(field: SettingField, request_cls: type[TrialRequest] = TrialRequest) -> Wired:
    """Where the pipeline takes `field` (a setting of `request_cls`) from, its name there filled in."""
    found = next(f for f in dataclasses.fields(request_cls) if f.name == field.name).metadata[WIRED]
    return Wired(found.source, found.name or field.name)


def request_fields(request_cls: type[TrialRequest] = TrialRequest) -> tuple[SettingField, ...]:
    """The request's fields in declaration order (zeus_kfp.settings.settings_of); every one must say where it is
    wired from, or the pipeline could not bind it."""
    for f in dataclasses.fields(request_cls):
        if WIRED not in f.metadata:
            raise TypeError(f"{request_cls.__name__}.{f.name} is declared without request_field(...): say its source")
    return settings_of(request_cls)


def run_parameters(request_cls: type[TrialRequest] = TrialRequest) -> tuple[tuple[str, SettingField], ...]:
    """(pipeline parameter name, field) of every field the pipeline takes from a run parameter."""
    return tuple(
        (wired(f, request_cls).name, f)
        for f in request_fields(request_cls)
        if wired(f, request_cls).source is Source.RUN
    )
