"""The saving against the default configuration, as every view says it: `run`, `show`, the report.

Why its own module: two views once printed two different savings for one run (one against the
simulator's expected default, one against the store's estimate; one cumulative, one of the latest
recurrence). Now the baseline comes from one function (zeus_kfp.report.numbers.default_config_cost) and
the savings from this one, and each view prints the same two figures in the same words:

- a recurrence's saving: 1 - its cost / the baseline;
- the job's cumulative saving: 1 - (the cost of all its recurrences) / (as many times the baseline).

Over which recurrences, and which cost: a recurrence's cost is its policy's trials' (reached,
missed, stopped early, out of memory: zeus_kfp.report.numbers.per_recurrence). Trials that failed for reasons of
their own (a crash, an interrupt, a lost pod) produced no model and measured nothing of the policy: their
energy and cost are waste, shown apart ("failed runs: ..."), and a recurrence whose every trial failed is
left out of the saving. Counted, they read as savings (a crash after two epochs costs little: +80 %) or, one
failure early, as a loss the job never recovers from (-81 % after five good recurrences), though the policy
did neither. A recurrence whose every attempt *missed* stays in, at its full cost: that is the policy's.

A target every trial so far met at its first evaluation (accuracy >= -0.5, a loss <= 100) has nothing to learn:
no training told the batch sizes apart, so what one recurrence cost against another is the price of one epoch,
not of reaching the target. Such a job reports no saving, and says why (`met_at_once`), until a trial needs
more than one evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from zeus_kfp.cost import Figures
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.report.numbers import FAILED, Baseline, default_config_cost, finished_trials, per_recurrence
from zeus_kfp.report.units import COST_UNIT, duration, si

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
    met_at_once: int = 0  # > 0: every trial so far (this many) met the target at its first evaluation

    @property
    def comparable(self) -> bool:
        """Whether a saving can be said: a baseline, and a target that training had to reach."""
        return bool(self.baseline.cost) and not self.met_at_once

    @property
    def counted(self) -> pd.DataFrame:
        """The recurrences the saving is over: all but those whose every trial failed."""
        return self.recurrences[self.recurrences["outcome"] != FAILED]

    @property
    def cumulative(self) -> float | None:
        counted = self.counted
        if not self.comparable or counted.empty:
            return None
        return 1.0 - float(counted["cost"].sum()) / (len(counted) * self.baseline.cost)

    def saved(self) -> Figures | None:
        """What the counted recurrences saved against as many at the default configuration, in joules and seconds
        (cost, energy, time; negative while exploring costs more): the fleet view's figures, from the same
        recurrences and baseline as `cumulative`, so the two never disagree. None without a baseline."""
        counted, base = self.counted, self.baseline
        if not self.comparable or counted.empty:
            return None
        n = len(counted)
        nan = float("nan")
        return Figures(
            n * base.cost - float(counted["cost"].sum()),
            nan if base.energy_j is None else n * base.energy_j - float(counted["energy_j"].sum()),
            nan if base.time_s is None else n * base.time_s - float(counted["time_s"].sum()),
        )

    def waste_line(self) -> str:
        """The failed trials' cost, energy and time, the whole job's, apart from the saving ("" when none failed):
        how many trials in how many recurrences, and how many of those had no other trial (left out)."""
        rec = self.recurrences
        wasted = rec[rec["failed_trials"] > 0]
        if wasted.empty:
            return ""
        left_out = int((wasted["outcome"] == FAILED).sum())
        trials = int(wasted["failed_trials"].sum())
        return (
            f"failed runs (no model; left out of the saving): {trials} trial(s) in {len(wasted)} recurrence(s)"
            + (f", {left_out} of them with no other trial" if left_out else "")
            + f": cost {si(float(wasted['failed_cost'].sum()), COST_UNIT)}, energy "
            f"{si(float(wasted['failed_energy_j'].sum()), 'J')}, time {duration(float(wasted['failed_time_s'].sum()))}"
        )

    def counted_text(self) -> str:
        """The recurrences the cumulative saving is over, as every view says it: "3 counted, 1 failed and left out"."""
        left_out = len(self.recurrences) - len(self.counted)
        return f"{len(self.counted)} counted" + (f", {left_out} failed and left out" if left_out else "")

    def saving_of(self, recurrence: int) -> float | None:
        """The recurrence's saving; None without a baseline, or for a recurrence whose every trial failed."""
        row = self.recurrences[self.recurrences["recurrence"] == recurrence]
        if row.empty or not self.comparable or row["outcome"].iloc[0] == FAILED:
            return None
        return float(row["saving"].iloc[0])

    def met_at_once_line(self) -> str:
        """Why a job whose every trial met the target at its first evaluation has no saving ("" otherwise)."""
        if not self.met_at_once:
            return ""
        spec = self.spec
        target = f"{spec.metric_name} {'>=' if spec.higher_is_better else '<='} {spec.target_metric:g}"
        return (
            f"no saving: the target {target} is met before any training tells the batch sizes apart (all "
            f"{self.met_at_once} trial(s) so far met it at their first evaluation); a target a few epochs of training "
            "reach is one the batch sizes differ by (check target_metric and higher_is_better)"
        )

    def baseline_line(self) -> str:
        if self.met_at_once:
            return self.met_at_once_line()
        if not self.baseline.cost:
            return f"saving vs the default config: not known yet ({self.baseline.how})"
        return (
            f"default config (batch size {self.spec.default_batch_size}, max power): "
            f"{si(self.baseline.cost, COST_UNIT)} a recurrence ({self.baseline.how})"
        )

    def summary_line(self) -> str:
        """The latest counted recurrence's saving and the job's cumulative one, in one line."""
        counted = self.counted
        if not self.comparable or counted.empty:
            return ""
        latest = counted.iloc[-1]
        return (
            f"saving vs the default config: recurrence {int(latest['recurrence'])} {latest['saving']:+.1%}; "
            f"cumulative {self.cumulative:+.1%} over {self.counted_text()}"
        )

    def lines(self, recurrences: list[int] | None = None) -> list[str]:
        """The baseline, one line per recurrence of `recurrences` (None: none), then the summary line."""
        out = [self.baseline_line()]
        if not self.comparable:
            return [*out, self.waste_line()]
        shown = self.recurrences[self.recurrences["recurrence"].isin(recurrences or [])]
        out += [_recurrence_line(r) for r in shown.to_dict("records")]
        out.append(self.summary_line())
        out.append(self.waste_line())
        if (shown.loc[shown["outcome"] != FAILED, "saving"] < 0).any() or (self.cumulative or 0.0) < 0:
            out.append(EXPLORING_NOTE)
        return out


