"""A job's recurrences as people read them: what `zeus-kfp run` and `zeus-kfp simulate` print, one type
whether the figures come from the store (zeus_kfp.steps.summary) or from the simulator (zeus_kfp.simulate.engine),
so the two read alike and compare trial by trial (each row is a zeus_kfp.trials.Trial)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeus_kfp.job import TrialStatus
from zeus_kfp.trials import Trial


@dataclass(frozen=True)
class TrialFiles:
    """Where a trial's log and model went (the train step's artifacts; a local run's directories): `model` is
    "" when the script saved none."""

    attempt: int
    log: str = ""
    model: str = ""


@dataclass(frozen=True)
class RecurrenceSummary:
    """One recurrence: its trials in order and their totals (failed attempts count: they cost too).

    `simulated` is True when any figure came from a simulated GPU (no real power was measured).
    `wall_s` is the recurrence's wall-clock time through the local pipeline, orchestration included
    (NaN where there was none: the simulator's); `files` where each trial's log and model went (a local run).
    """

    job_id: str
    recurrence: int
    recurrence_id: str
    trials: tuple[Trial, ...]
    reached: bool
    cost: float
    energy_j: float
    time_s: float
    simulated: bool
    wall_s: float = math.nan
    files: tuple[TrialFiles, ...] = ()
    skipped: str = ""  # a run the recurrence gate skipped: why (zeus_kfp.steps.gate.outcome_line); no trials, number 0

    @classmethod
    def skipped_run(cls, job_id: str, recurrence_id: str, why: str, wall_s: float = math.nan) -> RecurrenceSummary:
        """A run that opened no recurrence: it trained nothing and spent nothing."""
        nothing = dict(reached=False, cost=0.0, energy_j=0.0, time_s=0.0, simulated=False)
        return cls(job_id, 0, recurrence_id, (), **nothing, wall_s=wall_s, skipped=why)

    @property
    def failed_trial(self) -> Trial | None:
        """The trial whose failure ended the recurrence (the script's own: zeus_kfp.steps.feedback.ends_recurrence),
        None when it reached the target or ran out of attempts."""
        last = self.trials[-1] if self.trials else None
        return last if last is not None and last.status == TrialStatus.FAILED.value else None

    def files_of(self, attempt: int) -> TrialFiles | None:
        return next((f for f in self.files if f.attempt == attempt), None)

    @property
    def batch_sizes(self) -> list[int]:
        return [t.batch_size for t in self.trials]

    @property
    def num_trials(self) -> int:
        return len(self.trials)

    @property
    def power_limits(self) -> list[float | None]:
        return [t.power_limit_w for t in self.trials]

    @property
    def stages(self) -> list[str]:
        return [t.stage for t in self.trials]

    @property
    def threshold(self) -> float | None:
        """The first trial's early-stop threshold (the recurrence's: the later ones share its best cost)."""
        return self.trials[0].cost_threshold if self.trials else None

    def to_dict(self) -> dict:
        """The recurrence for `zeus-kfp simulate --json`: its figures and, per trial, what was tried."""
        names = ("recurrence", "reached", "num_trials", "batch_sizes", "power_limits", "stages", "threshold")
        return {name: getattr(self, name) for name in names} | {
            "cost": self.cost,
            "energy_j": self.energy_j,
            "time_s": self.time_s,
        }
