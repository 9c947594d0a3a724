"""Pipeline parameters <-> the job model.

KFP pipeline parameters are flat scalars and lists, so a JobSpec travels as one parameter
per field and is rebuilt (and validated) here by the first step. Two KFP facts shape this:
protobuf carries every number in a list as a double (32 arrives as 32.0), and a parameter
cannot be null, so "no early stop" and "no cost threshold" need sentinels.
"""

from __future__ import annotations

import json
from typing import Any

from zeus.job import JobSpec, JobSpecError

# A bandit decision without an early-stop threshold travels as this value (a float output
# cannot be None). Any negative threshold means "none".
NO_THRESHOLD = -1.0

# beta_knob as a pipeline parameter: 0 (or any value <= 0) disables early stopping, the
# way None does in JobSpec.
BETA_DISABLED = 0.0

# In a training command, "{python}" stands for the Python interpreter running the train step (the
# image's on a cluster, this venv's locally). Why: kfp.local rewrites every "python3" in a step's
# arguments to its own interpreter path, which mangles an absolute interpreter path passed through
# a pipeline parameter; the token also keeps a compiled command free of this machine's paths.
PYTHON_TOKEN = "{python}"

# metadata["kind"] of the power-profile artifact (components.artifacts.PowerProfile): kfp 2.17
# allows no custom schema_title, so this is how readers tell the profile from other datasets.
PROFILE_KIND = "zeus.PowerProfile"

_INT_FIELDS = (
    "default_batch_size",
    "max_epochs",
    "max_attempts",
    "num_pruning_rounds",
    "window_size",
    "seed",
    "num_gpus",
    "reprofile_after",
)


def _as_int(value: Any) -> Any:
    """32.0 -> 32 (protobuf turns list ints into doubles); anything else is left for validation."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def spec_from_params(**params: Any) -> JobSpec:
    """Build the JobSpec from pipeline parameters, raising JobSpecError naming a bad field.

    Accepts exactly the JobSpec fields; `batch_sizes` may be a list or a JSON string of one
    (the KFP UI shows list parameters as JSON text), and `beta_knob` <= 0 means no early stop.
    """
    values = dict(params)
    sizes = values.get("batch_sizes")
    if isinstance(sizes, str):
        try:
            sizes = json.loads(sizes)
        except json.JSONDecodeError as err:
            raise JobSpecError("batch_sizes", sizes, "a JSON list of positive integers, e.g. [32, 64, 128]") from err
    if isinstance(sizes, (list, tuple)):
        values["batch_sizes"] = [_as_int(b) for b in sizes]
    for name in _INT_FIELDS:
        if name in values:
            values[name] = _as_int(values[name])
    beta = values.get("beta_knob")
    if beta is not None and isinstance(beta, (int, float)) and not isinstance(beta, bool) and beta <= BETA_DISABLED:
        values["beta_knob"] = None
    return JobSpec.from_dict(values)


def spec_to_params(spec: JobSpec) -> dict[str, Any]:
    """The inverse of `spec_from_params`: what to pass as pipeline arguments for `spec`."""
    params = spec.to_dict()
    if params["beta_knob"] is None:
        params["beta_knob"] = BETA_DISABLED
    return params


def threshold_to_param(threshold: float | None) -> float:
    return NO_THRESHOLD if threshold is None else float(threshold)


def threshold_from_param(value: float) -> float | None:
    return None if value is None or value < 0 else float(value)
