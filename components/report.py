"""report: the recurrence for people in the KFP UI (Markdown with plots: cost per recurrence
against the default config, batch size per trial, the posterior per batch size, the power
profile) and Metrics with the recurrence's energy, time and cost."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def report(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    reached: bool,
    policy: str,
    markdown: Output[Markdown],
    metrics: Output[Metrics],
):
    """Writes the recurrence's report and Metrics from the store, appends its scalars to the job's
    TensorBoard log, compacts the job's events and marks the job completed.

    Args:
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        job_id: The job.
        recurrence_id: The recurrence to report.
        reached: Whether the last attempt ended the recurrence (taking it orders the report after every attempt).
        policy: The run's batch-size policy, whose view of the history (per batch size) the report shows.
        markdown: The report for the KFP UI: Markdown with its plots embedded.
        metrics: The recurrence's energy, time and cost (and whether it reached).
    """
    from zeus_kfp.steps.report import report as step

    step(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        reached=reached,
        markdown_path=markdown.path,
        metrics=metrics,
        policy=policy,
    )
