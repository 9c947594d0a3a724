"""The compiled pipeline on a Kubeflow cluster: upload, one-off run, recurring run (kfp.Client).

Everything a user types is checked here before kfp.Client is touched, so a bad cron or an
unknown parameter fails at once with the field, the value and what is allowed, rather than as
an HTTP 400 from the API server minutes later. Credentials come only from the environment (or
the in-cluster service-account token kfp.Client finds itself): they are passed to kfp.Client
and to nothing else, never printed and never sent as a pipeline parameter (the pipeline reads
MinIO keys from a Kubernetes Secret).
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from zeus_kfp.errors import FieldError
from zeus_kfp.pipelines.backends import closest_target, get_backend, parse_version
from zeus_kfp.pipelines.package import CompiledPackage

CRON_EXAMPLE = "0 0 2 * * *"
TOKEN_ENV = "KFP_TOKEN"
NAMESPACE_ENV = "KFP_NAMESPACE"
HOST_ENV = "KFP_HOST"
DEFAULT_PACKAGE = Path("zeus_pipeline.yaml")  # what `zeus-kfp compile` writes by default
# Fields of a KFP cron (robfig/cron with seconds): name, lowest value, highest value, names allowed.
_CRON_FIELDS = (
    ("seconds", 0, 59, ()),
    ("minutes", 0, 59, ()),
    ("hours", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    ("day of week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)
# A parameter name with one of these words as a `_`/`-` separated part looks like a credential
# ("s3_secret_key", "api-token"), while "tokenizer" does not.
_SECRET_WORDS = re.compile(r"(^|[_-])(secret|password|passwd|token|credentials?|access[_-]?key)([_-]|$)", re.IGNORECASE)


class ClusterInputError(FieldError):
    """A value for the cluster commands is not acceptable; names the field and what is allowed."""


def validate_cron(expression: str) -> str:
    """Check a KFP cron expression: 6 space-separated fields, seconds first (robfig/cron).

    A 5-field crontab line is the usual mistake; the error says so and shows an example.
    """
    fields = str(expression).split()
    if len(fields) != 6:
        raise ClusterInputError(
            "cron",
            expression,
            f"6 space-separated fields (KFP's cron has seconds first: sec min hour day-of-month month "
            f"day-of-week), e.g. '{CRON_EXAMPLE}' for 02:00:00 every day; got {len(fields)} field(s)",
        )
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for part in text.split(","):
            _check_cron_part(expression, part, name, low, high, names)
    return " ".join(fields)


def _check_cron_part(expression: str, part: str, name: str, low: int, high: int, names: tuple[str, ...]) -> None:
    allowed = f"in the {name} field: *, ?, a value {low}-{high}{' or a name' if names else ''}, a-b, */n or a-b/n"
    base, _, step = part.partition("/")
    if step and not (step.isdigit() and int(step) > 0):
        raise ClusterInputError("cron", expression, allowed)
    if base in ("*", "?"):
        return
    bounds = base.split("-")
    if len(bounds) > 2 or not all(_cron_value(b, low, high, names) for b in bounds):
        raise ClusterInputError("cron", expression, allowed)


def _cron_value(text: str, low: int, high: int, names: tuple[str, ...]) -> bool:
    if text.upper() in names:
        return True
    return text.isdigit() and low <= int(text) <= high


def validate_max_concurrency(value: int) -> int:
    """How many runs of the recurring run may overlap. Overlapping recurrences are safe (the store's
    keys are unique per run), but 0 would schedule nothing."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClusterInputError("max_concurrency", value, "an integer >= 1 (how many runs may overlap)")
    return value


@dataclass(frozen=True)
class Connection:
    """Where the KFP API is and who we are. The token is read from the environment variable named
    `token_env` at connect time, so it never sits in an object that might be printed."""

    host: str
    namespace: str | None = None
    token_env: str = TOKEN_ENV

    def __post_init__(self) -> None:
        if not re.match(r"^https?://[^\s/]+", self.host or ""):
            raise ClusterInputError(
                "host", self.host, "the KFP API URL, e.g. http://localhost:8080 or https://kf.example.com/pipeline"
            )

    @classmethod
    def from_env(cls, host: str | None = None, namespace: str | None = None, token_env: str = TOKEN_ENV) -> Connection:
        """Options first, then KFP_HOST / KFP_NAMESPACE from the environment."""
        return cls(host or os.environ.get(HOST_ENV, ""), namespace or os.environ.get(NAMESPACE_ENV) or None, token_env)


