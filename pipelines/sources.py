"""Writes out the source that follows the declarations: the gate and train components and the
pipeline function's signature, from the job's settings (zeus_kfp.job), the run settings (zeus_kfp.run_settings)
and the trial request (zeus_kfp.steps.request).

Why written out, and checked in: KFP needs every declared setting as a typed, described parameter, and a
lightweight component runs its function's source text, so those functions must exist as text. Built at import
(exec'd templates) that text was in no file: `def gate(` could not be found and a change showed in no
diff. Now a new setting is one field in its declaration, then `make sources` (this module); tests/test_sources.py
fails while a written-out file and its declaration differ, so the two cannot drift apart unnoticed.

    python -m pipelines.sources           # rewrite the files
    python -m pipelines.sources --check   # exit 1, naming the stale ones

This module imports no generated file, so it still runs when one is stale or broken.
"""

from __future__ import annotations

import sys
from pathlib import Path
from string import Template

from zeus_kfp.job import JobSpec
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.settings import SettingField, settings_of
from zeus_kfp.steps.params import param_type
from zeus_kfp.steps.request import TrialRequest, request_fields, run_parameters

ROOT = Path(__file__).resolve().parents[1]
HEADER = (
    "# Written out by `make sources` (pipelines/sources.py) from {declared}.\n"
    "# Edit those and run it, never this file by hand: tests/test_sources.py fails while the two differ.\n"
)

# The pipeline's run parameters that are no job setting, no run setting and no trial request field: (name, type,
# description), in the signature's order after the request's. Their defaults are each build's (pipelines/dag.py).
STEP_RUN_PARAMETERS: tuple[tuple[str, type, str], ...] = (
    ("reprofile", bool, "Profile power limits again even where a stored profile could be reused."),
    ("preprocess_ref", str, "What fills the recurrence's data: module:function or a command."),
    ("recurrence_id", str, "The recurrence's id (empty: the KFP run id)."),
    ("owner", str, "Who runs the job, recorded with it in the store."),
    ("force", bool, "Open a recurrence even if it is not due (it still counts against max_running)."),
)

# The gate takes every job setting and run setting: $settings, $settings_help and $settings_args become one line
# per JobSpec setting ($run_settings... per RunSettings setting).
GATE = '''\
"""gate: the first step of every run. Asks the store to open a recurrence of the job (zeus_kfp.steps.gate): due
by its period or by drift, and a free slot under its cap. The pipeline's other steps run only when it
opened one (its one output, pipelines/dag.py); a skipped run ends here, its reason recorded in the store.

The one step that takes the job's settings (the KFP UI shows one typed field per setting; written out from the
declaration, pipelines/sources.py says why): it registers the job or checks its spec before it asks, and the
steps after it read the spec from the store. Beside them every run setting (zeus_kfp.run_settings.RunSettings:
the period, cap, drift detector and dispatch timeout this run runs under, no part of the job's spec), and how
the script reports (train's inputs of those names), which its begin records for the job.

One output, not a NamedTuple: kfp.local (2.17) cannot resolve a named output in a condition (it reads
`gate-opened` as a parent input and skips the branch), while the single output `gate-Output` it resolves; the
reason a run was skipped is in the store, not an output.
"""

$header
from kfp import dsl

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def gate(
$settings
$run_settings
    zeus_aware: bool,
    metric_pattern: str,
    metrics_collector: str,
    keep: str,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    owner: str,
    force: bool,
) -> bool:
    """Opens a recurrence of the job, or skips this run: due (its period passed, or drift) and a free slot
    (fewer than max_running recurrences running, counted in the store).

    Args:
$settings_help
$run_settings_help
        zeus_aware: The script uses ZeusDataLoader (else a plain script whose metric train reads).
        metric_pattern: The regex train reads a plain script's metric lines with ("" for Katib's name=value).
        metrics_collector: A plain script's metrics collector, Katib's metricsCollectorSpec as JSON ("" for stdout).
        keep: The files a trial keeps as its model, globs in its work directory ("" for {log_dir}/model.pt).
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        owner: Who runs the job, recorded with it in the store.
        force: Open a recurrence even if it is not due (it still takes a slot under the cap).

    Returns:
        Whether this run is a recurrence (false: it ends here and trains nothing; the store says why).
    """
    from zeus_kfp.steps.gate import gate as step

    settings = dict(
$settings_args
    )
    run_settings = dict(
$run_settings_args
    )
    return step(
        settings,
        run_settings,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        owner=owner,
        force=force,
        reads=dict(
            zeus_aware=zeus_aware, metric_pattern=metric_pattern, metrics_collector=metrics_collector, keep=keep
        ),
    )
'''

