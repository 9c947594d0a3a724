"""What every batch-size policy is: a pure function of (spec, history, seed) -> Decision.

No policy keeps state between calls (the way optuna samplers work): the bandit step of a
pipeline runs in a fresh process each time, so everything is derived from the history, and
the same inputs give the same decision in any process. A decision reads the whole history
(zeus_kfp.policy.tally computes its statistics over columns: milliseconds at 10,000 trials), and so do the arm
states people see, wherever they are shown (zeus_kfp.report.arms): nothing derived is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from zeus_kfp.job import Decision, JobSpec
from zeus_kfp.trials import Trial

__all__ = ["ArmState", "Decision", "Policy"]  # Decision lives in zeus_kfp.job: the store records it too


@dataclass(frozen=True)
class ArmState:
    """One batch size as the policy sees it, for people (zeus_kfp.report.arms shows them)."""

    batch_size: int
    stage: str
    num_observations: int
    posterior_mean: float | None
    posterior_precision: float | None
    pruned: bool


class Policy(Protocol):
    """A batch-size policy. `name` is how users select it (CLI, pipeline parameter)."""

    name: str

    def decide(self, spec: JobSpec, history: Sequence[Trial], seed: int) -> Decision: ...

    def arm_states(self, spec: JobSpec, history: Sequence[Trial]) -> list[ArmState]: ...

    def stop_threshold(self, spec: JobSpec, history: Sequence[Trial]) -> float | None:
        """The early-stop threshold this policy would hand a trial dispatched now (None: no early stop). A
        running trial reads it again at every epoch end (the mid-trial stop, as Zeus's server checks
        `beta_knob * min_cost` at every report), so it must be the policy's own rule: a second rule beside
        the dispatched one would undo it."""
        ...
