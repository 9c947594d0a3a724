"""`default`: this project's batch-size policy (docstring with measurements to be written)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zeus.job import JobSpec, TrialRecord
from zeus.policy.base import ArmState, Decision
from zeus.policy.history import HistoryView, decision_rng, read_history
from zeus.policy.pruning import feasible_default
from zeus.policy.walk import Observation, WalkState, replay_walk


@dataclass(frozen=True)
class _Plan:
    """Everything decide and arm_states read: the history, the walk, and the sizes exploitation may pick."""

    view: HistoryView
    walk: WalkState
    candidates: tuple[int, ...]  # exploitation's arms; every other size is pruned once the walk is over


class DefaultPolicy:
    """A one-pass walk that stops where the cost turns, then pooled-noise Thompson sampling over contenders.

    The constructor's knobs exist so benchmarks can measure alternatives; the defaults are the winners.
    """

    name = "default"

    def __init__(
        self,
        turn_margin: float | None = 0.2,
        hard_turn: float | None = 1.5,
        skip_margin: float | None = 0.05,
        overlap: bool = True,
        prior_cv: float = 0.1,
        prior_weight: float = 2.0,
        contend_factor: float = 1.1,
        contend_z: float = 1.0,
        std_scale: float = 0.3,
    ) -> None:
        self.turn_margin = turn_margin
        self.hard_turn = hard_turn
        self.skip_margin = skip_margin
        self.overlap = overlap
        self.prior_cv = prior_cv
        self.prior_weight = prior_weight
        self.contend_factor = contend_factor
        self.contend_z = contend_z
        self.std_scale = std_scale

    # -- shared by decide and arm_states -------------------------------------------------------

    def _plan(self, spec: JobSpec, history: Sequence[TrialRecord]) -> _Plan:
        view = read_history(spec, history)
        walk = replay_walk(
            view.feasible,
            feasible_default(view.feasible, spec.default_batch_size),
            first_observations(view),
            turn_margin=self.turn_margin,
            hard_turn=self.hard_turn,
            skip_margin=self.skip_margin,
        )
        return _Plan(view, walk, _candidates(view, walk))

    def _cv(self, view: HistoryView) -> float:
        """Relative noise of a trial's cost, pooled over sizes from reached trials after each size's
        first (which carries the profiling epoch), shrunk toward prior_cv."""
        num, den = self.prior_weight * self.prior_cv**2, self.prior_weight
        for b in np.unique(view.obs_sizes).tolist():
            idx = np.flatnonzero(view.obs_sizes == b)[1:]
            c = view.obs_costs[idx[view.obs_reached[idx]]]
            if c.size >= 2:
                num += float(np.var(c, ddof=1) / c.mean() ** 2) * (c.size - 1)
                den += c.size - 1
        return float(np.sqrt(num / den))

    # -- the policy ------------------------------------------------------------------------------

    def _explore(self, spec: JobSpec, plan: _Plan) -> Decision:
        walk, view = plan.walk, plan.view
        threshold = view.threshold(spec)
        expected = walk.expected
        if not view.in_flight(expected):
            return Decision(expected, threshold, "exploration", f"exploring batch size {expected}")
        if self.overlap and threshold is not None:  # never without an early stop: it could run max_epochs
            for b in _meanwhile(view, walk):
                why = f"exploration of {expected} is in flight: exploring {b} meanwhile"
                return Decision(b, threshold, "exploration", why)
        fallback = walk.best_size or feasible_default(view.feasible, spec.default_batch_size)
        why = f"exploration of {expected} is in flight; running the cheapest explored size {fallback}"
        return Decision(fallback, threshold, "exploration-concurrent", why)

    def decide(self, spec: JobSpec, history: Sequence[TrialRecord], seed: int) -> Decision:
        plan = self._plan(spec, history)
        if not plan.walk.done:
            return self._explore(spec, plan)
        view = plan.view
        threshold = view.threshold(spec)
        arms = list(plan.candidates)
        costs = {b: view.charged_costs(b, spec.window_size) for b in arms}
        cold = [b for b in arms if costs[b].size == 0]
        rng = decision_rng(seed, view.num_records)
        if cold:
            b = int(cold[int(rng.integers(len(cold)))])
            return Decision(b, threshold, "exploitation", f"batch size {b} has no observation yet")
        cv = self._cv(view)
        floor = min(costs[b].mean() for b in arms)
        arms = [
            b
            for b in arms
            if costs[b].mean() <= self.contend_factor * floor
            or costs[b].mean() * (1.0 - self.contend_z * cv / np.sqrt(costs[b].size)) <= floor
        ]
        single = [b for b in arms if costs[b].size < 2]
        if single:
            b = min(single, key=lambda x: costs[x].mean())
            return Decision(b, threshold, "exploitation", f"batch size {b} is a contender with one observation")
        means = np.array([costs[b].mean() for b in arms])
        stds = self.std_scale * cv * means / np.sqrt([costs[b].size for b in arms])
        draws = rng.normal(means, stds)
        k = int(np.argmin(draws))
        why = f"sampled cost {draws[k]:.4g} is the lowest of {len(arms)} arms (pooled cv {cv:.3f})"
        return Decision(int(arms[k]), threshold, "exploitation", why)

    def arm_states(self, spec: JobSpec, history: Sequence[TrialRecord]) -> list[ArmState]:
        plan = self._plan(spec, history)
        view, walk = plan.view, plan.walk
        stage = "exploitation" if walk.done else "exploration"
        cv = self._cv(view)
        out = []
        for b in spec.batch_sizes:
            c = view.charged_costs(b, spec.window_size)
            if b not in view.feasible:
                arm_stage, pruned = "oom", True
            else:
                pruned = b not in plan.candidates if walk.done else b in walk.ruled_out
                arm_stage = "pruned" if pruned else stage
            mean = float(c.mean()) if c.size else None
            # Posterior precision of the mean cost under the pooled noise model.
            precision = float(c.size / (cv * c.mean()) ** 2) if c.size and c.mean() > 0 and cv > 0 else None
            out.append(ArmState(b, arm_stage, int(c.size), mean, precision, pruned))
        return out


def first_observations(view: HistoryView) -> dict[int, Observation]:
    """Each size's first finished observation, as (cost, reached): its walk step."""
    sizes, idx = np.unique(view.obs_sizes, return_index=True)
    return {
        int(b): (float(view.obs_costs[i]), bool(view.obs_reached[i]))
        for b, i in zip(sizes.tolist(), idx.tolist(), strict=True)
    }


