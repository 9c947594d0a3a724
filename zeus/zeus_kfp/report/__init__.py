"""Plots and Markdown for people (pure pandas + matplotlib; never kfp, never the store: the report
step, zeus_kfp.steps.report, and the CLI read it and hand these functions the data).

The pipeline's report step, `zeus-kfp run`, `zeus-kfp show` and the notebook all draw from
these functions, so every view of a job shows the same numbers (the bandit's state too: `arm_frame`
computes it from the history, zeus_kfp.report.arms).

The names below are loaded on first use (PEP 562), not when the package is imported: a bandit
step formats a duration with zeus_kfp.report.units, and importing a submodule imports this package
first, which must not load matplotlib (0.5 s on an idle machine, seconds under load, paid by
every bandit step that saw a trial in flight).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zeus_kfp.report.arms import arm_frame
    from zeus_kfp.report.markdown import markdown_report
    from zeus_kfp.report.numbers import Baseline, default_config_cost, per_recurrence
    from zeus_kfp.report.plots import PLOT_NAMES, write_plots
    from zeus_kfp.report.recurrence import RecurrenceReport, build_recurrence_report, recurrence_metrics
    from zeus_kfp.report.savings import Savings, savings_of

_SOURCES = {
    "arm_frame": "arms",
    "Baseline": "numbers",
    "default_config_cost": "numbers",
    "per_recurrence": "numbers",
    "markdown_report": "markdown",
    "PLOT_NAMES": "plots",
    "write_plots": "plots",
    "RecurrenceReport": "recurrence",
    "recurrence_metrics": "recurrence",
    "build_recurrence_report": "recurrence",
    "Savings": "savings",
    "savings_of": "savings",
}

__all__ = [
    "PLOT_NAMES",
    "Baseline",
    "RecurrenceReport",
    "Savings",
    "arm_frame",
    "build_recurrence_report",
    "default_config_cost",
    "markdown_report",
    "per_recurrence",
    "recurrence_metrics",
    "savings_of",
    "write_plots",
]
assert sorted(__all__) == sorted(_SOURCES)


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_SOURCES[name]}"), name)
    globals()[name] = value
    return value
