"""The report step (`report`, what the report component calls): the recurrence's Markdown (plots
embedded) and its Metrics, from the store."""

from __future__ import annotations

import tempfile
from pathlib import Path

from zeus.steps.trial import MetricsSink


def report(
    *,
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    reached: bool,
    markdown_path: str,
    metrics: MetricsSink,
    policy: str = "default",
) -> dict[str, float]:
    """Write the report for `recurrence_id` to `markdown_path` and log its numbers to `metrics`,
    append the recurrence's scalars to the job's TensorBoard log directory in the store (the report
    links to it), then mark the job "completed" (the preprocess step of the next recurrence marks it "running").

    `reached` (whether the last attempt ended the recurrence) only orders this step after every attempt: the
    figures, "reached" among them, come from the store, which holds every attempt. `policy` is the
    run's (a run parameter the store does not record): the bandit's state shown is its view of the history.
    """
    from zeus.report import recurrence_report
    from zeus.report.tensorboard import append_recurrence, markdown_section
    from zeus.steps.params import resolve_store_uri
    from zeus.store import open_store

    store_uri = resolve_store_uri(store_uri)
    with tempfile.TemporaryDirectory(prefix="zeus-report-") as plots_dir:
        rep = recurrence_report(store_uri or None, job_id, recurrence_id, Path(plots_dir), policy)
    store = open_store(store_uri or None)
    append_recurrence(store, job_id, recurrence_id, policy)
    Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_path).write_text(rep.markdown + markdown_section(store.uri, job_id))
    values = dict(rep.metrics)
    for name, value in values.items():
        metrics.log_metric(name, float(value))
    store.compact(job_id)  # once per recurrence, so the next bandit step reads one snapshot, not every event
    store.set_phase(job_id, "completed")
    return values
