"""Compile the recurrence pipeline to the YAML the Kubeflow UI and kfp.Client accept, for one KFP
backend (pipelines/backends.py), checked against that backend's hazards before it is written."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from kfp import compiler

from zeus_kfp.components.image import IMAGE_EXAMPLES_DIR, resolve_images
from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec
from zeus_kfp.launch.config import (
    CLUSTER_LAUNCHERS,
    DEFAULT_SHM_SIZE,
    DEFAULT_TRIAL_TIMEOUT_S,
    DNS_SUBDOMAIN,
    LAUNCHERS,
)
from zeus_kfp.pipelines.backends import Backend, BackendError, get_backend
from zeus_kfp.pipelines.compat import Violation, check
from zeus_kfp.pipelines.dag import DEFAULT_ATTEMPTS, EXAMPLE_PREPROCESS, build_pipeline
from zeus_kfp.pipelines.platform import (
    DEFAULT_RESOURCES,
    GPU_RESOURCE,
    GPU_TOLERATION,
    STORE_RETRIES,
    ClusterOptions,
    Resources,
    Toleration,
)
from zeus_kfp.run_settings import RunSettings
from zeus_kfp.steps import PYTHON_TOKEN
from zeus_kfp.steps.params import NAMESPACE_TOKEN
from zeus_kfp.store.s3 import endpoint_url, resolve_endpoint

# Where the job's history lives on a cluster unless a run says otherwise: a prefix of KFP's own
# bucket that a namespace's key may use in multi-user mode too (mlpipeline/private/<ns>/), and
# that KFP's artifact retention (ARTIFACT_RETENTION_DAYS: a lifecycle rule on private-artifacts/)
# does not expire. <ns> is the namespace the run's pods are in, read by each step at run time
# (zeus_kfp.steps.params.resolve_store_uri), never the compiling machine's: an uploaded pipeline is shared
# by every namespace, and each must keep its own history under the prefix its own key may use.
DEFAULT_STORE_URI = f"s3://mlpipeline/private/{NAMESPACE_TOKEN}/zeus-kfp"


class IncompatiblePipelineError(ValueError):
    """The compiled pipeline trips a hazard of the backend it was compiled for (nothing is written)."""

    def __init__(self, backend: Backend, violations: list[Violation]) -> None:
        self.violations = violations
        lines = "\n".join(f"  - {v}" for v in violations)
        super().__init__(f"this pipeline would not run on KFP {backend.release} ({backend.ships_with}):\n{lines}")


def default_job() -> tuple[JobSpec, list[str]]:
    """The example job and its Zeus-aware training command inside the component image: the
    pipeline parameters' defaults on a cluster (every run may override them)."""
    from zeus_kfp.train import example_spec

    return example_spec(), [PYTHON_TOKEN, f"{IMAGE_EXAMPLES_DIR}/train_zeus.py"]


def store_endpoint(backend: Backend, endpoint: str | None, secure: bool | None) -> str:
    """The store endpoint the pods get, as http(s)://host:port by the store's one rule
    (zeus_kfp.store.s3.resolve_endpoint); default: the backend's own object store."""
    flag = None if secure is None else str(secure).lower()
    host, is_secure = resolve_endpoint(endpoint or backend.store_endpoint, flag)
    return endpoint_url(host, is_secure)


def cluster_options(
    backend: Backend,
    *,
    gpus: int | None = None,
    launcher: str = "local",
    accelerator: str = GPU_RESOURCE,
    minio_secret: str | None = None,
    s3_endpoint: str | None = None,
    s3_secure: bool | None = None,
    zeusd: bool = True,
    zeusd_token_secret: str | None = None,
    resources: Mapping[str, Resources] | None = None,
    train_node_selector: Mapping[str, str] | None = None,
    train_tolerations: Iterable[Toleration] | None = None,
    run_as_user: int | None = None,
    store_retries: int = STORE_RETRIES,
    image_pull_secrets: Iterable[str] = (),
    shm_size: str | None = DEFAULT_SHM_SIZE,
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
) -> ClusterOptions:
    """ClusterOptions for `backend`, refusing what it cannot run (BackendError names the field).

    launcher: the runs' default (a run parameter); trainjob / pytorchjob give train no GPU (its trials run on
    their job's pods), so gpus defaults to 0 for them and a GPU request is refused; else gpus defaults to 1."""
    if launcher not in LAUNCHERS:
        raise FieldError("launcher", launcher, ", ".join(LAUNCHERS))
    cluster = launcher in CLUSTER_LAUNCHERS
    gpus = (0 if cluster else 1) if gpus is None else gpus
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"invalid gpus={gpus!r}: allowed an integer >= 0 (0 = CPU only)")
    if cluster and gpus:
        raise FieldError(
            "gpus",
            gpus,
            f"0 with launcher {launcher}: its trials run on the job's pods ({accelerator or 'no GPU'} per rank), and a "
            "GPU on the train step, which only watches the job, would sit idle for the whole trial",
        )
    if zeusd_token_secret is not None and not (zeusd and DNS_SUBDOMAIN.match(str(zeusd_token_secret))):
        raise FieldError("zeusd_token_secret", zeusd_token_secret, "the name of a Secret with key token, with --zeusd")
    for name in image_pull_secrets:
        if not DNS_SUBDOMAIN.match(str(name)):
            raise FieldError("image_pull_secret", name, "the name of a Secret of type kubernetes.io/dockerconfigjson")
    if shm_size is not None and not re.fullmatch(r"[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?", str(shm_size)):
        raise FieldError("shm_size", shm_size, "a memory quantity such as 8Gi, or none")
    if isinstance(trial_timeout_s, bool) or not isinstance(trial_timeout_s, (int, float)) or not trial_timeout_s > 0:
        raise FieldError("trial_timeout_s", trial_timeout_s, "a positive number of seconds")
    if isinstance(store_retries, bool) or not isinstance(store_retries, int) or store_retries < 0:
        raise ValueError(f"invalid store_retries={store_retries!r}: allowed an integer >= 0")
    if run_as_user is not None and not backend.security_context:
        raise BackendError(
            "run_as_user",
            run_as_user,
            f"unset for KFP {backend.name}: the container securityContext exists from KFP 2.17 "
            "(the images already run as the non-root uid 1000)",
        )
    merged = dict(DEFAULT_RESOURCES)
    for step, res in (resources or {}).items():
        if step not in merged:
            raise ValueError(f"invalid resources step={step!r}: allowed one of {sorted(merged)}")
        merged[step] = res
    return ClusterOptions(
        gpus=gpus,
        accelerator=accelerator,
        minio_secret=minio_secret,
        s3_endpoint=store_endpoint(backend, s3_endpoint, s3_secure),
        zeusd=zeusd,
        zeusd_token_secret=zeusd_token_secret,
        store_retries=store_retries,
        retries_nested=backend.retries_nested,
        secret_optional_field=backend.secret_optional_field,
        resources=merged,
        train_node_selector=tuple(sorted((train_node_selector or {}).items())),
        train_tolerations=(GPU_TOLERATION,) if train_tolerations is None else tuple(train_tolerations),
        run_as_user=run_as_user,
        launcher=launcher,
        image_pull_secrets=tuple(image_pull_secrets),
        shm_size=shm_size or None,
        trial_timeout_s=float(trial_timeout_s),
    )


