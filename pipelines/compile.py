"""Compile the recurrence pipeline to the YAML the Kubeflow UI and kfp.Client accept, for one KFP
backend (pipelines/backends.py), checked against that backend's hazards before it is written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from kfp import compiler

from components.image import IMAGE_EXAMPLES_DIR, resolve_images
from pipelines.backends import Backend, BackendError, get_backend
from pipelines.compat import Violation, check
from pipelines.dag import DEFAULT_ATTEMPTS, EXAMPLE_PREPROCESS, build_pipeline
from pipelines.platform import (
    DEFAULT_RESOURCES,
    GPU_RESOURCE,
    GPU_TOLERATION,
    STORE_RETRIES,
    ClusterOptions,
    Resources,
    Toleration,
)
from zeus.job import JobSpec
from zeus.steps import PYTHON_TOKEN
from zeus.steps.params import NAMESPACE_TOKEN
from zeus.store.s3 import endpoint_url, resolve_endpoint

# Where the job's history lives on a cluster unless a run says otherwise: a prefix of KFP's own
# bucket that a namespace's key may use in multi-user mode too (mlpipeline/private/<ns>/), and
# that KFP's artifact retention (ARTIFACT_RETENTION_DAYS: a lifecycle rule on private-artifacts/)
# does not expire. <ns> is the namespace the run's pods are in, read by each step at run time
# (zeus.steps.params.resolve_store_uri), never the compiling machine's: an uploaded pipeline is shared
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
    from zeus.train import example_spec

    return example_spec(), [PYTHON_TOKEN, f"{IMAGE_EXAMPLES_DIR}/train_zeus.py"]


def store_endpoint(backend: Backend, endpoint: str | None, secure: bool | None) -> str:
    """The store endpoint the pods get, as http(s)://host:port by the store's one rule
    (zeus.store.s3.resolve_endpoint); default: the backend's own object store."""
    flag = None if secure is None else str(secure).lower()
    host, is_secure = resolve_endpoint(endpoint or backend.store_endpoint, flag)
    return endpoint_url(host, is_secure)


def cluster_options(
    backend: Backend,
    *,
    gpus: int = 1,
    accelerator: str = GPU_RESOURCE,
    minio_secret: str | None = None,
    s3_endpoint: str | None = None,
    s3_secure: bool | None = None,
    zeusd: bool = True,
    resources: Mapping[str, Resources] | None = None,
    train_node_selector: Mapping[str, str] | None = None,
    train_tolerations: Iterable[Toleration] | None = None,
    run_as_user: int | None = None,
    store_retries: int = STORE_RETRIES,
) -> ClusterOptions:
    """ClusterOptions for `backend`, refusing what it cannot run (BackendError names the field)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"invalid gpus={gpus!r}: allowed an integer >= 0 (0 = CPU only)")
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
        store_retries=store_retries,
        retries_nested=backend.retries_nested,
        secret_optional_field=backend.secret_optional_field,
        resources=merged,
        train_node_selector=tuple(sorted((train_node_selector or {}).items())),
        train_tolerations=(GPU_TOLERATION,) if train_tolerations is None else tuple(train_tolerations),
        run_as_user=run_as_user,
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
    **cluster: object,
) -> Path:
    """Write the pipeline YAML for `kfp_backend` (2.5, 2.15 or 2.17; None: the latest) to `path`.

    attempts: trials per recurrence (fixed at compile time). image / train_image / image_repo: where the
    images are (components.image.resolve_images: refused when nothing says). store_uri: the
    runs' default store (default: DEFAULT_STORE_URI, in the run's own namespace). `cluster`: the keywords of
    cluster_options (gpus, minio_secret, s3_endpoint, resources, tolerations, ...).
    spec/command/preprocess/zeus_aware/metric_pattern: the job's default parameters (default: the
    example job, Zeus-aware). No
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
    images = resolve_images(image=image, train_image=train_image, image_repo=image_repo, gpus=options.gpus)
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
    )
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
