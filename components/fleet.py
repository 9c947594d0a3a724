"""fleet-report: the fleet view in the KFP UI, for any pipeline to call or pipelines/fleet.py to
schedule: Markdown with every job's saving and the cumulative plot, Metrics with the fleet's totals."""

from kfp import dsl
from kfp.dsl import Markdown, Metrics, Output

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def fleet_report(
    store_uri: str,
    markdown: Output[Markdown],
    metrics: Output[Metrics],
    jobs: str = "",
    since: str = "",
    until: str = "",
    carbon_intensity: float = 480.0,
    namespace: str = "",
):
    """Writes the fleet report of the store's jobs and logs its totals.

    Args:
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix ({namespace}: the pod's).
        markdown: The fleet report: per job saving, energy, GPU-hours, CO2, stage and failures; the plot embedded.
        metrics: The fleet's totals (energy saved in kWh, saving in percent, CO2 avoided in kg, ...).
        jobs: Only jobs matching these ids or patterns (nightly-*), separated by commas; empty: every job.
        since: Recurrences that ended from then on: an ISO 8601 time or a span ago (30d); empty: from the start.
        until: Recurrences that ended before then, as since; empty: until now.
        carbon_intensity: The grid's carbon intensity in gCO2/kWh (480: the world's in 2023, Ember).
        namespace: What the report calls the namespace; empty: read off the store's URI.
    """
    from zeus_kfp.steps.fleet import fleet_report as step

    step(store_uri, markdown.path, metrics, jobs=jobs, since=since, until=until,
         carbon_intensity=carbon_intensity, namespace=namespace)  # fmt: skip
