"""Reading the fleet from a store: which jobs (`--job` patterns), which window (`--since` / `--until`), and the
namespace the store belongs to. Through the Store's public API only (list_jobs, get_job, trials, profiles,
history), so the fleet reads a store as `show` does, local or S3."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pandas as pd

from zeus_kfp.errors import FieldError
from zeus_kfp.fleet.figures import DEFAULT_CARBON_INTENSITY, TIMELINE_COLUMNS, Fleet, job_figures
from zeus_kfp.report.arms import arm_frame

if TYPE_CHECKING:
    from zeus_kfp.store.store import Store

# A KFP namespace's own store: mlpipeline/private/<ns>/... (pipelines/compile.py DEFAULT_STORE_URI), or the
# private-artifacts/<ns>/ prefix a namespace's key may also write.
NAMESPACE_IN_URI = re.compile(r"/private(?:-artifacts)?/(?P<ns>[a-z0-9]([-a-z0-9]*[a-z0-9])?)(/|$)")
AGO = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>[mhdw])")
UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
WHEN_HELP = "an ISO 8601 date or time (UTC unless it says so), e.g. 2026-11-01 or 2026-11-01T06:00, or a span ago: 30d"


def parse_when(option: str, text: str | None, now: datetime | None = None) -> datetime | None:
    """`--since`/`--until` as an aware UTC datetime: an ISO date or time, or a span back from now (90m, 12h, 30d,
    2w). A mistyped value is a FieldError naming the option (exit 2), never a silently empty window."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    ago = AGO.fullmatch(text)
    if ago:
        return (now or datetime.now(UTC)) - timedelta(seconds=float(ago["n"]) * UNIT_S[ago["unit"]])
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise FieldError(option, text, WHEN_HELP) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def namespace_of(uri: str) -> str:
    """The Kubeflow namespace a store belongs to, read off its URI (s3://mlpipeline/private/<ns>/zeus-kfp); ""
    for any other store. The Prometheus label `namespace`, unless `--namespace` says otherwise."""
    match = NAMESPACE_IN_URI.search(uri)
    return match["ns"] if match else ""


def matching_jobs(all_jobs: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """The jobs matching any of `patterns` (shell-style: nightly-*, exact ids too), in the store's order; every
    job without patterns. A pattern that matches nothing is a FieldError: a typo must not read as "no saving"."""
    if not patterns:
        return list(all_jobs)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(job, pattern) for job in all_jobs):
            raise FieldError("job", pattern, f"a job id or pattern matching a job of the store ({len(all_jobs)} jobs)")
    return [job for job in all_jobs if any(fnmatch.fnmatchcase(job, p) for p in patterns)]


def read_fleet(
    store: Store,
    patterns: Sequence[str] = (),
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    carbon_intensity: float = DEFAULT_CARBON_INTENSITY,
    namespace: str | None = None,
) -> Fleet:
    """The fleet of an opened store (zeus_kfp.store.open_store): each matching job's figures over the window.
    The bandit's stage is the default policy's view of the job's history, as `show` gives it."""
    if not carbon_intensity >= 0:
        raise FieldError("carbon_intensity", carbon_intensity, "a grid intensity in gCO2/kWh, >= 0")
    if since is not None and until is not None and since >= until:
        raise FieldError("until", until.isoformat(), f"a time after --since ({since.isoformat()})")
    listed = store.list_jobs()
    ids = sorted(listed["job_id"].astype(str)) if not listed.empty else []
    jobs, timelines = [], []
    for job_id in matching_jobs(ids, patterns):
        spec = store.get_job(job_id)
        arms = arm_frame(spec, store.history(job_id))
        figures, timeline = job_figures(
            spec,
            store.trials(job_id),
            store.profiles(job_id),
            arms,
            since=since,
            until=until,
            carbon_intensity=carbon_intensity,
        )
        jobs.append(figures)
        if not timeline.empty:
            timelines.append(timeline)
    timeline = pd.concat(timelines, ignore_index=True) if timelines else pd.DataFrame(columns=TIMELINE_COLUMNS)
    return Fleet(
        store=store.uri,
        jobs=jobs,
        timeline=timeline,
        since=since,
        until=until,
        carbon_intensity=float(carbon_intensity),
        namespace=namespace_of(store.uri) if namespace is None else namespace,
    )
