"""fleet-report: the fleet view as a KFP artifact (components/fleet.py), for any pipeline or a scheduled run.

Why a step: the KFP UI is where a pipeline's people look, and a recurring run of this one step keeps a dated
record of the fleet there (Markdown with the cumulative plot, Metrics with the totals), next to the runs.
"""

from __future__ import annotations

from typing import Any

from zeus_kfp.fleet.figures import DEFAULT_CARBON_INTENSITY
from zeus_kfp.fleet.fleet_markdown import write_report
from zeus_kfp.fleet.read import parse_when, read_fleet
from zeus_kfp.steps.params import open_step_store


def job_patterns(jobs: str) -> list[str]:
    """The component's `jobs` parameter (KFP parameters are flat): patterns separated by commas or spaces."""
    return [p for p in jobs.replace(",", " ").split() if p]


def fleet_report(
    store_uri: str,
    markdown_path: str,
    metrics: Any,
    *,
    jobs: str = "",
    since: str = "",
    until: str = "",
    carbon_intensity: float = DEFAULT_CARBON_INTENSITY,
    namespace: str = "",
) -> dict[str, float]:
    """Read the fleet of `store_uri` ("{namespace}" in it: this pod's), write its report to `markdown_path` and log
    its totals to `metrics` (a KFP Metrics artifact, or anything with log_metric). `since`/`until` as the CLI's
    (an ISO time or a span ago such as 30d); `namespace` "" reads it off the store's URI."""
    store = open_step_store(store_uri)
    fleet = read_fleet(
        store,
        job_patterns(jobs),
        since=parse_when("since", since),
        until=parse_when("until", until),
        carbon_intensity=carbon_intensity,
        namespace=namespace or None,
    )
    values = write_report(fleet, markdown_path)
    for name, value in values.items():
        metrics.log_metric(name, value)
    return values
