"""The report step (`report`, what the report component calls): the recurrence's Markdown (plots
embedded) and its Metrics, from the store.

This step reads the store and writes to it; zeus_kfp.report only turns the data it is handed into
Markdown, plots and event files (it never opens a store: the layers of tests/test_layering.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from zeus_kfp.report.arms import DEFAULT_POLICY  # arms loads no plotting library
from zeus_kfp.steps.params import resolve_store_uri
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.train import MetricsSink
from zeus_kfp.store import Store, keys, open_store

if TYPE_CHECKING:
    import pandas as pd

    from zeus_kfp.job import JobSpec
    from zeus_kfp.policy.history import History
    from zeus_kfp.report import RecurrenceReport


class JobRecord(TypedDict):
    """What the report and the TensorBoard event are made from, read from the store once for both."""

    spec: JobSpec
    trials: pd.DataFrame
    profiles: pd.DataFrame
    history: History


def recurrence_report(
    store_uri: str | None, job_id: str, recurrence_id: str | None, out_dir: Path, policy: str = DEFAULT_POLICY
) -> RecurrenceReport:
    """Read the job from the store at `store_uri`, plot its history into `out_dir` and report on the
    recurrence `recurrence_id` (None: the latest one that has trials), as
    zeus_kfp.report.build_recurrence_report does."""
    return _report_of(_job_record(open_store(store_uri), job_id), recurrence_id, out_dir, policy)


def _job_record(store: Store, job_id: str) -> JobRecord:
    return {
        "spec": store.get_job(job_id),
        "trials": store.trials(job_id),
        "profiles": store.profiles(job_id),
        "history": store.history(job_id),
    }


def _report_of(record: JobRecord, recurrence_id: str | None, out_dir: Path, policy: str) -> RecurrenceReport:
    # deferred: the report draws with matplotlib, which every other step (zeus_kfp.steps imports this module)
    # must not load (tests/test_cold_start.py)
    from zeus_kfp.report import build_recurrence_report

    return build_recurrence_report(**record, recurrence_id=recurrence_id, out_dir=Path(out_dir), policy=policy)


def append_recurrence(store: Store, record: JobRecord, recurrence_id: str, policy: str = DEFAULT_POLICY) -> str:
    """Store the recurrence's TensorBoard event file in the job's log directory (once); returns its name.
    `record` is the job as the report step read it; the posterior is `policy`'s (the run's: the store does not
    record it)."""
    from zeus_kfp.report.tensorboard import recurrence_event  # deferred: matplotlib, as in _report_of

    name, data = recurrence_event(**record, recurrence_id=recurrence_id, policy=policy)
    store.tensorboard_logs(record["spec"].job_id, add={name: data}, read=False)
    return name


def log_dir_uri(store_uri: str, job_id: str) -> str:
    """Where the job's TensorBoard event files live in the store at `store_uri`."""
    return f"{store_uri.rstrip('/')}/{keys.tensorboard_dir(job_id)}"


@reported("report")
def report(
    *,
    store_uri: str,
    job_id: str,
    recurrence_id: str,
    reached: bool,
    markdown_path: str,
    metrics: MetricsSink,
    policy: str = DEFAULT_POLICY,
) -> dict[str, float]:
    """Write the report for `recurrence_id` to `markdown_path` and log its numbers to `metrics`,
    append the recurrence's scalars to the job's TensorBoard log directory in the store (the report
    links to it), then mark the job "completed" (the preprocess step of the next recurrence marks it "running").

    `reached` (whether the last attempt ended the recurrence) only orders this step after every attempt: the
    figures, "reached" among them, come from the store, which holds every attempt. `policy` is the
    run's (a run parameter the store does not record): the bandit's state shown is its view of the history.
    """
    from zeus_kfp.report.tensorboard import markdown_section  # deferred: matplotlib, as in _report_of

    store_uri = resolve_store_uri(store_uri)
    store = open_store(store_uri or None)
    record = _job_record(store, job_id)
    with tempfile.TemporaryDirectory(prefix="zeus-report-") as plots_dir:
        rep = _report_of(record, recurrence_id, Path(plots_dir), policy)
    append_recurrence(store, record, recurrence_id, policy)
    Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
    section = markdown_section(log_dir_uri(store.uri, job_id), store.uri, job_id)
    Path(markdown_path).write_text(rep.markdown + section)
    values = dict(rep.metrics)
    for name, value in values.items():
        # The KFP UI prints a metric's every digit (0.40132876398829354): six significant ones say what was measured.
        metrics.log_metric(name, float(f"{float(value):.6g}"))
    store.compact(job_id)  # once per recurrence, so the next bandit step reads one snapshot, not every event
    store.set_phase(job_id, "completed")
    return values