def compile_pipeline(
    path: str | Path,
    *,
    kfp_backend: str | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    image: str | None = None,
    train_image: str | None = None,
    image_repo: str | None = None,
    store_uri: str | None = None,
    policy: str = "default",
    spec: JobSpec | None = None,
    command: list[str] | None = None,
    preprocess: str | None = None,
    zeus_aware: bool = True,
    metric_pattern: str = "",
    metrics_collector: str = "",
    keep: str = "",
    read_max_power: bool = True,
    run_settings: RunSettings | None = None,
    **cluster: object,
) -> Path:
    """Write the pipeline YAML for `kfp_backend` (2.5, 2.15 or 2.17; None: the latest) to `path`.

    attempts: trials per recurrence (fixed at compile time). image / train_image / image_repo: where the
    images are (components.image.resolve_images: refused when nothing says). store_uri: the
    runs' default store (default: DEFAULT_STORE_URI, in the run's own namespace). `cluster`: the keywords of
    cluster_options (gpus, minio_secret, s3_endpoint, resources, tolerations, ...).
    spec/command/preprocess/zeus_aware/metric_pattern/metrics_collector/keep: the job's default parameters
    (default: the example job, Zeus-aware; metrics_collector as JSON). read_max_power: the runs read the GPU's
    maximum power limit at run time (the gpu-power step; the max_power_w parameter defaults to 0, "read it"),
    as they should unless the job pins it (False: spec.max_power_w is the default). run_settings: the defaults of
    the run settings' run parameters (zeus_kfp.run_settings; None: RunSettings()), which every run may override. No
    credential is ever a parameter, so none can end up in the YAML. The compiled pipeline is
    checked against the backend's hazards (pipelines/compat.py); IncompatiblePipelineError, and
    nothing written, when it trips one.
    """
    backend = get_backend(kfp_backend)
    options = cluster_options(backend, **cluster)  # type: ignore[arg-type]
    if spec is None or command is None:
        example_spec, example_command = default_job()
        spec = spec or example_spec.with_changes(num_gpus=max(options.gpus, 1))
        command = command or example_command
        preprocess = EXAMPLE_PREPROCESS if preprocess is None else preprocess
    images = resolve_images(
        image=image,
        train_image=train_image,
        image_repo=image_repo,
        gpus=options.gpus,
        pods_need_cuda=options.trials_use_gpus,  # a cluster trial's pods hold GPUs: the CUDA image
    )
    pipeline = build_pipeline(
        spec,
        command,
        attempts=attempts,
        store_uri=store_uri or DEFAULT_STORE_URI,
        policy=policy,
        preprocess=preprocess or "",
        options=options,
        image=images.steps,
        train_image=images.train,
        launch_image=images.launch,
        target=backend.name,
        zeus_aware=zeus_aware,
        metric_pattern=metric_pattern,
        metrics_collector=metrics_collector,
        keep=keep,
        read_max_power=read_max_power,
        run_settings=run_settings,
    )
    return write_checked(pipeline, backend, path)


def write_checked(pipeline, backend: Backend, path: str | Path) -> Path:
    """Compile `pipeline` to `path` for `backend`, written only if it trips none of the backend's hazards
    (IncompatiblePipelineError otherwise): the recurrence pipeline's and the fleet pipeline's one way out."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".zeus-kfp-compile-") as tmp:
        staged = Path(tmp) / out.name
        compiler.Compiler().compile(pipeline, str(staged))
        docs = list(yaml.load_all(staged.read_text(), Loader=yaml.CSafeLoader))
        violations = check(docs, backend.version)
        if violations:
            raise IncompatiblePipelineError(backend, violations)
        os.replace(staged, out)
    return out
