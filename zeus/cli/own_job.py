"""Your own training job from the command line: its JobSpec (a file and/or options) and its command.

Why a JobSpec must be given: the bandit needs the batch sizes to choose from and the target that
decides whether a trial "reached"; no default fits an arbitrary script, and the job id names the
history the bandit learns from, so borrowing the example's would mix two jobs. A file
(`--spec job.yaml`, any JobSpec field) keeps a job's settings in one place under version
control; the options (`--job-id`, `--batch-sizes`, ...) cover the required fields for a quick
try and override the file's.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any

from zeus.errors import FieldError

SPEC_FORMS = "a YAML or JSON file of JobSpec fields (job_id, batch_sizes, default_batch_size, target_metric, ...)"


def required_fields() -> list[str]:
    """The JobSpec fields without a default: what a job must say."""
    from zeus.job import JobSpec

    return [f.name for f in dataclasses.fields(JobSpec) if f.default is dataclasses.MISSING]


def parse_batch_sizes(text: str | None) -> list[int] | None:
    """'16,32,64' -> [16, 32, 64]; None stays None."""
    if text is None:
        return None
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise FieldError("batch_sizes", text, "comma-separated positive integers, e.g. 16,32,64") from None


def load_spec_file(path: Path) -> dict[str, Any]:
    """The fields in a YAML or JSON spec file (JSON is YAML), checked to be a mapping."""
    import yaml

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
    from zeus.steps import spec_from_params

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
