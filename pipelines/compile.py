"""Compile the recurrence pipeline to the YAML the Kubeflow UI and kfp.Client accept."""

from pathlib import Path

from kfp import compiler

from components.image import IMAGE_EXAMPLES_DIR
from pipelines.dag import DEFAULT_ATTEMPTS, EXAMPLE_PREPROCESS, ClusterOptions, build_pipeline
from zeus.job import JobSpec
from zeus.steps import PYTHON_TOKEN

# Where the job's history lives on a cluster unless a run says otherwise: a prefix in the
# bucket of KFP's own MinIO (reached with the Secret given by minio_secret).
DEFAULT_CLUSTER_STORE = "s3://mlpipeline/zeus-kfp"
DEFAULT_S3_ENDPOINT = "minio-service.kubeflow:9000"


def default_job() -> tuple[JobSpec, list[str]]:
    """The example job and its Zeus-aware training command inside the component image: the
    pipeline parameters' defaults on a cluster (every run may override them)."""
    from zeus.train import example_spec

    return example_spec(), [PYTHON_TOKEN, f"{IMAGE_EXAMPLES_DIR}/train_zeus.py"]


def compile_pipeline(
    path: str | Path,
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    gpus: int = 1,
    minio_secret: str | None = None,
    s3_endpoint: str | None = None,
    s3_secure: bool = False,
    zeusd: bool = True,
    image: str | None = None,
    store_uri: str = DEFAULT_CLUSTER_STORE,
    policy: str = "default",
    spec: JobSpec | None = None,
    command: list[str] | None = None,
    preprocess: str | None = None,
) -> Path:
    """Write the pipeline YAML to `path` and return it.

    attempts: trials per recurrence (fixed at compile time); gpus: GPUs the train step requests
    (0 = CPU); minio_secret: a Kubernetes Secret with keys accesskey/secretkey for the store
    (s3_endpoint defaults to KFP's MinIO when a secret is given); image: the component image.
    spec/command/preprocess: the job's default parameters (default: the example job, whose data
    the preprocess step makes with zeus.train.example:make_dataset). No credential is
    ever a parameter, so none can end up in the YAML.
    """
    if not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"invalid gpus={gpus!r}: allowed an integer >= 0 (0 = CPU only)")
    if spec is None or command is None:
        example_spec, example_command = default_job()
        spec = spec or example_spec.with_changes(num_gpus=max(gpus, 1))
        command = command or example_command
        preprocess = EXAMPLE_PREPROCESS if preprocess is None else preprocess
    endpoint = s3_endpoint or (DEFAULT_S3_ENDPOINT if minio_secret else None)
    options = ClusterOptions(
        gpus=gpus, minio_secret=minio_secret, s3_endpoint=endpoint, s3_secure=s3_secure, zeusd=zeusd
    )
    pipeline = build_pipeline(
        spec,
        command,
        attempts=attempts,
        store_uri=store_uri,
        policy=policy,
        preprocess=preprocess or "",
        options=options,
        image=image,
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(pipeline, str(out))
    return out
