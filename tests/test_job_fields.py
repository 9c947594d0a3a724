"""One declaration of the job's settings (zeus/zeus_kfp/job.py): the gate component, the pipeline's parameters,
the ZEUS_* variables and the CLI's options follow it, and a JobSpec with one more field is picked up by all
of them with no other edit than `make sources` (which writes the components and the pipeline's parameters out,
tests/test_sources.py).

The oracle is the dataclass itself, read here with dataclasses.fields (not zeus_kfp.settings), and a table
written by hand of how each kind of annotation travels as a KFP parameter."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
import yaml
from typer.testing import CliRunner

from zeus_kfp.job import JobSpec
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.settings import SETTING, setting

# How each annotation a JobSpec field may have travels in KFP (its parameter type); a new kind of
# annotation must be added here, with the reason it travels that way.
KFP_TYPES = {
    "str": "String",
    "int": "Integer",
    "float": "Float",
    "bool": "Boolean",
    "tuple[int, ...]": "List",  # a list parameter
    "float | None": "Float",  # None travels as the setting's none_as
}
KFP_YAML_TYPES = {"String": "STRING", "Integer": "NUMBER_INTEGER", "Float": "NUMBER_DOUBLE", "Boolean": "BOOLEAN"}
# The gate's inputs besides the job's and the run's settings: where and which run, and how the script reports.
GATE_INPUTS = {"store_uri", "run_id", "recurrence_id", "owner", "force", "zeus_aware", "metric_pattern",
               "metrics_collector", "keep"}  # fmt: skip
SPEC = JobSpec(job_id="fields", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.5, max_epochs=3)


@dataclass(frozen=True)
class WithWarmup(JobSpec):
    """JobSpec and one more setting, added the way a maintainer adds one: one field."""

    lr_warmup_epochs: int = setting("Epochs of learning-rate warm-up.", 0)


def declared(cls: type = JobSpec) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def setting_field(cls: type, name: str):
    from zeus_kfp.settings import settings_of

    return next(f for f in settings_of(cls) if f.name == name)


def test_a_list_setting_is_described_in_the_form_each_place_takes() -> None:
    """The CLI takes batch sizes comma-separated, the KFP UI a JSON list: each says its own form."""
    sizes = setting_field(JobSpec, "batch_sizes")
    assert sizes.cli_help().endswith("Comma-separated, e.g. 16,32,64,128.")
    assert sizes.pipeline_help().endswith("A JSON list, e.g. [16, 32, 64, 128].")
    from zeus_kfp.steps import spec_from_params

    example = sizes.pipeline_help().rsplit("e.g. ", 1)[1].rstrip(".")
    parsed = spec_from_params(**{**SPEC.to_dict(), "batch_sizes": example, "default_batch_size": 16})
    assert parsed.batch_sizes == (16, 32, 64, 128)


def run_parameters(cls: type = JobSpec) -> set[str]:
    return {name for name, f in declared(cls).items() if f.metadata[SETTING].run_parameter}


def test_the_gate_component_takes_every_setting_with_its_type_and_description(tmp_path) -> None:
    """The checked-in component, and the one `make sources` writes for a JobSpec with one more setting: the gate
    is the one step that takes the job's settings (the others read the spec from the store)."""
    from written import load_written

    from zeus_kfp.components.gate import gate
    from zeus_kfp.pipelines.sources import gate_source

    warmup = load_written(gate_source(WithWarmup), tmp_path, "gate_with_warmup").gate
    for cls, component in ((JobSpec, gate), (WithWarmup, warmup)):
        inputs = component.component_spec.inputs
        assert set(inputs) == set(declared(cls)) | set(declared(RunSettings)) | GATE_INPUTS
        for name, field in declared(cls).items():
            assert inputs[name].type == KFP_TYPES[field.type], name
            assert inputs[name].description == setting_field(cls, name).pipeline_help()
    assert "lr_warmup_epochs" in warmup.component_spec.inputs


def test_the_pipeline_function_written_for_a_new_setting_takes_it(tmp_path) -> None:
    """What `make sources` writes for a JobSpec with one more setting: the pipeline function takes it as a typed
    run parameter, described as declared (the compiled pipeline's wiring of every setting is checked below)."""
    import docstring_parser
    from written import load_written

    from zeus_kfp.pipelines.sources import recurrence_source

    function = load_written(recurrence_source(WithWarmup), tmp_path, "recurrence_with_warmup").recurrence_function(
        lambda given: None
    )
    parameter = inspect.signature(function).parameters["lr_warmup_epochs"]
    assert parameter.annotation is int
    described = {p.arg_name: p.description for p in docstring_parser.parse(function.__doc__).params}
    assert described["lr_warmup_epochs"] == setting_field(WithWarmup, "lr_warmup_epochs").pipeline_help()


