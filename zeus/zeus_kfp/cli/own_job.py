"""Your own training job from the command line: its JobSpec (a file and/or options) and its command.

Why a JobSpec must be given: the bandit needs the batch sizes to choose from and the target that
decides whether a trial "reached"; no default fits an arbitrary script, and the job id names the
history the bandit learns from, so borrowing the example's would mix two jobs. A file
(`--spec job.yaml`, any JobSpec field) keeps a job's settings in one place under version
control; the options (`--job-id`, `--batch-sizes`, ...) override the file's.

The options are not written out here: `setting_options` gives a command one option per JobSpec
setting (and, stacked, one per run setting: zeus_kfp.run_settings), named, typed and described by the setting's
declaration (zeus_kfp.settings), so a new setting is an option of `run` and `compile` without an edit here.
"""

from __future__ import annotations

import functools
import inspect
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec
from zeus_kfp.settings import settings_of

PATTERN_HELP = (
    "--plain: regex for the metric lines (stdout and stderr), with 2 groups (name, value), e.g. "
    "'(val_acc)=([0-9.]+)', or named groups name and value. A counter the line names (Epoch 3/10, step=200, "
    "'epoch': 1.0) is read whatever the pattern. Default: Katib's name=value."
)
COLLECTOR_HELP = (
    "A plain script's (--plain) metrics collector: Katib's metricsCollectorSpec as JSON or YAML, or @file.yaml "
    "(default: stdout and stderr, Katib's name=value pattern)."
)
KEEP_HELP = (
    "Files your script saves that each trial keeps as its model: comma-separated globs relative to the trial's "
    "work directory, e.g. 'checkpoints/*.pt' (a local or torchrun trial; a cluster trial's pods hand back only "
    "{log_dir}/model.pt, so a cluster launcher refuses it). Default: {log_dir}/model.pt."
)


def remembered(help: str) -> str:
    """An option's help as `run` gives it: the job remembers what its last run was given (zeus_kfp.store.specs)."""
    return help.replace("Default: ", "Default: the job's (what its last run was given), else ", 1)


def text_option(help: str, panel: str) -> Any:
    """An optional text option of your own job, for `run` and `compile` alike (their panels differ)."""
    return Annotated[str | None, typer.Option(help=help, rich_help_panel=panel)]


SPEC_FORMS = "a YAML or JSON file of JobSpec fields (job_id, batch_sizes, default_batch_size, target_metric, ...)"
SETTINGS_PARAM = "settings"  # the command's parameter that receives the generated options' values


def _fields(spec_cls: type | None = None):
    return settings_of(spec_cls or JobSpec)


def required_fields() -> list[str]:
    """The JobSpec fields without a default: what a job must say."""
    return [f.name for f in _fields() if f.required]


def option_name(field_name: str) -> str:
    """The CLI option of a JobSpec setting, e.g. --batch-sizes."""
    return "--" + next(f.option for f in _fields() if f.name == field_name)


def parse_list(field, text: str | None) -> list | None:
    """A list setting (a zeus_kfp.settings.SettingField) given on the command line, '16,32' -> [16, 32]."""
    if text is None:
        return None
    kind = field.value_type
    try:
        return [kind(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise FieldError(field.name, text, f"comma-separated {kind.__name__} values, e.g. 16,32,64") from None


def _option(field, panel: str) -> inspect.Parameter:
    names = [f"--{field.option}"]
    if field.value_type is bool:
        names = [f"--{field.option}/--{field.setting.off_option or 'no-' + field.option}"]
    kind = str if field.is_list else field.value_type
    option = typer.Option(*names, help=field.cli_help(), rich_help_panel=panel)
    annotation = Annotated[kind | None, option]
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def setting_options(
    panel: str, spec_cls: type | None = None, param: str = SETTINGS_PARAM
) -> Callable[[Callable], Callable]:
    """A typer command gets one option per setting of the JobSpec (or `spec_cls`: RunSettings for the run
    settings) it does not declare itself (by the setting's name or option name); their values reach its `param`
    parameter (`settings` unless told) as {field: value or None}, lists parsed ('16,32' -> [16, 32]). Stacked, one
    decorator per declaration, each fills its own parameter."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        own = [p for name, p in signature.parameters.items() if name != param]
        taken = {p.name for p in own}
        added = [f for f in _fields(spec_cls) if f.name not in taken and f.option.replace("-", "_") not in taken]

        @functools.wraps(command)
        def with_settings(**given: Any) -> Any:
            values = {f: given.pop(f.name) for f in added}
            settings = {f.name: parse_list(f, v) if f.is_list else v for f, v in values.items()}
            return command(**given, **{param: settings})

        with_settings.__signature__ = signature.replace(parameters=own + [_option(f, panel) for f in added])
        return with_settings

    return decorate


def load_spec_file(path: Path) -> dict[str, Any]:
    """The fields in a YAML or JSON spec file (JSON is YAML), checked to be a mapping."""
    if not path.is_file():
        raise FieldError("spec", str(path), f"{SPEC_FORMS}; {path} is not a file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        problem = " ".join(str(err).split())
        raise FieldError("spec", str(path), f"{SPEC_FORMS} ({problem})") from None
    if not isinstance(data, dict):
        raise FieldError("spec", str(path), f"{SPEC_FORMS}, a mapping such as `job_id: my-job`")
    return data


def own_spec(spec_file: Path | None, options: dict[str, Any]):
    """The JobSpec from `spec_file` with `options` (None: not given) over it, validated field by field."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps import spec_from_params

    values = load_spec_file(spec_file) if spec_file is not None else {}
    values.update({name: value for name, value in options.items() if value is not None})
    missing = [name for name in required_fields() if name not in values]
    if missing:
        flags = ", ".join("--" + name.replace("_", "-") for name in missing)
        raise FieldError(
            "spec", None, f"a job spec for your own command: missing {', '.join(missing)} ({flags} or --spec)"
        )
    return spec_from_params(**values)


def _absolute_if_file(arg: str) -> str:
    """A relative path to an existing file becomes absolute: the trial runs in its own work directory."""
    if "{" in arg or arg.startswith("-") or Path(arg).is_absolute():
        return arg
    path = Path(arg)
    return str(path.resolve()) if path.is_file() else arg


def split_command(text: str, *, local: bool = True) -> list[str]:
    """A shell-style command line as argv. `local`: it runs on this machine, so its relative file paths
    are made absolute; a command for the cluster names paths inside the image and is left as written."""
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise FieldError("command", text, f"a shell-style command line ({err})") from None
    if not argv:
        raise FieldError("command", text, "a command, e.g. '{python} train.py --batch-size {batch_size}'")
    return [_absolute_if_file(arg) for arg in argv] if local else argv
