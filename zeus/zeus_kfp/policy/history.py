"""What a policy reads of a job's history (`HistoryView`), and the failure semantics both policies share:

- oom at batch size b rules out every size >= b for this job (memory only grows with b);
- failed trials are forgotten (the script broke for its own reasons; the user fixes it);
- not_reached and cost_exceeded are observations: a failed exploration, or a poor reward;
- dispatched trials (no result yet) are in flight, from this or a concurrent recurrence.

A recurrence's *spend* is the sum of its finished trials' energy-time cost. It is computed
from energy and time when the record has them, because `cost` is what the policy learns from
and may be a penalty rather than money spent (the simulator's 0-epoch quirk reports 100 x the
threshold for a trial that never ran). zeus-nsdi23's early stop is beta x the lowest spend of a
recurrence that reached the target (`HistoryView.threshold`); turning-walk's is beta x the cheapest
size's mean cost (`Tally.cheapest_size_mean`).

The view is read off a `Tally` (zeus_kfp.policy.tally), the statistics of the whole history over its
columns (`read_history`), made afresh for every decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zeus_kfp.job import JobSpec
from zeus_kfp.policy import recurrences
from zeus_kfp.policy.tally import Tally, WindowEntry
from zeus_kfp.policy.walk import Observation
from zeus_kfp.trial_history import TrialHistory
from zeus_kfp.trials import Trial

History = TrialHistory | Sequence[Trial]  # what a policy takes: columns, or records in any order


class NoFeasibleBatchSizeError(ValueError):
    """Every candidate batch size ran out of memory: there is nothing left to try."""


@dataclass(frozen=True)
class HistoryView:
    """What a policy needs from the history, read off its tally once per decision."""

    feasible: tuple[int, ...]  # candidate sizes still allowed (below the smallest oom)
    tally: Tally
    dispatched: tuple[Trial, ...]  # in flight
    best_spend: float | None  # lowest spend of a recurrence that reached the target
    retry_stand_in: float  # what a miss whose retry is not known yet is charged: Tally.cheapest_reached_mean
    num_records: int

    @classmethod
    def of(cls, tally: Tally) -> HistoryView:
        """The view of `tally`; NoFeasibleBatchSizeError when every size ran out of memory."""
        feasible = tally.feasible()
        if not feasible:
            limit = tally.min_oom
            raise NoFeasibleBatchSizeError(
                f"every batch size ran out of memory (smallest oom at {limit}); "
                f"allowed batch_sizes must include a size below {limit}"
            )
        stand_in = tally.cheapest_reached_mean()
        return cls(feasible, tally, tuple(tally.in_flight), tally.best_spend, stand_in, tally.num_records)

    def threshold(self, spec: JobSpec) -> float | None:
        """zeus-nsdi23's early stop: beta x the lowest recurrence spend; None without beta or a finish."""
        if spec.beta_knob is None or self.best_spend is None:
            return None
        return spec.beta_knob * self.best_spend

    def in_flight(self, batch_size: int, after: int | None = None) -> bool:
        """Whether a trial of this size is dispatched and unfinished; with `after`, one numbered after that
        trial (the dispatch order is the trial number)."""
        return any(r.batch_size == batch_size and (after is None or r.trial > after) for r in self.dispatched)

    def has_reached(self, batch_size: int) -> bool:
        """Whether any observation at this size reached the target."""
        return self.tally.arm(batch_size).reached_n > 0

    @property
    def best_reached_size(self) -> int | None:
        """Batch size of the cheapest single reached trial, if it is still feasible."""
        size = self.tally.best_size
        return size if size in self.feasible else None

    @property
    def max_trial(self) -> int | None:
        """The largest trial number observed (finished and learned from)."""
        return self.tally.max_trial

    def window(self, batch_size: int) -> list[WindowEntry]:
        """The size's last `window_size` observations, oldest first (a window_size > 0 job only)."""
        return self.tally.window(batch_size)

    def charged(self, batch_size: int, window_size: int = 0) -> tuple[int, float | None]:
        """(count, mean) of the size's observed costs (the last `window_size` when > 0), each miss charged
        what it cost its recurrence (`retry_charges`); mean None without observations."""
        if window_size > 0:
            costs = self.charged_window(batch_size)
            return costs.size, (float(costs.mean()) if costs.size else None)
        arm = self.tally.arm(batch_size)
        if not arm.n:
            return 0, None
        return arm.n, (arm.total + arm.known + arm.pending * self.retry_stand_in) / arm.n

    def charged_window(self, batch_size: int) -> np.ndarray:
        values = []
        for cost, reached, charge in self.window(batch_size):
            if not reached:
                cost += self.retry_stand_in if charge is None else charge
            values.append(cost)
        return np.asarray(values, dtype=float)

    def first_observations(self) -> dict[int, Observation]:
        """Each size's first finished observation: its walk step."""
        arms = zip(self.tally.sizes, self.tally.arms, strict=True)
        return {b: Observation(arm.first_cost, arm.first_reached, arm.first_stopped) for b, arm in arms if arm.n}


def tally_history(spec: JobSpec, history: History) -> Tally:
    """The tally of `history` (any order; taken in trial order, then recurrence)."""
    return Tally(spec, TrialHistory.of(history))


def read_history(spec: JobSpec, history: History) -> HistoryView:
    """Summarize `history` (any order) under the shared failure semantics."""
    return HistoryView.of(tally_history(spec, history))


def retry_charges(
    recurrences_of: np.ndarray, spend: np.ndarray, finished: np.ndarray, reached: np.ndarray, *, stand_in: float
) -> np.ndarray:
    """Per record (in trial order): what the rest of its recurrence spent to reach the target.

    Why: a trial that misses the target does not end its recurrence; the recurrence pays for the retry
    too. Charging a miss only its own cost makes it look cheap (it was cut off at max_epochs or the
    threshold), and a bandit that compares costs then prefers the size that never finishes the job. So
    a miss is charged its own cost plus the spend of the later trials of its recurrence up to the last
    one that reached, when that is known; while it is not (the retry is still running, or the recurrence
    ran out of attempts), the retry stand-in (Tally.cheapest_reached_mean) is charged: what a retry costs at
    best. Nothing has reached yet: 0 (exploration compares misses among themselves).

    The policies compute this per miss (zeus_kfp.policy.recurrences); this is the same rule for every record.
    """
    finished = np.asarray(finished, dtype=bool)
    reached = finished & np.asarray(reached, dtype=bool)
    charged = recurrences.charges(
        np.asarray(recurrences_of, dtype=np.int64),
        np.where(finished, np.asarray(spend, dtype=float), 0.0),
        reached,
        np.ones(len(finished), dtype=bool),
    ).charge
    return np.where(np.isnan(charged), stand_in, charged)


def decision_rng(seed: int, num_records: int) -> np.random.Generator:
    """The decision's randomness: a function of the seed and how much history there is, nothing else."""
    return np.random.default_rng([seed % 2**64, num_records])