def test_the_pipeline_is_built_for_a_job_spec_only() -> None:
    """A JobSpec with one more setting is a JobSpec field and `make sources`, not a subclass handed over at run
    time: the written-out components would not take its setting."""
    from zeus_kfp.pipelines.dag import build_pipeline

    with pytest.raises(TypeError, match=r"not a WithWarmup.*make sources"):
        build_pipeline(WithWarmup(**SPEC.to_dict(), lr_warmup_epochs=2), ["true"])


def compiled(spec: JobSpec, tmp_path, attempts: int = 3, run: RunSettings | None = None) -> dict:
    from kfp import compiler

    from zeus_kfp.pipelines.dag import build_pipeline

    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(build_pipeline(spec, ["true"], attempts=attempts, run_settings=run), str(path))
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize(
    ("spec", "run"),
    [(SPEC.with_changes(beta_knob=None), RunSettings()), (SPEC, RunSettings(max_running=2, period_s=60.0))],
)
def test_the_pipeline_has_a_run_parameter_per_setting_and_passes_each_to_the_gate_alone(spec, run, tmp_path) -> None:
    """The recurrence gate, the root task, registers the job before anything else and is the one task a setting
    reaches: preprocess, in the gate's condition, takes the job's id (a run parameter arrives there as the
    condition's `pipelinechannel--` input) and reads the spec the gate agreed from the store. The run settings are
    run parameters too, the gate's alone: no part of the job's spec."""
    pipeline = compiled(spec, tmp_path, run=run)
    params = pipeline["root"]["inputDefinitions"]["parameters"]
    gate = pipeline["root"]["dag"]["tasks"]["gate"]["inputs"]["parameters"]
    (opened,) = [c for c in pipeline["components"].values() if "preprocess" in c.get("dag", {}).get("tasks", {})]
    preprocess = opened["dag"]["tasks"]["preprocess"]["inputs"]["parameters"]
    values = spec.to_dict() | {"beta_knob": 0.0 if spec.beta_knob is None else spec.beta_knob}
    for name, field in declared(type(spec)).items():
        if name in run_parameters(type(spec)):
            kind = KFP_TYPES[field.type]
            assert params[name]["parameterType"] == KFP_YAML_TYPES.get(kind, kind.upper()), name
            assert params[name]["defaultValue"] == values[name], name
            assert params[name]["description"] == setting_field(type(spec), name).pipeline_help()
            assert gate[name] == {"componentInputParameter": name}
        else:  # fixed at compile time: max_attempts is the unrolled loop's length
            assert name not in params and gate[name] == {"runtimeValue": {"constant": 3}}, name
    assert set(preprocess) == {"job_id", "store_uri", "run_id", "recurrence_id", "preprocess_ref"}
    assert preprocess["job_id"] == {"componentInputParameter": "pipelinechannel--job_id"}
    assert run_parameters() == set(declared()) - {"max_attempts"}
    for name, value in run.to_dict().items():
        assert params[name]["defaultValue"] == value, name
        assert params[name]["description"] == setting_field(RunSettings, name).pipeline_help()
        assert gate[name] == {"componentInputParameter": name} and name not in preprocess, name


def env_drift(cls: type = JobSpec) -> list[str]:
    """How TrialEnv (the script's API) and the ZEUS_* variables disagree with the settings a script sees."""
    from zeus_kfp.train.env import ENV_VARS, TrialEnv

    trial_env = declared(TrialEnv)
    problems = []
    for name, field in declared(cls).items():
        if not field.metadata[SETTING].trial:
            continue
        if name not in trial_env:
            problems.append(f"TrialEnv lacks {name}")
            continue
        if trial_env[name].type != field.type:
            problems.append(f"{name}: TrialEnv says {trial_env[name].type}, the JobSpec {field.type}")
        if field.default is not dataclasses.MISSING and trial_env[name].default != field.default:
            problems.append(f"{name}: TrialEnv's default {trial_env[name].default!r}, the JobSpec's {field.default!r}")
        if ENV_VARS.get(name) != f"ZEUS_{name.upper()}":
            problems.append(f"{name} is not ZEUS_{name.upper()}")
    # A TrialEnv field named like a setting carries that setting, except `seed`: the trial's own seed.
    unmarked = set(trial_env) & set(declared(cls)) - {n for n, f in declared(cls).items() if f.metadata[SETTING].trial}
    return problems + [f"{name} is in TrialEnv but not declared trial=True" for name in sorted(unmarked - {"seed"})]


