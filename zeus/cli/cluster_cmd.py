"""`zeus-kfp upload|submit|schedule`: the compiled pipeline on a Kubeflow cluster through kfp.Client.

The commands are thin: options -> pipelines.client, which validates everything and talks to
kfp.Client. Without --package they compile the project's pipeline into a temporary file with
the compile options given (the same ones `zeus-kfp compile` takes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from zeus.cli.app import app
from zeus.cli.errors import one_line

Host = Annotated[str | None, typer.Option("--host", help="KFP API URL (default: env KFP_HOST).")]
Namespace = Annotated[str | None, typer.Option(help="Kubeflow namespace / profile (default: env KFP_NAMESPACE).")]
TokenEnv = Annotated[
    str, typer.Option(help="Name of the environment variable holding the bearer token (the value is never printed).")
]
Package = Annotated[
    Path | None, typer.Option(help="A pipeline YAML from `zeus-kfp compile`; default: compile one now.")
]
Attempts = Annotated[int | None, typer.Option(help="Compile: guarded attempts per recurrence.")]
Gpus = Annotated[int | None, typer.Option(help="Compile: GPUs for the train step (0 = CPU).")]
KfpBackend = Annotated[
    str | None, typer.Option(help="Compile: the cluster's KFP backend, 2.5, 2.15 or 2.17 (default 2.17).")
]
MinioSecret = Annotated[str | None, typer.Option(help="Compile: Kubernetes Secret with the MinIO credentials.")]
Image = Annotated[str | None, typer.Option(help="Compile: the component image.")]
Params = Annotated[
    list[str] | None, typer.Option("--param", help="Pipeline argument KEY=VALUE (repeatable), e.g. max_epochs=10.")
]
Experiment = Annotated[str, typer.Option(help="KFP experiment (created if missing).")]
ServiceAccount = Annotated[str | None, typer.Option(help="Kubernetes service account for the run's pods.")]


@contextlib.contextmanager
def _cluster(
    host: str | None,
    namespace: str | None,
    token_env: str,
    package: Path | None,
    compile_options: dict[str, Any],
) -> Iterator[tuple[Any, Path, Any]]:
    """Get the package and a `connect()` that makes the kfp.Client: a command checks what it can
    (the run's arguments) before it connects, so bad input never reaches the network. Our input
    errors reach the app's error handler (exit 2, naming the field); an API or network failure
    exits 1 here saying what to check (never echoing the token)."""
    from kfp_server_api.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from pipelines import client as kfp_client

    conn = kfp_client.Connection.from_env(host, namespace, token_env)
    try:
        with kfp_client.pipeline_package(package, **compile_options) as path:
            yield (lambda: kfp_client.connect(conn)), path, conn
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


def _compile_options(
    attempts: int | None,
    gpus: int | None,
    kfp_backend: str | None,
    minio_secret: str | None,
    image: str | None,
    namespace: str | None,
) -> dict[str, Any]:
    """What to compile with when no --package is given (the namespace picks the default store)."""
    return {
        "attempts": attempts,
        "gpus": gpus,
        "kfp_backend": kfp_backend,
        "minio_secret": minio_secret,
        "image": image,
        "namespace": namespace,
    }


def _run_arguments(pairs: list[str] | None, path: Path) -> dict[str, Any]:
    """The --param pairs as the package's run arguments, checked against it: submit and schedule both
    call this before they connect, so bad input never reaches the network."""
    from pipelines.client import parse_arguments, pipeline_parameters, validate_run_arguments
    from zeus.train.collectors import PARAM, CollectorSpec

    arguments = parse_arguments(pairs or [], pipeline_parameters(path))
    if arguments.get(PARAM):  # checked at the edge (@file.yaml allowed), sent as canonical JSON
        arguments[PARAM] = CollectorSpec.from_arg(str(arguments[PARAM])).to_json()
    validate_run_arguments(path, arguments)
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
    attempts: Attempts = None,
    gpus: Gpus = None,
    kfp_backend: KfpBackend = None,
    minio_secret: MinioSecret = None,
    image: Image = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
) -> None:
    """Upload the pipeline to KFP (a new version if a pipeline with that name exists)."""
    from pipelines.client import upload as do_upload

    options = _compile_options(attempts, gpus, kfp_backend, minio_secret, image, namespace)
    with _cluster(host, namespace, token_env, package, options) as (connect, path, conn):
        result = do_upload(connect(), path, name, description)
    details = " ".join(f"{k}={v}" for k, v in result.items())
    typer.echo(f"uploaded pipeline {name!r}: {details}")
    _echo_ui_link(conn.host, "pipelines", result["pipeline_id"])


@app.command()
def submit(
    host: Host = None,
    experiment: Experiment = "zeus-kfp",
    run_name: Annotated[str | None, typer.Option(help="Run name (default: KFP's).")] = None,
    param: Params = None,
    package: Package = None,
    attempts: Attempts = None,
    gpus: Gpus = None,
    kfp_backend: KfpBackend = None,
    minio_secret: MinioSecret = None,
    image: Image = None,
    pipeline_root: Annotated[str | None, typer.Option(help="Where KFP keeps artifacts, e.g. s3://bucket/root.")] = None,
    service_account: ServiceAccount = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
) -> None:
    """Start one recurrence of the job on the cluster now."""
    from pipelines.client import submit as do_submit

    options = _compile_options(attempts, gpus, kfp_backend, minio_secret, image, namespace)
    with _cluster(host, namespace, token_env, package, options) as (connect, path, conn):
        arguments = _run_arguments(param, path)  # before connecting
        run_id = do_submit(
            connect(),
            path,
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
def schedule(
    cron: Annotated[str, typer.Option(help="KFP cron, 6 fields with seconds first, e.g. '0 0 2 * * *'.")],
    host: Host = None,
    max_concurrency: Annotated[int, typer.Option(help="How many recurrences may run at once (>= 1).")] = 1,
    no_catchup: Annotated[bool, typer.Option("--no-catchup", help="Skip ticks missed while paused.")] = False,
    name: Annotated[str, typer.Option(help="Recurring run name.")] = "zeus-kfp-recurring",
    experiment: Experiment = "zeus-kfp",
    param: Params = None,
    package: Package = None,
    pipeline_id: Annotated[str | None, typer.Option(help="Schedule an uploaded pipeline instead of a package.")] = None,
    version_id: Annotated[str | None, typer.Option(help="...and this version of it.")] = None,
    attempts: Attempts = None,
    gpus: Gpus = None,
    kfp_backend: KfpBackend = None,
    minio_secret: MinioSecret = None,
    image: Image = None,
    service_account: ServiceAccount = None,
    namespace: Namespace = None,
    token_env: TokenEnv = "KFP_TOKEN",
) -> None:
    """Run the job on a schedule: one recurrence per cron tick (kfp recurring run)."""
    from pipelines.client import schedule as do_schedule
    from pipelines.client import validate_cron, validate_max_concurrency

    validate_cron(cron)  # the cheap checks before compiling anything
    validate_max_concurrency(max_concurrency)
    options = _compile_options(attempts, gpus, kfp_backend, minio_secret, image, namespace)
    with _cluster(host, namespace, token_env, package, options) as (connect, path, conn):
        arguments = _run_arguments(param, path)  # before connecting
        recurring_id = do_schedule(
            connect(),
            path,
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
