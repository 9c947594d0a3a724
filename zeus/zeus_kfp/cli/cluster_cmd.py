"""`zeus-kfp upload|submit|schedule`: the compiled pipeline on a Kubeflow cluster through kfp.Client.

The commands are thin: options -> pipelines.client, which validates everything and talks to
kfp.Client. They send the package `zeus-kfp compile` wrote (--package, default ./zeus_pipeline.yaml)
and nothing else: they never compile a pipeline of their own, so what runs is what was compiled, with
its images, backend, Secret and job. A package compiled for another backend than the cluster's is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.exits import one_line
from zeus_kfp.cli.own_job import setting_options
from zeus_kfp.run_settings import RunSettings

Host = Annotated[str | None, typer.Option("--host", help="KFP API URL (default: env KFP_HOST).")]
Namespace = Annotated[str | None, typer.Option(help="Kubeflow namespace / profile (default: env KFP_NAMESPACE).")]
TokenEnv = Annotated[
    str, typer.Option(help="Name of the environment variable holding the bearer token (the value is never printed).")
]
Package = Annotated[
    Path | None,
    typer.Option(help="The pipeline YAML `zeus-kfp compile` wrote (default: ./zeus_pipeline.yaml); sent as it is."),
]
Params = Annotated[
    list[str] | None, typer.Option("--param", help="Pipeline argument KEY=VALUE (repeatable), e.g. max_epochs=10.")
]
Experiment = Annotated[str, typer.Option(help="KFP experiment (created if missing).")]
ServiceAccount = Annotated[str | None, typer.Option(help="Kubernetes service account for the run's pods.")]


def _connection(host: str | None, namespace: str | None, token_env: str) -> Any:
    """Where the KFP API is (checked first: the host is every cluster command's first need)."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import Connection

    return Connection.from_env(host, namespace, token_env)


@contextlib.contextmanager
def _cluster(conn: Any) -> Iterator[Any]:
    """A `connect()` that makes the kfp.Client: a command checks what it can (the host, the package, the run's
    arguments) before it connects, so bad input never reaches the network. Our input errors reach the app's
    error handler (exit 2, naming the field); an API or network failure exits 1 here saying what to check
    (never echoing the token)."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from kfp_server_api.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from zeus_kfp.pipelines import client as kfp_client

    token_env = conn.token_env
    try:
        yield lambda: kfp_client.connect(conn)
    except (ApiException, HTTPError, OSError) as err:
        status = getattr(err, "status", None)
        reason = getattr(err, "reason", None) or type(err).__name__
        typer.echo(
            f"error: the KFP API at {conn.host} failed"
            + (f" with HTTP {status} {reason}" if status else f": {one_line(str(reason))}")
            + f". Check --host, --namespace and that ${token_env} holds a valid token.",
            err=True,
        )
        raise typer.Exit(1) from None


def _run_arguments(pairs: list[str] | None, package: Any) -> dict[str, Any]:
    """The --param pairs as the package's run arguments, checked against it: submit and schedule both
    call this before they send anything."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import parse_arguments, validate_run_arguments
    from zeus_kfp.train.collectors import PARAM, CollectorSpec

    arguments = parse_arguments(pairs or [], package.parameters)
    if arguments.get(PARAM):  # checked at the edge (@file.yaml allowed), sent as canonical JSON
        arguments[PARAM] = CollectorSpec.from_arg(str(arguments[PARAM])).to_json()
    validate_run_arguments(package, arguments)
    return arguments


def _echo_ui_link(host: str, page: str, object_id: str) -> None:
    """Print where the KFP UI shows what a command just made (`page`: pipelines, runs, recurringrun)."""
    typer.echo(f"{host.rstrip('/')}/#/{page}/details/{object_id}")


@app.command()
def upload(
    host: Host = None,
    name: Annotated[str, typer.Option(help="Pipeline name in the KFP UI.")] = "zeus-kfp",
    description: Annotated[str, typer.Option(help="Pipeline description.")] = "Energy-optimal recurring training",
    package: Package = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
) -> None:
    """Upload the compiled pipeline to KFP (a new version if a pipeline with that name exists)."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import read_package
    from zeus_kfp.pipelines.client import upload as do_upload

    conn = _connection(host, namespace, token_env)
    compiled = read_package(package)
    with _cluster(conn) as connect:
        result = do_upload(connect(), compiled, name, description)
    details = " ".join(f"{k}={v}" for k, v in result.items())
    typer.echo(f"uploaded pipeline {name!r}: {details}")
    _echo_ui_link(conn.host, "pipelines", result["pipeline_id"])


Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Open a recurrence even if the job's period has not passed and no drift is found (it still counts "
        "against the job's max_running).",
    ),
]


# The run settings (zeus_kfp.run_settings) as options of submit and schedule: how this submission's or schedule's
# runs run, beside the job's spec. Each is the pipeline's run parameter of its name.
RUN = "How its runs run (the recurrence gate, the dispatch timeout; default: the package's)"


def _gate_params(param: list[str] | None, **given: Any) -> list[str]:
    """--param pairs with the run settings' options and --force added (those given): the pipeline's own run
    parameters, checked like any other --param (a bad value names the field and what it allows)."""
    extra = [f"{name}={str(value).lower() if isinstance(value, bool) else value}" for name, value in given.items()]
    return list(param or []) + [pair for pair, value in zip(extra, given.values(), strict=True) if value is not None]


@app.command()
@setting_options(RUN, RunSettings, param="run_settings")
def submit(
    host: Host = None,
    experiment: Experiment = "zeus-kfp",
    run_name: Annotated[str | None, typer.Option(help="Run name (default: KFP's).")] = None,
    param: Params = None,
    package: Package = None,
    pipeline_root: Annotated[str | None, typer.Option(help="Where KFP keeps artifacts, e.g. s3://bucket/root.")] = None,
    service_account: ServiceAccount = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
    force: Force = False,
    run_settings: dict | None = None,  # one option per run setting (zeus_kfp.cli.own_job.setting_options)
) -> None:
    """Start one recurrence of the compiled pipeline on the cluster now (if the recurrence gate opens one: the
    period or drift, and a free slot under max_running; --force for the first)."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import read_package
    from zeus_kfp.pipelines.client import submit as do_submit

    conn = _connection(host, namespace, token_env)
    compiled = read_package(package)
    given = _gate_params(param, **(run_settings or {}), force=force or None)
    arguments = _run_arguments(given, compiled)  # before connecting
    with _cluster(conn) as connect:
        run_id = do_submit(
            connect(),
            compiled,
            arguments,
            experiment=experiment,
            run_name=run_name,
            namespace=conn.namespace,
            pipeline_root=pipeline_root,
            service_account=service_account,
        )
    typer.echo(f"submitted run {run_id} in experiment {experiment!r}")
    _echo_ui_link(conn.host, "runs", run_id)


@app.command()
@setting_options(RUN, RunSettings, param="run_settings")
def schedule(
    cron: Annotated[str, typer.Option(help="KFP cron, 6 fields with seconds first, e.g. '0 0 2 * * *'.")],
    host: Host = None,
    max_concurrency: Annotated[int, typer.Option(help="How many recurrences may run at once (>= 1).")] = 1,
    no_catchup: Annotated[bool, typer.Option("--no-catchup", help="Skip ticks missed while paused.")] = False,
    name: Annotated[str, typer.Option(help="Recurring run name.")] = "zeus-kfp-recurring",
    experiment: Experiment = "zeus-kfp",
    param: Params = None,
    package: Package = None,
    pipeline_id: Annotated[
        str | None, typer.Option(help="Schedule an uploaded pipeline (`zeus-kfp upload` printed its id) instead.")
    ] = None,
    version_id: Annotated[
        str | None, typer.Option(help="With --pipeline-id: which version of it (default: its newest).")
    ] = None,
    service_account: ServiceAccount = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
    run_settings: dict | None = None,  # one option per run setting (zeus_kfp.cli.own_job.setting_options)
) -> None:
    """Run the job on a schedule: each cron tick asks the recurrence gate, which opens a recurrence when the job's
    period has passed or its data drifted, and a slot under max_running is free (kfp recurring run). Schedule
    often (hourly) with a longer --period-s, or a drift detector, to train only when needed."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import (
        ClusterInputError,
        latest_version,
        read_package,
        uploaded_package,
        validate_cron,
        validate_max_concurrency,
    )
    from zeus_kfp.pipelines.client import schedule as do_schedule

    validate_cron(cron)  # the cheap checks before reading anything
    validate_max_concurrency(max_concurrency)
    conn = _connection(host, namespace, token_env)
    if pipeline_id and package is not None:
        raise ClusterInputError("package", str(package), "no --package with --pipeline-id (the uploaded one runs)")
    compiled = None if pipeline_id else read_package(package)
    param = _gate_params(param, **(run_settings or {}))
    arguments = _run_arguments(param, compiled) if compiled is not None else None  # before connecting
    with _cluster(conn) as connect:
        client = connect()
        if arguments is None:  # an uploaded pipeline: its own parameters say what --param may set
            version_id = version_id or latest_version(client, pipeline_id)
            arguments = _run_arguments(param, uploaded_package(client, pipeline_id, version_id))
        recurring_id = do_schedule(
            client,
            compiled,
            arguments,
            cron=cron,
            max_concurrency=max_concurrency,
            no_catchup=no_catchup,
            experiment=experiment,
            name=name,
            namespace=conn.namespace,
            pipeline_id=pipeline_id,
            version_id=version_id,
            service_account=service_account,
        )
    typer.echo(f"scheduled {name!r} ({cron}, max {max_concurrency} at once): recurring_run_id={recurring_id}")
    _echo_ui_link(conn.host, "recurringrun", recurring_id)
