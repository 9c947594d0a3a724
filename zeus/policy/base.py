"""What every batch-size policy is: a pure function of (spec, history, seed) -> Decision.

No policy keeps state between calls (the way optuna samplers work): the bandit step of a
pipeline runs in a fresh process each time, so everything is derived from the history, and
the same inputs give the same decision in any process. What a policy derives is a fold of the
history (zeus.policy.tally), so the same decision also comes from (spec, fold, seed) with the
fold kept between decisions (`decide_from`; zeus.policy.fold, and the store keeps one per job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from zeus.job import JobSpec, TrialRecord

if TYPE_CHECKING:
    from zeus.policy.history import HistoryView


@dataclass(frozen=True)
class Decision:
    """The next trial: its batch size, the early-stop cost threshold (None: no early stop),
    the policy's stage (for example "exploration" or "exploitation") and why, for people."""

    batch_size: int
    cost_threshold: float | None
    stage: str
    reason: str


@dataclass(frozen=True)
class ArmState:
    """One batch size as the policy sees it, for the bandit-state snapshot people read."""

    batch_size: int
    stage: str
    num_observations: int
    posterior_mean: float | None
    posterior_precision: float | None
    pruned: bool


class Policy(Protocol):
    """A batch-size policy. `name` is how users select it (CLI, pipeline parameter)."""

    name: str

    def decide(self, spec: JobSpec, history: Sequence[TrialRecord], seed: int) -> Decision: ...

    def arm_states(self, spec: JobSpec, history: Sequence[TrialRecord]) -> list[ArmState]: ...

    def decide_from(self, spec: JobSpec, view: HistoryView, seed: int) -> Decision:
        """`decide`, from a view of the history's fold (the same decision: `decide` folds the history)."""
        ...

    def arm_states_from(self, spec: JobSpec, view: HistoryView) -> list[ArmState]: ...