def _recurrence_line(r: dict) -> str:
    """One recurrence's line under the baseline: its saving, or why it has none."""
    head = f"  recurrence {int(r['recurrence'])}: "
    if r["outcome"] == FAILED:
        wasted = f"cost {si(r['failed_cost'], COST_UNIT)}, energy {si(r['failed_energy_j'], 'J')}, time " + duration(
            r["failed_time_s"]
        )
        return head + f"failed, no model ({wasted} wasted; left out of the saving)"
    line = head + f"cost {si(r['cost'], COST_UNIT)} -> saving {r['saving']:+.1%}"
    return line + (f" (and {si(r['failed_energy_j'], 'J')} in failed trials)" if r["failed_trials"] else "")


def savings_of(trials: pd.DataFrame, profiles: pd.DataFrame, spec: JobSpec) -> Savings:
    """The job's savings from its store frames."""
    baseline = default_config_cost(trials, profiles, spec)
    rec = per_recurrence(trials).copy()
    rec["saving"] = 1.0 - rec["cost"].astype(float) / baseline.cost if baseline.cost else float("nan")
    rec.loc[rec["outcome"] == FAILED, "saving"] = float("nan")
    at_once = met_at_first_evaluation(trials)
    if at_once:
        rec["saving"] = float("nan")
    return Savings(spec, baseline, rec, at_once)


def met_at_first_evaluation(trials: pd.DataFrame) -> int:
    """How many trials met the target at their first evaluation, when every trial that ran did (none failed for
    its own reasons counts either way); 0 when any trial missed it or needed more: then training tells sizes apart."""
    done = finished_trials(trials)
    ran = done[done["status"] != TrialStatus.FAILED.value] if not done.empty else done
    if ran.empty:
        return 0
    reached = ran["status"] == TrialStatus.REACHED.value
    at_once = pd.to_numeric(ran["num_epochs"], errors="coerce").fillna(0) <= 1
    return len(ran) if bool((reached & at_once).all()) else 0
