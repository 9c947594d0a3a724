"""`zeus-kfp dry-run`: print the TrainJob / PyTorchJob a cluster trial of the compiled pipeline would create
(pipelines/dry_run.py), for a given Trainer version or the one the cluster has, before anything is created."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
import yaml

from zeus_kfp.cli.application import app
from zeus_kfp.errors import FieldError


@app.command(name="dry-run")
def dry_run_cmd(
    package: Annotated[
        Path | None, typer.Option(help="The pipeline YAML `zeus-kfp compile` wrote (default: ./zeus_pipeline.yaml).")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", help="A run parameter KEY=VALUE as submit takes it, e.g. launcher=trainjob, num_nodes=2."
        ),
    ] = None,
    trainer_version: Annotated[
        str | None,
        typer.Option(
            help="The Kubeflow Trainer the TrainJob is for: 2.1 (Kubeflow 1.11), 2.2, 2.3. Default: ask the cluster "
            "(kubeconfig) which TrainJob it accepts."
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="The namespace the trial runs in (default: env KFP_NAMESPACE, else default).")
    ] = None,
    batch_size: Annotated[int | None, typer.Option(help="The trial's batch size (default: the job's default).")] = None,
    recurrence_id: Annotated[str, typer.Option(help="The recurrence (a KFP run id on a cluster).")] = "dry-run",
    attempt: Annotated[int, typer.Option(help="The attempt within the recurrence.")] = 1,
) -> None:
    """Print the exact manifest one trial would create, as YAML (kubectl apply --dry-run=server -f - takes it)."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.client import parse_arguments, read_package
    from zeus_kfp.pipelines.dry_run import dry_run, trainer_api_of

    compiled = read_package(package)
    arguments = parse_arguments(param or [], compiled.parameters)
    launcher = arguments.get("launcher", compiled.default("launcher"))
    api = trainer_api_of(trainer_version) if trainer_version else None
    if launcher == "trainjob" and api is None:
        # deferred: the kubernetes client (0.7 s) comes with it; only a cluster run needs it
        from kubernetes.config import ConfigException

        from zeus_kfp.launch.kube import load_api_client
        from zeus_kfp.launch.trainer_api import detect

        try:
            client = load_api_client()
        except ConfigException as err:  # no kubeconfig here: nothing to ask, so say what to give instead
            raise FieldError(
                "trainer_version",
                None,
                f"2.1 (Kubeflow 1.11), 2.2 or 2.3: there is no cluster to ask which TrainJob it accepts ({err}); "
                "give --trainer-version",
            ) from None
        api = detect(client)
    ns = namespace or os.environ.get("KFP_NAMESPACE") or "default"
    made = dry_run(
        compiled, arguments, namespace=ns, trainer_api=api, recurrence_id=recurrence_id, attempt=attempt,
        batch_size=batch_size,
    )  # fmt: skip
    shape = f" (TrainJob for Trainer {'v2.1' if api == 'v2.1' else 'v2.2 or later'})" if launcher == "trainjob" else ""
    typer.echo(f"# what attempt {attempt} of recurrence {recurrence_id} creates in namespace {ns}{shape}")
    for note in made.notes:
        typer.echo(f"# {note}")
    typer.echo(yaml.safe_dump(made.manifest, sort_keys=False).rstrip())
