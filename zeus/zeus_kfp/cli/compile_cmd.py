"""`zeus-kfp compile`: the recurrence pipeline's YAML for one KFP backend (2.5, 2.15 or 2.17),
with the pods' scheduling fields. It refuses, naming the option, what that backend cannot run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zeus_kfp.cli.application import app
from zeus_kfp.cli.own_job import (
    COLLECTOR_HELP,
    KEEP_HELP,
    PATTERN_HELP,
    load_spec_file,
    own_spec,
    setting_options,
    split_command,
    text_option,
)
from zeus_kfp.errors import FieldError
from zeus_kfp.run_settings import RunSettings

COMPILE_HELP = (
    "Compile the recurrence pipeline to a YAML the Kubeflow UI and kfp.Client accept, for your KFP backend "
    "(2.5 = Kubeflow 1.10, 2.15 = Kubeflow 1.11, 2.16 = Kubeflow 26.03, 2.17 = latest standalone). The YAML is "
    "checked against that backend's known hazards before it is written; no credential is ever written into it."
)
Repeated = list[str] | None
OWN = "Your own job"
RUN = "How its runs run (any job: the run parameters' defaults for the recurrence gate and the dispatch timeout)"
PatternOpt = text_option(PATTERN_HELP, OWN)
CollectorOpt = text_option(COLLECTOR_HELP, OWN)
KeepOpt = text_option(KEEP_HELP, OWN)


def _own_job(
    command: str | None,
    spec_file: Path | None,
    zeus_aware: bool,
    metric_pattern: str | None,
    preprocess: str | None,
    settings: dict,
    metrics_collector: str | None = None,
    keep: str | None = None,
    launcher: str = "local",
) -> dict:
    """compile_pipeline's job arguments: your command and spec (the file's settings, the options over
    them), or {} for the example job."""
    given = {name: value for name, value in settings.items() if value is not None}
    if command is None:
        own = (spec_file, metric_pattern, preprocess, metrics_collector, keep)
        if zeus_aware or given or any(value is not None for value in own):
            raise FieldError("options", "given without --command", "--spec, the job's setting options, "
                             "--zeus-aware, --metric-pattern, --metrics-collector, --keep and --preprocess only "
                             "with --command")  # fmt: skip
        return {}
    if spec_file is None and not given:
        raise FieldError(
            "spec", None, "a YAML or JSON file of your job's JobSpec fields (or its options), with --command"
        )
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps.inputs import check_trial_inputs

    argv = split_command(command, local=False)
    # What the train step would refuse, refused now (the paths are the image's: not checked here).
    collector = check_trial_inputs(
        command=argv,
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern or "",
        metrics_collector=_collector_text(metrics_collector),
        keep=keep or "",
        launcher=launcher,
    ).collector
    pinned = "max_power_w" in given or (spec_file is not None and "max_power_w" in load_spec_file(spec_file))
    return {
        "spec": own_spec(spec_file, given),
        "read_max_power": not pinned,  # unless the job pins it, the runs read their GPU's
        "command": argv,
        "zeus_aware": zeus_aware,
        "metric_pattern": metric_pattern or "",
        "metrics_collector": collector.to_json() if metrics_collector else "",
        "keep": keep or "",
        "preprocess": preprocess or "",
    }


def _collector_text(value: str | None) -> str:
    """--metrics-collector as given (JSON or YAML, or @file.yaml), as the train step reads it."""
    if not value:
        return ""
    from zeus_kfp.train.collectors import CollectorSpec

    return CollectorSpec.from_arg(value).to_json()


def _images_line(path: Path) -> str:
    """The images the package names, read back from it: what the cluster must be able to pull."""
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.package import CompiledPackage

    package = CompiledPackage.read(path)
    train = package.image("attempt-1-train")
    pods = package.env("attempt-1-train").get("ZEUS_LAUNCH_IMAGE", train)
    return (
        f"images (the cluster must be able to pull them): store steps {package.image('preprocess')}, "
        f"train {train}, a cluster trial's pods {pods}"
    )


@app.command(name="compile", help=COMPILE_HELP)
@setting_options(OWN)
@setting_options(RUN, RunSettings, param="run_settings")
def compile_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the pipeline YAML.")] = Path(
        "zeus_pipeline.yaml"
    ),
    kfp_backend: Annotated[
        str,
        typer.Option(
            help="KFP backend the cluster runs: 2.5 (Kubeflow 1.10), 2.15 (Kubeflow 1.11), 2.16 (Kubeflow 26.03) or "
            "2.17 (standalone)."
        ),
    ] = "2.17",
    attempts: Annotated[int, typer.Option(help="Trials per recurrence at most (fixed at compile time).")] = 5,
    gpus: Annotated[
        int | None,
        typer.Option(help="GPUs the train step requests; 0 = CPU only. Default 1, or 0 with a cluster --launcher."),
    ] = None,
    launcher: Annotated[
        str,
        typer.Option(
            help="Where the runs' trials run by default: local, torchrun (in train's pod), trainjob or pytorchjob "
            "(a Kubeflow job whose pods hold the GPUs, the train step none)."
        ),
    ] = "local",
    accelerator: Annotated[str, typer.Option(help="The GPU resource name train requests.")] = "nvidia.com/gpu",
    minio_secret: Annotated[
        str | None,
        typer.Option(
            help="Kubernetes Secret with keys accesskey/secretkey for the store (KFP's: mlpipeline-minio-artifact)."
        ),
    ] = None,
    s3_endpoint: Annotated[
        str | None,
        typer.Option(
            help="Store endpoint, host:port or http(s)://host:port (a bare host:port is http). Default: the backend's "
            "own object store, minio-service.kubeflow:9000 (2.5, 2.15) or seaweedfs.kubeflow:9000 (2.17)."
        ),
    ] = None,
    s3_secure: Annotated[
        bool | None, typer.Option("--s3-secure/--s3-insecure", help="https / http for a bare host:port (default http).")
    ] = None,
    zeusd: Annotated[
        bool, typer.Option(help="Give train the node IP as ZEUSD_HOST so power limits go through zeusd (deploy/zeusd).")
    ] = True,
    zeusd_token_secret: Annotated[
        str | None,
        typer.Option(
            help="A Secret whose key 'token' is zeusd's bearer token (deploy/zeusd: its JWT auth); train and a "
            "cluster trial's pods get it as ZEUSD_TOKEN, by reference, never in the YAML."
        ),
    ] = None,
    image_repo: Annotated[
        str | None,
        typer.Option(
            help="Where you pushed the images (make push-image IMAGE_REPO=...): its -cpu tag for the store steps, "
            "its -cuda tag for train. Default: $ZEUS_KFP_IMAGE_REPO."
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(help="Image of the store steps (default: $ZEUS_KFP_IMAGE, else --image-repo's -cpu tag)."),
    ] = None,
    train_image: Annotated[
        str | None,
        typer.Option(
            help="Image of train and a cluster trial's pods, e.g. your own with your script (default: "
            "$ZEUS_KFP_TRAIN_IMAGE, else --image-repo's -cuda tag). Given alone, every step runs on it."
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Default store URI of the runs (a run parameter). Default: s3://mlpipeline/private/{namespace}/"
            "zeus-kfp, {namespace} being the run's own, read in its pods (allowed for that namespace's key in "
            "multi-user mode, not expired by KFP's artifact retention)."
        ),
    ] = None,
    policy: Annotated[str, typer.Option(help="Default batch-size policy of the runs (a run parameter).")] = "default",
    requests: Annotated[
        Repeated,
        typer.Option(
            "--requests", help="STEP=CPU,MEMORY (repeatable; STEP: preprocess, bandit, train, feedback, report, store)."
        ),
    ] = None,
    limits: Annotated[
        Repeated, typer.Option("--limits", help="STEP=CPU,MEMORY limits (repeatable; '-' unsets, e.g. train=-,64Gi).")
    ] = None,
    train_node_selector: Annotated[
        Repeated,
        typer.Option(
            help="KEY=VALUE node label train must run on (repeatable), e.g. nvidia.com/gpu.product=NVIDIA-H100-NVL."
        ),
    ] = None,
    train_toleration: Annotated[
        Repeated,
        typer.Option(
            help="KEY[=VALUE][:EFFECT] taint train tolerates (repeatable). Default nvidia.com/gpu:NoSchedule; 'none'."
        ),
    ] = None,
    run_as_user: Annotated[int | None, typer.Option(help="UID the containers run as (KFP 2.17 only).")] = None,
    image_pull_secret: Annotated[
        Repeated,
        typer.Option(
            help="Secret to pull the images from a private registry with (repeatable): every step, trial pods."
        ),
    ] = None,
    shm_size: Annotated[
        str, typer.Option(help="/dev/shm of train and a cluster trial's pods (memory-backed; 'none': the runtime's).")
    ] = "8Gi",
    trial_timeout: Annotated[
        float, typer.Option(help="Seconds a cluster trial's job may run at most (its deadline), default a day.")
    ] = 86400.0,
    store_retries: Annotated[
        int, typer.Option(help="Retries of a failed store step (where the backend honours them).")
    ] = 3,
    command: Annotated[
        str | None,
        typer.Option(
            help="Your training command inside the train image, shell-style, e.g. '{python} /opt/app/train.py "
            "--batch-size {batch_size}' (the runs' default; needs --spec). Default: the example job.",
            rich_help_panel=OWN,
        ),
    ] = None,
    spec_file: Annotated[
        Path | None, typer.Option("--spec", help="YAML or JSON file of your job's JobSpec fields.", rich_help_panel=OWN)
    ] = None,
    zeus_aware: Annotated[
        bool,
        typer.Option(
            "--zeus-aware/--plain", help="Your script uses ZeusDataLoader, or prints its metric.", rich_help_panel=OWN
        ),
    ] = False,
    metric_pattern: PatternOpt = None,
    metrics_collector: CollectorOpt = None,
    keep: KeepOpt = None,
    preprocess: Annotated[
        str | None,
        typer.Option(help="Once per recurrence: module:function or a command with {output}.", rich_help_panel=OWN),
    ] = None,
    fleet: Annotated[
        bool,
        typer.Option(
            "--fleet",
            help="Compile the fleet pipeline instead (docs/fleet.md): the backend, image and store options apply.",
        ),
    ] = False,
    settings: dict | None = None,  # one option per other JobSpec setting (zeus_kfp.cli.own_job.setting_options)
    run_settings: dict | None = None,  # one option per run setting (zeus_kfp.run_settings), for any job
) -> None:
    # deferred: kfp takes seconds to import, and `zeus-kfp --help` loads every command module
    from zeus_kfp.pipelines.compile import DEFAULT_STORE_URI, compile_pipeline
    from zeus_kfp.pipelines.platform import parse_node_selector, parse_resources, parse_tolerations

    if fleet:
        from zeus_kfp.pipelines.fleet import compile_fleet_pipeline

        path = compile_fleet_pipeline(output, kfp_backend=kfp_backend, image=image, image_repo=image_repo,
                                      store_uri=store, minio_secret=minio_secret, s3_endpoint=s3_endpoint,
                                      s3_secure=s3_secure)  # fmt: skip
        typer.echo(f"wrote {path}: the fleet pipeline for KFP {kfp_backend} (schedule it with zeus-kfp schedule "
                   f"--package {path} --name zeus-kfp-fleet --cron '0 0 6 * * *')")  # fmt: skip
        return

    job = _own_job(command, spec_file, zeus_aware, metric_pattern, preprocess, settings or {}, metrics_collector, keep,
                   launcher)  # fmt: skip
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.steps import run_settings_from_params

    given = {name: value for name, value in (run_settings or {}).items() if value is not None}
    path = compile_pipeline(
        output,
        launcher=launcher,
        image_pull_secrets=image_pull_secret or (),
        shm_size=None if shm_size.lower() in ("", "none") else shm_size,
        trial_timeout_s=trial_timeout,
        kfp_backend=kfp_backend,
        attempts=attempts,
        image=image,
        train_image=train_image,
        image_repo=image_repo,
        store_uri=store,
        policy=policy,
        gpus=gpus,
        accelerator=accelerator,
        minio_secret=minio_secret,
        s3_endpoint=s3_endpoint,
        s3_secure=s3_secure,
        zeusd=zeusd,
        zeusd_token_secret=zeusd_token_secret,
        resources=parse_resources(requests, limits),
        train_node_selector=parse_node_selector(train_node_selector),
        train_tolerations=parse_tolerations(train_toleration),
        run_as_user=run_as_user,
        store_retries=store_retries,
        run_settings=run_settings_from_params(**given),
        **job,
    )
    pinned = not job.get("read_max_power", True)
    train_gpus = gpus if gpus is not None else (0 if launcher in ("trainjob", "pytorchjob") else 1)
    typer.echo(
        f"wrote {path} for KFP {kfp_backend} ({attempts} attempts; launcher {launcher}, "
        f"{train_gpus} GPU(s) on the train step)"
    )
    typer.echo(_images_line(path))
    default_store = store or DEFAULT_STORE_URI
    where = " ({namespace}: the namespace each run's pods are in)" if "{namespace}" in default_store else ""
    typer.echo(f"default store: {default_store}{where}")
    typer.echo(
        f"time priced at max_power_w={job['spec'].max_power_w:g} W (pinned)"
        if pinned
        else "time priced at the GPU's maximum power limit, read at run time by the gpu-power step (max_power_w 0)"
    )
    if kfp_backend.startswith("2.5"):
        typer.echo("note: KFP 2.5 ignores retries of nested steps, so only the first attempt's store steps retry")
    if not minio_secret:
        typer.echo(
            "note: no --minio-secret: the steps get no store credentials; pass the Secret that holds "
            "accesskey/secretkey (KFP's own is mlpipeline-minio-artifact)"
        )