# $required and $optional become one parameter per request field (those without a default, then those with
# one: Python wants them in that order); $fields_help a line of Args each, $fields_args an argument each.
TRAIN = '''\
"""train: one trial of the user's training script at the bandit's batch size, with just-in-time
power-limit profiling. Touches the store only to read back a cluster trial's result (launcher trainjob or
pytorchjob); its result feeds the feedback step.

Every field of the declared trial request (zeus_kfp.steps.request.TrialRequest) is a typed, described parameter,
written out from the declaration (pipelines/sources.py), and the body hands the step the request as one value.
tests/test_trial_request.py compares the component with the declaration.

Its outputs: the trial's result as JSON (what feedback records), the power profile it measured, the model,
the trial's log, and a Metrics artifact (energy, time, cost, epochs, ...): the KFP UI shows it beside the
step, and benchmarks/pipeline.py reads its wall_s and script_cpu_s. Nothing else: the result's scalars as
separate outputs were read by no step.
"""

$header
from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

from zeus_kfp.components.artifacts import PowerProfile
from zeus_kfp.components.image import LOCAL_TRAIN_IMAGE


@dsl.component(base_image=LOCAL_TRAIN_IMAGE, install_kfp_package=False)
def train(
$required
    data: Input[Dataset],
    reuse_profile: Input[Dataset],
    profile: Output[PowerProfile],
    metrics: Output[Metrics],
    model: Output[Model],
    trial_log: Output[Artifact],
$optional
) -> NamedTuple("TrainOutputs", result_json=str):
    """Runs one trial of the training script at the bandit's batch size, with just-in-time power-limit
    profiling. A failing script, or a bad input, does not fail the step: the trial comes back 'failed' with
    the error, feedback records it and the recurrence ends.

    Args:
$fields_help
        data: The recurrence's data directory (preprocess's output).
        reuse_profile: A stored power profile to train at (an empty table: profile this trial).
        profile: The power profile the trial measured.
        metrics: The trial's energy, time, cost, epochs, batch size and power limit.
        model: The model the script saved (a note when it saved none).
        trial_log: The trial's log: the script's stdout and stderr, result.json, what the collector read, and
            whatever else the script wrote to {log_dir} but the model.

    Returns:
        result_json: The trial's zeus_kfp.job.TrialResult as JSON, for feedback.
    """
    from $request_module import $request_name
    from zeus_kfp.steps.train import train as step

    request = $request_name(
$fields_args
    )
    result = step(
        request,
        data_dir=data.path,
        reuse_profile_path=reuse_profile.path,
        profile=profile,
        metrics=metrics,
        model=model,
        trial_log=trial_log,
    )
    return (result.to_json(),)
'''

# The pipeline function: $parameters one line per parameter (the job's run-parameter settings, the run settings,
# the request's run parameters, STEP_RUN_PARAMETERS), $parameters_help its Args line, $parameters_args its
# argument to the steps.
RECURRENCE = '''\
"""The recurrence pipeline's function, its parameters written out: kfp reads a pipeline's parameters from its
function, their names, types and order from the signature and their descriptions from the docstring's Args,
and the KFP UI shows them. pipelines/dag.py gives each build's defaults (the job's values, the command, ...)
and the steps the body hands its parameters to (`build_pipeline`).
"""

$header
# No `from __future__ import annotations` here: kfp reads the pipeline function's annotations as types.
from collections.abc import Callable
from typing import Any


def recurrence_function(steps: Callable[[dict[str, Any]], None]) -> Callable[..., None]:
    """The pipeline function, whose body hands `steps` its parameters by name: kfp calls it once, with a
    channel per parameter, while it builds the pipeline."""

    def zeus_recurrence(
$parameters
    ) -> None:
        """One recurrence of an energy-optimal training job.

        Args:
$parameters_help
        """
        steps(
            dict(
$parameters_args
            )
        )

    return zeus_recurrence
'''


def _literal(value: object) -> str:
    """`value` as Python source, a string in double quotes as ruff format writes it."""
    text = repr(value)
    if isinstance(value, str) and '"' not in value and "\\" not in text:
        return f'"{value}"'
    return text


