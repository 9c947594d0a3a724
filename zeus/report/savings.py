"""The saving against the default configuration, as every view says it: `run`, `show`, the report.

Why its own module: two views once printed two different savings for one run (one against the
simulator's expected default, one against the store's estimate; one cumulative, one of the latest
recurrence). Now the baseline comes from one function (zeus_kfp.report.frames.default_config_cost) and
the savings from this one, and each view prints the same two figures in the same words:

- a recurrence's saving: 1 - its cost / the baseline;
- the job's cumulative saving: 1 - (the cost of all its recurrences) / (as many times the baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from zeus_kfp.job import JobSpec
from zeus_kfp.report.frames import Baseline, default_config_cost, per_recurrence
from zeus_kfp.report.units import COST_UNIT, si

EXPLORING_NOTE = (
    "  (negative while the bandit is still exploring: each new batch size costs a profiling epoch, "
    "and a size that misses the target costs a retry)"
)


@dataclass(frozen=True)
class Savings:
    """The job's recurrences against the default configuration: `recurrences` is per_recurrence's frame
    with a `saving` column (NaN without a baseline)."""

    spec: JobSpec
    baseline: Baseline
    recurrences: pd.DataFrame

    @property
    def cumulative(self) -> float | None:
        if not self.baseline.cost or self.recurrences.empty:
            return None
        return 1.0 - float(self.recurrences["cost"].sum()) / (len(self.recurrences) * self.baseline.cost)

    def saving_of(self, recurrence: int) -> float | None:
        row = self.recurrences[self.recurrences["recurrence"] == recurrence]
        return None if row.empty or not self.baseline.cost else float(row["saving"].iloc[0])

    def baseline_line(self) -> str:
        if not self.baseline.cost:
            return f"saving vs the default config: not known yet ({self.baseline.how})"
        return (
            f"default config (batch size {self.spec.default_batch_size}, max power): "
            f"{si(self.baseline.cost, COST_UNIT)} a recurrence ({self.baseline.how})"
        )

    def summary_line(self) -> str:
        """The latest recurrence's saving and the job's cumulative one, in one line."""
        if not self.baseline.cost or self.recurrences.empty:
            return ""
        latest = self.recurrences.iloc[-1]
        return (
            f"saving vs the default config: recurrence {int(latest['recurrence'])} {latest['saving']:+.1%}; "
            f"cumulative over {len(self.recurrences)} recurrence(s) {self.cumulative:+.1%}"
        )

    def lines(self, recurrences: list[int] | None = None) -> list[str]:
        """The baseline, one line per recurrence of `recurrences` (None: none), then the summary line."""
        out = [self.baseline_line()]
        if not self.baseline.cost:
            return out
        shown = self.recurrences[self.recurrences["recurrence"].isin(recurrences or [])]
        out += [
            f"  recurrence {int(r['recurrence'])}: cost {si(r['cost'], COST_UNIT)} -> saving {r['saving']:+.1%}"
            for r in shown.to_dict("records")
        ]
        out.append(self.summary_line())
        if (shown["saving"] < 0).any() or (self.cumulative or 0.0) < 0:
            out.append(EXPLORING_NOTE)
        return out


def savings_of(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec) -> Savings:
    """The job's savings from its store frames."""
    baseline = default_config_cost(trials, profiles, spec)
    rec = per_recurrence(trials).copy()
    rec["saving"] = 1.0 - rec["cost"].astype(float) / baseline.cost if baseline.cost else float("nan")
    return Savings(spec, baseline, rec)