def test_a_script_sees_every_trial_setting_as_zeus_name_and_the_env_round_trips() -> None:
    from zeus_kfp.train.env import TrialEnv

    assert env_drift() == []
    spec = SPEC.with_changes(eta_knob=0.25, higher_is_better=False, max_power_w=400.0)
    env = TrialEnv.for_trial(spec, batch_size=8, log_dir="/tmp/x").to_env()
    assert env["ZEUS_ETA_KNOB"] == "0.25" and env["ZEUS_HIGHER_IS_BETTER"] == "0" and env["ZEUS_JOB_ID"] == "fields"
    assert TrialEnv.from_env(env).cost_model.cost(100.0, 2.0) == spec.cost_model.cost(100.0, 2.0)


def test_the_env_check_fails_on_a_setting_marked_for_the_script_that_trial_env_lacks() -> None:
    @dataclass(frozen=True)
    class ForTheScript(JobSpec):
        lr_warmup_epochs: int = setting("Epochs of learning-rate warm-up.", 0, trial=True)

    assert env_drift(ForTheScript) == ["TrialEnv lacks lr_warmup_epochs"]


def cli_options(command_name: str) -> set[str]:
    from zeus_kfp.cli.application import app

    command = typer.main.get_command(app).commands[command_name]
    return {opt for param in command.params for opt in param.opts + param.secondary_opts}


@pytest.mark.parametrize("command", ["run", "compile"])
def test_run_and_compile_have_an_option_per_setting(command) -> None:
    """...of the job's and of the run settings (any job takes those)."""
    options = cli_options(command)
    for name, field in (declared() | declared(RunSettings)).items():
        assert "--" + (field.metadata[SETTING].option or name.replace("_", "-")) in options, name
    assert "--lower-is-better" in options  # the names users rely on still work


def test_compile_builds_the_job_from_the_setting_options(tmp_path) -> None:
    from zeus_kfp.cli.application import app

    out = tmp_path / "own.yaml"
    args = ["compile", "-o", str(out), "--gpus", "0", "--command", "{python} train.py", "--job-id", "own",
            "--batch-sizes", "8,16", "--default-batch-size", "16", "--target-metric", "0.25", "--max-epochs", "4",
            "--lower-is-better", "--eta-knob", "0.75", "--beta-knob", "0"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    params = next(yaml.safe_load_all(out.read_text()))["root"]["inputDefinitions"]["parameters"]
    got = {name: params[name]["defaultValue"] for name in ("job_id", "batch_sizes", "higher_is_better", "eta_knob")}
    assert got == {"job_id": "own", "batch_sizes": [8, 16], "higher_is_better": False, "eta_knob": 0.75}
    assert params["beta_knob"]["defaultValue"] == 0.0  # 0: no early stop


def test_a_command_gets_an_option_for_a_new_setting_and_receives_its_value() -> None:
    from zeus_kfp.cli.own_job import setting_options

    app, seen = typer.Typer(), {}

    @app.command()
    @setting_options("job", WithWarmup)
    def job(seed: Annotated[int, typer.Option()] = 0, settings: dict | None = None) -> None:
        seen.update(settings or {}, seed=seed)

    result = CliRunner().invoke(app, ["--lr-warmup-epochs", "3", "--batch-sizes", "8,16", "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert (seen["lr_warmup_epochs"], seen["batch_sizes"], seen["seed"], seen["eta_knob"]) == (3, [8, 16], 5, None)


def test_pipeline_parameters_come_back_as_the_spec_with_a_new_setting_too() -> None:
    from zeus_kfp.steps import spec_from_params, spec_to_params

    spec = WithWarmup(**SPEC.to_dict(), lr_warmup_epochs=2).with_changes(beta_knob=None)
    params = spec_to_params(spec) | {"max_epochs": 3.0, "batch_sizes": "[8.0, 16.0]", "lr_warmup_epochs": 2.0}
    assert spec_from_params(WithWarmup, **params) == spec  # ints from doubles, a list from JSON, 0 -> None
