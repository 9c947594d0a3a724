"""How a job setting is declared once (a JobSpec field with `setting(...)`) and read everywhere it appears.

A job setting shows up in five places: the preprocess component's parameters, the pipeline's run
parameters, the ZEUS_* variables a training script reads, the CLI's options, and their descriptions
(the KFP UI's, --help). Each is derived from the JobSpec field (name, type, default) and its `Setting`:
components/preprocess.py generates the component from them, pipelines/dag.py the pipeline's signature,
zeus_kfp.steps.params the conversions, zeus_kfp.train.env the variables, zeus_kfp.cli.own_job the options.
So adding a field to the job is one edit in zeus_kfp.job, and tests/test_job_fields.py fails when any of
the five drifts from the declaration.

The train step's request (zeus_kfp.steps.request.TrialRequest) is declared the same way, `setting` metadata plus
where the pipeline takes each field from, and read with the same `settings_of`.

Why metadata on the dataclass field rather than a separate table: the field is where a maintainer adds
a setting, its validation sits next to it (JobSpec.__post_init__), and a second table would be a second
place to forget.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import MISSING, dataclass
from functools import cache
from typing import Any

SETTING = "zeus.setting"  # the key of a field's Setting in its dataclass metadata
# Every integer a setting or a result holds is stored in a 64-bit column (zeus_kfp.store.fields).
INT64_MAX = 2**63 - 1


def is_int(value: Any) -> bool:
    """An int (not a bool) that fits a 64-bit column."""
    return isinstance(value, int) and not isinstance(value, bool) and -INT64_MAX - 1 <= value <= INT64_MAX


def is_number(value: Any) -> bool:
    """An int or float, not a bool (finite or not: each check says)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Setting:
    """What the outside world needs to know about one job setting besides its name, type and default.

    help: one sentence for people (CLI --help, the KFP UI's parameter description).
    run_parameter: a pipeline run parameter; False: fixed when the pipeline is compiled (max_attempts:
        the retry loop is unrolled at compile time) and passed to preprocess as a constant.
    trial: a training script sees it, as ZEUS_<NAME> (zeus_kfp.train.env.TrialEnv declares it too).
    none_as: for an optional setting, the parameter value that stands for None (a KFP parameter cannot be
        null); any value at or below it means None as well.
    option: the CLI option's name when it is not the field's (--attempts for max_attempts).
    off_option: a boolean's CLI option for False when it reads better than --no-<name>.
    example: a list setting's example values, "16,32,64": each place says it in the form it takes (the
        CLI comma-separated, the KFP UI as a JSON list), so `help` itself names no form.
    """

    help: str
    run_parameter: bool = True
    trial: bool = False
    none_as: float | None = None
    option: str = ""
    off_option: str = ""
    example: str = ""


def setting(help: str, default: Any = MISSING, **how: Any) -> Any:
    """A JobSpec field declared with its Setting (`default` omitted: a required field)."""
    return dataclasses.field(default=default, metadata={SETTING: Setting(help, **how)})


@dataclass(frozen=True)
class SettingField:
    """One declared setting: the field's name, resolved type hint and default, and its Setting."""

    name: str
    hint: Any
    default: Any  # dataclasses.MISSING for a required setting
    setting: Setting

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def is_list(self) -> bool:
        return typing.get_origin(self.hint) in (tuple, list)

    @property
    def value_type(self) -> type:
        """The type of one value: an item's for a list (tuple[int, ...] -> int), the type itself for an
        optional one (float | None -> float)."""
        args = [a for a in typing.get_args(self.hint) if a is not type(None) and a is not Ellipsis]
        if self.is_list or isinstance(self.hint, types.UnionType) or typing.get_origin(self.hint) is typing.Union:
            return args[0]
        return self.hint

    def cli_help(self) -> str:
        """The help of the CLI option: a list is comma-separated there."""
        if not self.is_list:
            return self.setting.help
        return self.setting.help + f" Comma-separated, e.g. {self.setting.example or '1,2'}."

    def pipeline_help(self) -> str:
        """The description of the pipeline parameter (the KFP UI's): a list is JSON text there."""
        if not self.is_list:
            return self.setting.help
        values = ", ".join((self.setting.example or "1,2").split(","))
        return self.setting.help + f" A JSON list, e.g. [{values}]."

    @property
    def option(self) -> str:
        """The CLI option's name, without the dashes."""
        return self.setting.option or self.name.replace("_", "-")


@cache
def settings_of(cls: type) -> tuple[SettingField, ...]:
    """The settings a dataclass declares, in declaration order. Every field must be a `setting(...)`: a
    field without one would silently miss the pipeline, the CLI and the docs."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if SETTING not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is declared without setting(...): say how users reach it")
        out.append(SettingField(f.name, hints[f.name], f.default, f.metadata[SETTING]))
    return tuple(out)
