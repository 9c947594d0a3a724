"""report: the recurrence for people in the KFP UI (Markdown with plots: cost per recurrence
against the default config, batch size per trial, the posterior per batch size, the power
profile) and Metrics with the recurrence's energy, time and cost."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def report(
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    reached: bool,
    markdown: Output[Markdown],
    metrics: Output[Metrics],
):
    """`reached` is the last attempt's outcome; taking it orders the report after every attempt."""
    from zeus import steps

    steps.report(
        store_uri=store_uri,
        job_id=job_id,
        recurrence_id=recurrence_id,
        reached=reached,
        markdown_path=markdown.path,
        metrics=metrics,
    )