def _meanwhile(view: HistoryView, walk: WalkState) -> list[int]:
    """What an overlapping recurrence explores while the walk's next size is in flight, best first: the
    size after it, while the costs in that direction are falling; the up direction's next size, once it
    is needed or once the in-flight trial has been outlasted (a trial dispatched after it finished
    first: it is slow, and in a recurring job a slow trial is a costly one, so the down direction is
    likely ending). Sizes already in flight are left out."""
    started = min(r.trial for r in view.dispatched if r.batch_size == walk.expected)
    outlasted = bool((view.obs_trials > started).any())
    options = [*walk.ahead[:1], *(walk.other[:1] if walk.other_needed or outlasted else ())]
    return [b for b in options if not view.in_flight(b)]


def _candidates(view: HistoryView, walk: WalkState) -> tuple[int, ...]:
    """The sizes exploitation picks from. Once any size has reached the target: the sizes that have
    reached it (a size that never finished the job is never exploited), including any the walk passed
    over (a trial run ahead of a turn that came back cheap is data, not noise). Before: the walk's
    open sizes, or every feasible size when the walk ruled them all out."""
    reached = tuple(b for b in view.feasible if view.has_reached(b))
    if reached:
        return reached
    return tuple(b for b in view.feasible if b not in walk.ruled_out) or view.feasible
