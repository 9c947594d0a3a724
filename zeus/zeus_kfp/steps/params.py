"""Pipeline parameters <-> the job model.

KFP pipeline parameters are flat scalars and lists, so a JobSpec, and the RunSettings beside it, travel as one
parameter per setting and are rebuilt (and validated) here by the step that takes them. Two KFP facts shape this:
protobuf carries every number in a list as a double (32 arrives as 32.0), and a parameter
cannot be null, so "no early stop" and "no cost threshold" need sentinels. Which settings there
are, and their types, come from the declarations (zeus_kfp.settings), never a list here.
"""

from __future__ import annotations

import json
from typing import Any

from zeus_kfp.job import JobSpec, JobSpecError
from zeus_kfp.launch.config import POD_NAMESPACE_ENV, pod_namespace
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.settings import SettingField, is_number, settings_of
from zeus_kfp.store import open_store

# A bandit decision without an early-stop threshold travels as this value (a float output
# cannot be None). Any negative threshold means "none".
NO_THRESHOLD = -1.0

# beta_knob as a pipeline parameter: 0 (or any value <= 0) disables early stopping, the way None does in
# JobSpec (declared there as its `none_as`).
BETA_DISABLED = next(f.setting.none_as for f in settings_of(JobSpec) if f.name == "beta_knob")

# In a training command, "{python}" stands for the Python interpreter running the train step (the
# image's on a cluster, this venv's locally). Why: kfp.local rewrites every "python3" in a step's
# arguments to its own interpreter path, which mangles an absolute interpreter path passed through
# a pipeline parameter; the token also keeps a compiled command free of this machine's paths.
PYTHON_TOKEN = "{python}"

# metadata["kind"] of the power-profile artifact (components.artifacts.PowerProfile): kfp 2.17
# allows no custom schema_title, so this is how readers tell the profile from other datasets.
PROFILE_KIND = "zeus.PowerProfile"

# In a store URI, "{namespace}" stands for the namespace the step's pod runs in, read at run time: the compiled
# default store (s3://mlpipeline/private/{namespace}/zeus-kfp) names no namespace, so one uploaded (shared)
# pipeline keeps each namespace's jobs under that namespace's own prefix, the one its key may use.
NAMESPACE_TOKEN = "{namespace}"


def resolve_store_uri(store_uri: str, environ: dict[str, str] | None = None) -> str:
    """`store_uri` with {namespace} replaced by the pod's namespace (zeus_kfp.launch.config.pod_namespace)."""
    if NAMESPACE_TOKEN not in store_uri:
        return store_uri
    namespace = pod_namespace(environ)
    if not namespace:
        raise JobSpecError(
            "store_uri",
            store_uri,
            f"a store without {NAMESPACE_TOKEN} outside a pod, or a pod that knows its namespace "
            f"(${POD_NAMESPACE_ENV} from metadata.namespace, which the compiled pipeline sets)",
        )
    return store_uri.replace(NAMESPACE_TOKEN, namespace)


def open_step_store(store_uri: str):
    """The store a step works on: `store_uri` resolved for this pod (resolve_store_uri); "" is the local default."""
    return open_store(resolve_store_uri(store_uri) or None)


JOB_FIELDS = settings_of(JobSpec)
# The job settings that are pipeline run parameters; the others (max_attempts) are fixed at compile time.
RUN_FIELDS = tuple(f for f in JOB_FIELDS if f.setting.run_parameter)


def param_type(field: SettingField) -> type:
    """A setting's KFP parameter type: a list for a tuple, the value's type for an optional (its None
    travels as `none_as`), the type itself otherwise."""
    return list if field.is_list else field.value_type


def _as_int(value: Any) -> Any:
    """32.0 -> 32 (protobuf turns list ints into doubles); anything else is left for validation."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def spec_from_params(cls: type[JobSpec] = JobSpec, **params: Any) -> JobSpec:
    """Build the JobSpec (or `cls`, a JobSpec with more settings) from pipeline parameters, raising
    JobSpecError naming a bad field.

    Accepts exactly the JobSpec fields (`cls`'s: RunSettings for `run_settings_from_params`); a list may be a
    JSON string of one (the KFP UI shows list parameters as JSON text), integers may arrive as doubles, and an
    optional setting at or below its `none_as` (beta_knob <= 0: no early stop) is None.
    """
    values = dict(params)
    for field in settings_of(cls):
        if field.name not in values:
            continue
        value = values[field.name]
        if field.is_list and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as err:
                allowed = f"a JSON list of {field.value_type.__name__} values (how the KFP UI shows a list)"
                raise JobSpecError(field.name, value, allowed) from err
        if field.value_type is int and field.is_list and isinstance(value, (list, tuple)):
            value = [_as_int(v) for v in value]
        elif field.value_type is int:
            value = _as_int(value)
        none_as = field.setting.none_as
        if none_as is not None and is_number(value) and value <= none_as:
            value = None
        values[field.name] = value
    return cls.from_dict(values)


def run_settings_from_params(**params: Any) -> RunSettings:
    """The RunSettings from pipeline parameters (or options), as `spec_from_params` builds a JobSpec."""
    return spec_from_params(RunSettings, **params)  # type: ignore[arg-type]


def spec_to_params(spec: JobSpec | RunSettings) -> dict[str, Any]:
    """The inverse of `spec_from_params`: every setting of `spec` (a JobSpec or RunSettings) as a pipeline argument."""
    params = spec.to_dict()
    for field in settings_of(type(spec)):
        if params[field.name] is None and field.setting.none_as is not None:
            params[field.name] = field.setting.none_as
    return params


def run_arguments(spec: JobSpec, run: RunSettings | None = None) -> dict[str, Any]:
    """The pipeline's run arguments for `spec`'s settings (those fixed at compile time left out) and `run`'s
    (None: the defaults, RunSettings())."""
    params = spec_to_params(spec)
    job = {f.name: params[f.name] for f in settings_of(type(spec)) if f.setting.run_parameter}
    return job | spec_to_params(run or RunSettings())


def threshold_to_param(threshold: float | None) -> float:
    return NO_THRESHOLD if threshold is None else float(threshold)


def threshold_from_param(value: float) -> float | None:
    return None if value is None or value < 0 else float(value)
