"""One recurrence's report from the job's data: what the pipeline's report step and `zeus-kfp run`
show at the end of a recurrence (they read the data from the store: zeus_kfp.steps.report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from zeus_kfp.job import JobSpec
from zeus_kfp.policy.history import History
from zeus_kfp.report.arms import DEFAULT_POLICY, arm_frame
from zeus_kfp.report.markdown import markdown_report
from zeus_kfp.report.numbers import FAILED, default_config_cost, per_recurrence, select_recurrence
from zeus_kfp.report.plots import write_plots
from zeus_kfp.report.savings import met_at_first_evaluation


@dataclass(frozen=True)
class RecurrenceReport:
    """Markdown (figures embedded), the PNG paths, and the recurrence's numbers for KFP Metrics.

    metrics: energy_j, time_s, cost, trials and reached (1.0/0.0) of the recurrence; plus
    default_cost and saving (fraction of the default configuration's cost saved) once the
    store can estimate the default configuration's cost.
    """

    markdown: str
    plots: list[Path]
    metrics: dict[str, float] = field(default_factory=dict)


def build_recurrence_report(
    spec: JobSpec,
    trials: pd.DataFrame,
    profiles: pd.DataFrame,
    history: History,
    recurrence_id: str | None,
    out_dir: Path,
    policy: str = DEFAULT_POLICY,
) -> RecurrenceReport:
    """Plot the job's history into `out_dir` and report on the recurrence `recurrence_id` (None: the
    latest one that has trials). The bandit's state is `policy`'s view of the whole `history`
    (zeus_kfp.report.arms): the run's policy, which the store does not record. The caller reads the store
    (zeus_kfp.steps.report.recurrence_report): the report takes data, so it never opens one."""
    state = arm_frame(spec, history, policy)
    chosen = select_recurrence(trials, recurrence_id)
    number = int(chosen["recurrence"].iloc[0])
    plots = write_plots(trials, profiles, state, spec, Path(out_dir))
    markdown = markdown_report(trials, profiles, state, spec, plots, recurrence=number)
    return RecurrenceReport(markdown=markdown, plots=plots, metrics=recurrence_metrics(trials, profiles, spec, number))


def recurrence_metrics(
    trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec, recurrence: int
) -> dict[str, float]:
    """The numbers KFP shows as the run's Metrics; empty when the recurrence has no finished trial."""
    rec = per_recurrence(trials)
    row = rec[rec["recurrence"] == recurrence]
    if row.empty:
        return {}
    row = row.iloc[0]
    metrics = {
        "energy_j": float(row["energy_j"]),
        "time_s": float(row["time_s"]),
        "cost": float(row["cost"]),
        "trials": float(row["trials"]),
        "reached": 1.0 if row["reached"] else 0.0,
        "failed_energy_j": float(row["failed_energy_j"]),  # waste: trials that failed for their own reasons
    }
    baseline = default_config_cost(trials, profiles, spec)
    if baseline.cost and not met_at_first_evaluation(trials):  # a target met at once has no saving (report.savings)
        metrics["default_cost"] = baseline.cost
        if row["outcome"] != FAILED:  # a recurrence whose every trial failed has no saving (zeus_kfp.report.savings)
            metrics["saving_percent"] = 100.0 * (1.0 - metrics["cost"] / baseline.cost)
    return metrics
