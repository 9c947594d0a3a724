"""The fleet pipeline: one fleet-report step over a namespace's store, to schedule daily or weekly in KFP (its
recurring runs keep a dated record of what zeus-kfp saved), compiled per KFP backend as the main pipeline is.

The step gets what a store step of the main pipeline gets (pipelines/platform.store_step: the store's Secret and
endpoint, its namespace, retries where the backend honours them, caching off) and the compiled YAML must pass
the same backend checks (pipelines/compat.py), so wherever the recurrence pipeline runs, this one does.
"""

from pathlib import Path

from kfp import dsl

from zeus_kfp.components.fleet import fleet_report
from zeus_kfp.components.image import resolve_images
from zeus_kfp.fleet.figures import DEFAULT_CARBON_INTENSITY
from zeus_kfp.pipelines.backends import get_backend
from zeus_kfp.pipelines.compile import DEFAULT_STORE_URI, cluster_options, write_checked
from zeus_kfp.pipelines.platform import ClusterOptions, store_step

FLEET_PIPELINE_NAME = "zeus-kfp-fleet"


def build_fleet_pipeline(
    *, store_uri: str = DEFAULT_STORE_URI, image: str | None = None, options: ClusterOptions | None = None
):
    """The pipeline function: its parameters are the step's (every run may override them). image: the step's
    (None: the component's own, for kfp.local); options: a cluster's (None: none, as kfp.local needs)."""
    step = fleet_report
    if image is not None and image != fleet_report.component_spec.implementation.container.image:
        step = dsl.component(fleet_report.python_func, base_image=image, install_kfp_package=False)

    @dsl.pipeline(
        name=FLEET_PIPELINE_NAME,
        description="What zeus-kfp saved across the jobs of a store: per job and in total.",
    )
    def zeus_fleet(
        store_uri: str = store_uri,
        jobs: str = "",
        since: str = "",
        until: str = "",
        carbon_intensity: float = DEFAULT_CARBON_INTENSITY,
        namespace: str = "",
    ):
        """zeus-kfp fleet.

        Args:
            store_uri: The store whose jobs to report ({namespace}: the run's own).
            jobs: Only jobs matching these ids or patterns, separated by commas; empty: every job.
            since: Recurrences that ended from then on (ISO 8601 or a span ago such as 30d).
            until: Recurrences that ended before then.
            carbon_intensity: The grid's carbon intensity in gCO2/kWh.
            namespace: The namespace the report names; empty: read off the store URI.
        """
        task = step(store_uri=store_uri, jobs=jobs, since=since, until=until, carbon_intensity=carbon_intensity,
                    namespace=namespace)  # fmt: skip
        if options is not None:
            store_step(task, "report", options, nested=False)

    return zeus_fleet


def compile_fleet_pipeline(
    path: str | Path,
    *,
    kfp_backend: str | None = None,
    image: str | None = None,
    image_repo: str | None = None,
    store_uri: str | None = None,
    minio_secret: str | None = None,
    s3_endpoint: str | None = None,
    s3_secure: bool | None = None,
) -> Path:
    """Write the fleet pipeline for `kfp_backend` (None: the latest) to `path`, checked against the backend's
    hazards as compile_pipeline's is (IncompatiblePipelineError, nothing written). image / image_repo: the CPU
    image (components.image.resolve_images); minio_secret / s3_endpoint: the store's, as for the main pipeline."""
    backend = get_backend(kfp_backend)
    options = cluster_options(backend, gpus=0, zeusd=False, minio_secret=minio_secret, s3_endpoint=s3_endpoint,
                              s3_secure=s3_secure)  # fmt: skip
    images = resolve_images(image=image, train_image=None, image_repo=image_repo, gpus=0, pods_need_cuda=False)
    pipeline = build_fleet_pipeline(store_uri=store_uri or DEFAULT_STORE_URI, image=images.steps, options=options)
    return write_checked(pipeline, backend, path)