ClientFactory = Callable[..., Any]


def connect(conn: Connection, client_factory: ClientFactory | None = None) -> Any:
    """A kfp.Client for `conn`. `client_factory` defaults to kfp.Client (tests pass a recorder)."""
    if client_factory is None:
        import kfp

        client_factory = kfp.Client
    kwargs: dict[str, Any] = {"host": conn.host}
    if conn.namespace:
        kwargs["namespace"] = conn.namespace
    token = os.environ.get(conn.token_env)
    if token:
        kwargs["existing_token"] = token
    with warnings.catch_warnings():
        # kfp.Client warns on every construction that it needs a KFP 2.0.0-beta.2+ backend: true of
        # every backend we compile for (pipelines/backends.py), so it only adds two lines to each command.
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"kfp\.client")
        return client_factory(**kwargs)


def read_package(package: Path | None) -> CompiledPackage:
    """The package `compile` wrote: upload, submit and schedule send exactly this file (never one compiled on the
    fly with other options). None: ./zeus_pipeline.yaml, compile's default output, when it exists."""
    path = Path(package) if package is not None else DEFAULT_PACKAGE
    if package is None and not path.is_file():
        raise ClusterInputError(
            "package",
            None,
            f"the pipeline YAML `zeus-kfp compile` wrote (--package; {DEFAULT_PACKAGE} is not here): compile it "
            "first with your images, backend and Secret, then send that file",
        )
    return CompiledPackage.read(path)