def _header(declared: str) -> str:
    return HEADER.format(declared=declared).rstrip("\n")


def _listed(fields: tuple[SettingField, ...], prefix: str = "") -> dict[str, str]:
    """A template's lines for `fields`: one parameter, one line of Args and one argument per setting."""
    return {
        f"{prefix}settings": "\n".join(f"    {f.name}: {param_type(f).__name__}," for f in fields),
        f"{prefix}settings_help": "\n".join(f"        {f.name}: {f.pipeline_help()}" for f in fields),
        f"{prefix}settings_args": "\n".join(f"        {f.name}={f.name}," for f in fields),
    }


def gate_source(spec_cls: type[JobSpec] = JobSpec, run_cls: type[RunSettings] = RunSettings) -> str:
    """components/gate.py for `spec_cls`'s settings and `run_cls`'s."""
    header = _header("the job's and the run's settings (zeus/zeus_kfp/job.py, zeus/zeus_kfp/run_settings.py)")
    listed = _listed(settings_of(spec_cls)) | _listed(settings_of(run_cls), "run_")
    return Template(GATE).substitute(header=header, **listed)


def train_source(request_cls: type[TrialRequest] = TrialRequest) -> str:
    """components/train.py for `request_cls`'s fields."""
    fields = request_fields(request_cls)

    def parameter(f: SettingField) -> str:
        return f"    {f.name}: {param_type(f).__name__}" + ("," if f.required else f" = {_literal(f.default)},")

    return Template(TRAIN).substitute(
        header=_header("the trial request (zeus/zeus_kfp/steps/request.py)"),
        required="\n".join(parameter(f) for f in fields if f.required),
        optional="\n".join(parameter(f) for f in fields if not f.required),
        fields_help="\n".join(f"        {f.name}: {f.setting.help}" for f in fields),
        fields_args="\n".join(f"        {f.name}={f.name}," for f in fields),
        request_module=request_cls.__module__,
        request_name=request_cls.__qualname__,
    )


def pipeline_parameters(
    spec_cls: type[JobSpec] = JobSpec, request_cls: type[TrialRequest] = TrialRequest
) -> tuple[tuple[str, type, str], ...]:
    """The pipeline's parameters in order, (name, KFP type, description): the job's settings that are run
    parameters, the run settings, the trial request's run parameters, then the other steps' own
    (STEP_RUN_PARAMETERS)."""
    declared = [f for f in settings_of(spec_cls) if f.setting.run_parameter] + list(settings_of(RunSettings))
    settings = [(f.name, param_type(f), f.pipeline_help()) for f in declared]
    requested = [(name, param_type(f), f.setting.help) for name, f in run_parameters(request_cls)]
    return (*settings, *requested, *STEP_RUN_PARAMETERS)


def recurrence_source(spec_cls: type[JobSpec] = JobSpec, request_cls: type[TrialRequest] = TrialRequest) -> str:
    """pipelines/recurrence.py for `spec_cls`'s settings and `request_cls`'s run parameters."""
    params = pipeline_parameters(spec_cls, request_cls)
    return Template(RECURRENCE).substitute(
        header=_header("the job's settings, the run settings, the trial request and STEP_RUN_PARAMETERS"),
        parameters="\n".join(f"        {name}: {kind.__name__}," for name, kind, _ in params),
        parameters_help="\n".join(f"            {name}: {text}" for name, _, text in params),
        parameters_args="\n".join(f"                {name}={name}," for name, _, _ in params),
    )


def written_sources() -> dict[Path, str]:
    """Each written-out file (under the repository) and the text the declarations give it."""
    return {
        ROOT / "components" / "gate.py": gate_source(),
        ROOT / "components" / "train.py": train_source(),
        ROOT / "pipelines" / "recurrence.py": recurrence_source(),
    }


def stale() -> list[Path]:
    """The written-out files whose text is not what the declarations give (missing ones too)."""
    return [path for path, text in written_sources().items() if not path.is_file() or path.read_text() != text]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        for path in stale():
            print(f"{path.relative_to(ROOT)} differs from its declaration: run `make sources`")
        return 1 if stale() else 0
    if argv:
        print("usage: python -m pipelines.sources [--check]", file=sys.stderr)
        return 2
    for path, text in written_sources().items():
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
