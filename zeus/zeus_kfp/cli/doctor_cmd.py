"""`zeus-kfp doctor`: a preflight of the cluster a pipeline will run on (see pipelines/doctor.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from zeus_kfp.cli.application import app


@app.command()
def doctor(
    host: Annotated[str | None, typer.Option("--host", help="KFP API URL (default: env KFP_HOST).")] = None,
    namespace: Annotated[
        str | None, typer.Option(help="Your Kubeflow namespace / profile (default: env KFP_NAMESPACE).")
    ] = None,
    token_env: Annotated[
        str, typer.Option(help="Environment variable holding the bearer token (never printed).")
    ] = "KFP_TOKEN",
    package: Annotated[
        Path | None, typer.Option(help="The compiled pipeline YAML: its target backend and default store.")
    ] = None,
    kfp_backend: Annotated[
        str | None, typer.Option(help="The backend you compile for, when no --package says it (2.5, 2.15, 2.16, 2.17).")
    ] = None,
    store: Annotated[str | None, typer.Option(help="Store URI to check (default: the package's default).")] = None,
) -> None:
    """Check, before a run, that the cluster can run the pipeline: the backend version against the
    compiled target and its hazards, the namespace with the token, and the store from here. Prints
    what it could not check. Exit 1 when a check fails."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import ClusterInputError, Connection
    from zeus_kfp.pipelines.doctor import FAIL, run_doctor

    conn = Connection.from_env(host, namespace, token_env)
    if package is not None and not package.is_file():
        raise ClusterInputError("package", str(package), "an existing pipeline YAML (zeus-kfp compile)")
    findings = run_doctor(
        conn.host,
        token=os.environ.get(conn.token_env) or None,
        namespace=conn.namespace,
        package=package,
        kfp_backend=kfp_backend,
        store_uri=store,
    )
    for finding in findings:
        typer.echo(str(finding))
    failed = sum(f.status == FAIL for f in findings)
    typer.echo(f"{failed} check(s) failed" if failed else "no check failed")
    if failed:
        raise typer.Exit(1)
