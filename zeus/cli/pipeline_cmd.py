"""`zeus-kfp compile`: the recurrence pipeline as the YAML a Kubeflow cluster runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zeus.cli.app import app

COMPILE_HELP = (
    "Compile the recurrence pipeline to a YAML the Kubeflow UI and kfp.Client accept "
    "(kfp.components.load_component_from_file loads it back). No credential is ever written into it."
)


@app.command(name="compile", help=COMPILE_HELP)
def compile_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the pipeline YAML.")] = Path(
        "zeus_pipeline.yaml"
    ),
    attempts: Annotated[int, typer.Option(help="Trials per recurrence at most (fixed at compile time).")] = 5,
    gpus: Annotated[int, typer.Option(help="GPUs the train step requests (nvidia.com/gpu); 0 = CPU only.")] = 1,
    minio_secret: Annotated[
        str | None,
        typer.Option(
            help="Kubernetes Secret with keys accesskey/secretkey for the store (e.g. mlpipeline-minio-artifact)."
        ),
    ] = None,
    s3_endpoint: Annotated[
        str | None,
        typer.Option(help="Store endpoint host:port. Default with --minio-secret: minio-service.kubeflow:9000."),
    ] = None,
    s3_secure: Annotated[bool, typer.Option(help="Reach the store endpoint over HTTPS.")] = False,
    zeusd: Annotated[
        bool, typer.Option(help="Give train the node IP as ZEUSD_HOST so power limits go through the zeusd daemon.")
    ] = True,
    image: Annotated[
        str | None, typer.Option(help="Component image. Default: $ZEUS_KFP_IMAGE or the project's published image.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(help="Default store URI of the runs (a run parameter). Default: s3://mlpipeline/zeus-kfp."),
    ] = None,
    policy: Annotated[str, typer.Option(help="Default batch-size policy of the runs (a run parameter).")] = "default",
) -> None:
    from pipelines.compile import DEFAULT_CLUSTER_STORE, compile_pipeline

    try:
        path = compile_pipeline(
            output,
            attempts=attempts,
            gpus=gpus,
            minio_secret=minio_secret,
            s3_endpoint=s3_endpoint,
            s3_secure=s3_secure,
            zeusd=zeusd,
            image=image,
            store_uri=store or DEFAULT_CLUSTER_STORE,
            policy=policy,
        )
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    typer.echo(f"wrote {path} ({attempts} attempts, {gpus} GPU(s) per trial)")
    if not minio_secret and (store or DEFAULT_CLUSTER_STORE).startswith("s3://"):
        typer.echo(
            "note: no --minio-secret: the steps get no store credentials; pass the Secret that holds "
            "accesskey/secretkey (KFP's own is mlpipeline-minio-artifact)"
        )
