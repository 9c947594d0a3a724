"""Plots and Markdown for people (pure pandas + matplotlib; never kfp).

The pipeline's report step, `zeus-kfp run`, `zeus-kfp show` and the notebook all draw from
these functions, so every view of a job shows the same numbers.
"""

from zeus.report.frames import Baseline, default_config_cost, per_recurrence
from zeus.report.markdown import markdown_report
from zeus.report.plots import PLOT_NAMES, write_plots
from zeus.report.recurrence import RecurrenceReport, recurrence_metrics, recurrence_report

__all__ = [
    "PLOT_NAMES",
    "Baseline",
    "RecurrenceReport",
    "default_config_cost",
    "markdown_report",
    "per_recurrence",
    "recurrence_metrics",
    "recurrence_report",
    "write_plots",
]