def parse_arguments(pairs: list[str], declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Turn `KEY=VALUE` strings into typed pipeline arguments, checked against the declared ones.

    Values are converted by the parameter's declared type; lists and structs are JSON. A name
    that looks like a credential is refused: secrets go in a Kubernetes Secret, never a parameter
    (KFP stores and shows parameters in the UI).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ClusterInputError("param", pair, "KEY=VALUE, e.g. --param max_epochs=10")
        if _SECRET_WORDS.search(key):
            raise ClusterInputError(
                "param", key, "no credentials as parameters: put them in a Kubernetes Secret (compile --minio-secret)"
            )
        if key not in declared:
            raise ClusterInputError("param", key, f"one of the pipeline's parameters {sorted(declared)}")
        out[key] = _convert(key, raw, str(declared[key].get("parameterType", "STRING")))
    return out


def _convert(key: str, raw: str, kind: str) -> Any:
    try:
        if kind == "NUMBER_INTEGER":
            return int(raw)
        if kind == "NUMBER_DOUBLE":
            return float(raw)
        if kind == "BOOLEAN":
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw.lower() in ("true", "1")
        if kind in ("LIST", "STRUCT"):
            value = yaml.safe_load(raw)
            if not isinstance(value, list if kind == "LIST" else dict):
                raise ValueError(raw)
            return value
    except (ValueError, yaml.YAMLError):
        example = {"LIST": "[32,64,128]", "STRUCT": '{"a": 1}', "BOOLEAN": "true or false"}.get(kind, "a number")
        raise ClusterInputError(key, raw, f"a {kind.lower()} value, e.g. {example}") from None
    return raw


def validate_run_arguments(package: CompiledPackage, arguments: dict[str, Any]) -> None:
    """Check a run's arguments with the rules the pipeline itself applies, before anything is sent.

    The job's settings are merged over the package's defaults and built into a JobSpec exactly as
    the gate step will (zeus_kfp.steps.spec_from_params), and the run settings into a RunSettings as
    the gate will, so a job_id that would leave its prefix, batch_sizes without the default batch size or a
    negative max_running fail here, naming the field, instead of in a pod minutes later. The policy name is
    checked the same way. The package is the one the run uses: the file sent, or the uploaded version a
    recurring run names.
    """
    from zeus_kfp.job import JobSpec
    from zeus_kfp.launch.config import CLUSTER_LAUNCHERS
    from zeus_kfp.policy import ALLOWED_POLICIES, get_policy
    from zeus_kfp.run_settings import RunSettings
    from zeus_kfp.settings import settings_of
    from zeus_kfp.steps import run_settings_from_params, spec_from_params
    from zeus_kfp.steps.keep import for_launcher

    declared = package.parameters
    fields = {f.name for f in settings_of(JobSpec)}
    if not fields & declared.keys():  # a pipeline of no job (the fleet pipeline, pipelines/fleet.py): no JobSpec
        return

    def merged_over_defaults(names: set[str]) -> dict[str, Any]:
        given = {n: p["defaultValue"] for n, p in declared.items() if n in names and "defaultValue" in p}
        return given | {n: v for n, v in arguments.items() if n in names}

    # The run settings, checked as the gate will check them (over the package's defaults).
    run_fields = {f.name for f in settings_of(RunSettings)} & declared.keys()
    run_settings_from_params(**merged_over_defaults(run_fields))
    merged = merged_over_defaults(fields)
    if merged.get("max_power_w") == 0:  # "read it from the GPU at run time": only the gpu-power step can
        if not package.has_task("gpu-power"):
            raise ClusterInputError(
                "max_power_w", 0, "watts > 0: this pipeline was compiled with max_power_w pinned, so no step reads it"
            )
        merged.pop("max_power_w")  # whatever the GPU says is a valid figure: the rest is checked as the gate will
    spec_from_params(**merged | package.fixed_settings())
    trial = merged_over_defaults({"launcher", "keep"})  # a cluster trial keeps no files by glob (steps.keep)
    launcher = str(trial.get("launcher", "local"))
    for_launcher(str(trial.get("keep") or ""), launcher, launcher in CLUSTER_LAUNCHERS)
    policy = arguments.get("policy", package.default("policy"))
    if policy is not None:
        try:
            get_policy(policy)
        except ValueError:
            raise ClusterInputError("policy", policy, f"one of {ALLOWED_POLICIES}") from None


PackageLike = Path | str | CompiledPackage


def _package(package: PackageLike) -> CompiledPackage:
    return package if isinstance(package, CompiledPackage) else CompiledPackage.read(package)


def check_backend(client: Any, package: CompiledPackage) -> None:
    """Refuse a package compiled for another KFP backend than the cluster's (its healthz says which): such a
    package names an object store endpoint or YAML fields that backend does not have. Silent when the package
    names no target or the server no version (nothing to compare)."""
    import logging

    if package.target is None:
        return
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # kfp logs each failed healthz try with a traceback
    try:
        info = client.get_kfp_healthz(sleep_duration=1)
    except (TimeoutError, ValueError):
        return
    finally:
        logging.disable(previous)
    try:
        version = parse_version(str(getattr(info, "tag_name", None) or ""))
    except ValueError:
        return
    fits = closest_target(version)
    if fits is not None and get_backend(package.target).name != fits.name:
        release = ".".join(map(str, version))
        raise ClusterInputError(
            "package",
            package.source,
            f"a package compiled for the cluster's backend: it runs KFP {release} ({fits.ships_with}) and this one "
            f"was compiled for {package.target}; compile it again with --kfp-backend {fits.name}",
        )


def upload(client: Any, package: PackageLike, name: str, description: str | None = None) -> dict[str, str]:
    """Upload the pipeline under `name`; if that name exists, add a new version to it instead, so
    re-uploading after an upgrade keeps one pipeline with a version history."""
    package = _package(package)
    check_backend(client, package)
    pipeline_id = client.get_pipeline_id(name)
    if pipeline_id is None:
        pipeline = client.upload_pipeline(
            pipeline_package_path=package.source, pipeline_name=name, description=description
        )
        return {"pipeline_id": pipeline.pipeline_id, "version": "initial"}
    version_name = f"{name}-{os.urandom(4).hex()}"
    version = client.upload_pipeline_version(
        pipeline_package_path=package.source, pipeline_version_name=version_name, pipeline_id=pipeline_id
    )
    return {"pipeline_id": pipeline_id, "version_id": version.pipeline_version_id, "version": version_name}


def submit(
    client: Any,
    package: PackageLike,
    arguments: dict[str, Any],
    *,
    experiment: str,
    run_name: str | None = None,
    namespace: str | None = None,
    pipeline_root: str | None = None,
    service_account: str | None = None,
) -> str:
    """Start one run of the pipeline in `experiment` (created if missing); returns the run id.
    The arguments are checked first (validate_run_arguments): nothing is sent if they are bad."""
    package = _package(package)
    validate_run_arguments(package, arguments)
    check_backend(client, package)
    result = client.create_run_from_pipeline_package(
        package.source,
        arguments=arguments,
        run_name=run_name,
        experiment_name=experiment,
        namespace=namespace,
        pipeline_root=pipeline_root,
        enable_caching=False,  # the steps that touch the store must never replay an old result
        service_account=service_account,
    )
    return str(result.run_id)


def latest_version(client: Any, pipeline_id: str) -> str:
    """The id of an uploaded pipeline's newest version (what the KFP UI runs by default)."""
    listed = client.list_pipeline_versions(pipeline_id, page_size=1, sort_by="created_at desc")
    versions = getattr(listed, "pipeline_versions", None) or []
    if not versions:
        raise ClusterInputError("pipeline_id", pipeline_id, "an uploaded pipeline with at least one version")
    return str(versions[0].pipeline_version_id)


def uploaded_package(client: Any, pipeline_id: str, version_id: str) -> CompiledPackage:
    """The package a version of an uploaded pipeline holds, as the KFP API returns it."""
    version = client.get_pipeline_version(pipeline_id, version_id)
    return CompiledPackage.from_api(version.pipeline_spec, f"pipeline {pipeline_id} version {version_id}")


def schedule(
    client: Any,
    package: PackageLike | None,
    arguments: dict[str, Any],
    *,
    cron: str,
    max_concurrency: int,
    no_catchup: bool,
    experiment: str,
    name: str,
    namespace: str | None = None,
    pipeline_id: str | None = None,
    version_id: str | None = None,
    service_account: str | None = None,
) -> str:
    """Create a recurring run (one recurrence per cron tick) and return its id.

    Runs the given package, or an uploaded pipeline (`pipeline_id`; `version_id`, default its newest
    version), whose own spec the arguments are checked against. `no_catchup` skips the ticks missed while
    the schedule was paused instead of backfilling them, which for a retraining job is usually what you want.
    """
    cron = validate_cron(cron)
    max_concurrency = validate_max_concurrency(max_concurrency)
    if version_id and not pipeline_id:
        raise ClusterInputError("pipeline_id", None, f"the uploaded pipeline version {version_id} belongs to")
    if pipeline_id and package is not None:
        raise ClusterInputError("package", str(package), "no package with --pipeline-id (the uploaded one runs)")
    if pipeline_id:
        version_id = version_id or latest_version(client, pipeline_id)
        package = uploaded_package(client, pipeline_id, version_id)
    elif package is None:
        raise ClusterInputError("package", None, "a pipeline package, or --pipeline-id of an uploaded pipeline")
    package = _package(package)
    validate_run_arguments(package, arguments)
    check_backend(client, package)
    experiment_id = client.create_experiment(name=experiment, namespace=namespace).experiment_id
    recurring = client.create_recurring_run(
        experiment_id=experiment_id,
        job_name=name,
        description=f"zeus-kfp recurring job, cron '{cron}'",
        cron_expression=cron,
        max_concurrency=max_concurrency,
        no_catchup=no_catchup,
        params=arguments,
        pipeline_package_path=None if pipeline_id else package.source,
        pipeline_id=pipeline_id,
        version_id=version_id,
        enable_caching=False,
        service_account=service_account,
    )
    return str(recurring.recurring_run_id)
