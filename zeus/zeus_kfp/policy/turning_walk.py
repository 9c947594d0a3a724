"""`turning-walk` (alias `default`): this project's batch-size policy, a pure function of (spec, history, seed).

A walk from the default size that stops where the cost turns (zeus_kfp.policy.walk), probes past a turn once the
job has run long enough for a wrong one to cost more than the probe, then Thompson sampling with one pooled noise
level over the sizes that can still be the cheapest; the early stop is beta x the cheapest size's mean cost. The
model it rests on and each rule's reason: docs/DESIGN.md, "Policy". Its figures beside `zeus-nsdi23`'s:
benchmarks/policy.py and benchmarks/RESULTS.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from zeus_kfp.job import JobSpec
from zeus_kfp.policy.base import ArmState, Decision
from zeus_kfp.policy.history import HistoryView, decision_rng, read_history
from zeus_kfp.policy.pruning import feasible_default
from zeus_kfp.policy.walk import WalkState, look_past, replay_walk
from zeus_kfp.trials import Trial


@dataclass(frozen=True)
class Config:
    """The policy's constants, one value. Production runs `DEFAULT`; a benchmark may pass another to measure it."""

    # Walk: a reached step costing more than this x the cheapest step ends its direction at once. Single runs
    # spread 0.7-1.4x their mean epochs, so two runs of equal sizes rarely differ by 1.5x; a real rise often does.
    hard_turn: float = 1.5
    # Walk: past the minimum (not right after the cheapest step, where one worse run may be noise or a bump),
    # a step costing more than this x the cheapest ends its direction: the curve has turned.
    soft_turn: float = 1.2
    # Walk: the up direction is skipped when a size below the default beat it by more than this: with one
    # minimum it lies below. Small, so a tie (the minimum at the default) still walks up.
    skip_margin: float = 0.05
    # Concurrency: how many sizes next to the default the recurrences that start with its first trial explore
    # (nothing has a cost yet). More blind sizes cost more than the default's profiling run they replace.
    first_wave: int = 3
    # Bandit: the prior relative noise of one run's cost and its weight in runs: the pooled noise starts there
    # and follows the job's own repeat runs as they come. The traces' sizes fit cv 0.099 with a weight of 4.5
    # runs (benchmarks/noise_prior.py); the weight here is lighter, so a job's own noise takes over sooner
    # (4.5 measured no better on the cells).
    prior_cv: float = 0.1
    prior_weight: float = 2.0
    # Bandit: a size whose mean cost is within this x the best mean stays a contender: one unlucky run must
    # not rule out a size that costs a few percent more at most (a miss is charged its retry).
    contend: float = 1.1
    # Bandit: the posterior's standard deviation is scaled by this: sampling more greedily than the posterior,
    # since every exploratory pick of a costlier size is paid in full and the walk already explored.
    greed: float = 0.3


DEFAULT = Config()


class TurningWalkPolicy:
    """A walk that stops where the cost turns, probes past a turn when it pays, then pooled-noise Thompson
    sampling over the contenders (docs/DESIGN.md, "Policy")."""

    name = "turning-walk"  # named by its algorithm; "default" is an alias (zeus_kfp.policy.ALIASES)

    def __init__(self, config: Config = DEFAULT) -> None:
        self.config = config

    def _walk(self, spec: JobSpec, view: HistoryView) -> WalkState:
        default = feasible_default(view.feasible, spec.default_batch_size)
        return replay_walk(view.feasible, default, view.first_observations(), self.config)

    def stop_threshold(self, spec: JobSpec, history: Sequence[Trial]) -> float | None:
        """The early stop on the history as it is now (what a running trial stops at, zeus_kfp.policy.base)."""
        return self._threshold(spec, read_history(spec, history))

    @staticmethod
    def _threshold(spec: JobSpec, view: HistoryView) -> float | None:
        """beta x the cheapest size's mean cost (Tally.cheapest_size_mean); None without beta or before any
        size reached the target."""
        basis = view.tally.cheapest_size_mean()
        return None if spec.beta_knob is None or basis is None else spec.beta_knob * basis

    def _cv(self, view: HistoryView) -> float:
        """The job's relative noise of one run's cost, pooled over sizes from reached runs after each size's
        first (which also profiles), shrunk toward the prior."""
        num, den = self.config.prior_weight * self.config.prior_cv**2, self.config.prior_weight
        for arm in view.tally.arms:
            if arm.rep_n >= 2:
                num += arm.rep_m2 / arm.rep_mean**2
                den += arm.rep_n - 1
        return float(np.sqrt(num / den))

    def decide(self, spec: JobSpec, history: Sequence[Trial], seed: int) -> Decision:
        view = read_history(spec, history)
        walk = self._walk(spec, view)
        threshold = self._threshold(spec, view)
        if not walk.done:
            return self._explore(spec, view, walk, threshold)
        cv = self._cv(view)
        probe = _due_probe(view, walk, cv) if threshold is not None else None
        if probe is not None:
            b, cap = probe
            why = f"probing {b}, past where the walk turned ({walk.probed} probes so far); stopped past {cap:.4g}"
            return Decision(b, min(threshold, cap), "exploration", why)
        return self._exploit(spec, view, _candidates(view, walk), cv, threshold, seed)

    def _explore(self, spec: JobSpec, view: HistoryView, walk: WalkState, threshold: float | None) -> Decision:
        """The walk's next size; while it is in flight (another recurrence runs it), what this one runs."""
        expected, default = walk.expected, feasible_default(view.feasible, spec.default_batch_size)
        if not view.in_flight(expected):
            return Decision(expected, threshold, "exploration", f"exploring batch size {expected}")
        if view.max_trial is None:  # nothing has finished: no cost to compare, no early stop
            for b in _first_wave(view, default, self.config.first_wave):
                why = f"exploration of {expected} is in flight and nothing has finished: exploring {b} meanwhile"
                return Decision(b, threshold, "exploration", why)
        elif threshold is not None:  # never without an early stop: a blind size could run max_epochs
            for b in self._meanwhile(view, walk, default):
                why = f"exploration of {expected} is in flight: exploring {b} meanwhile"
                return Decision(b, threshold, "exploration", why)
        size = _cheapest_reached(spec, view, walk) or walk.best_size or default
        why = f"exploration of {expected} is in flight; running the cheapest size so far, {size}"
        if size in walk.ruled_out or (view.tally.arm(size).n > 0 and not view.has_reached(size)):
            size, why = expected, f"exploration of {expected} is in flight and no explored size is left: {expected}"
        return Decision(size, threshold, "exploration-concurrent", why)

    def _meanwhile(self, view: HistoryView, walk: WalkState, default: int) -> list[int]:
        """The sizes each walker needs next past the in-flight ones, down first; the up walker's only once it
        is needed, the down walker has ended, or the walk's in-flight trial was outlasted (a trial dispatched
        after it finished first: it is slow, and in a recurring job a slow trial is a costly one)."""
        pending = frozenset(r.batch_size for r in view.dispatched)
        ahead = look_past(view.feasible, default, view.first_observations(), pending, self.config)
        started = min(r.trial for r in view.dispatched if r.batch_size == walk.expected)
        outlasted = view.max_trial is not None and view.max_trial > started
        options = [ahead.down, ahead.up if ahead.up_needed or outlasted or not ahead.down_open else None]
        return [b for b in options if b is not None and b not in pending and b not in walk.ruled_out]

    def _exploit(
        self, spec: JobSpec, view: HistoryView, arms: list[int], cv: float, threshold: float | None, seed: int
    ) -> Decision:
        """Thompson sampling over the contenders: N(mean, (greed x cv x mean)^2 / n) per size."""
        costs = {b: view.charged(b, spec.window_size) for b in arms}  # (count, mean)
        rng = decision_rng(seed, view.num_records)
        cold = [b for b in arms if costs[b][0] == 0]
        if cold:
            b = int(cold[int(rng.integers(len(cold)))])
            return Decision(b, threshold, "exploitation", f"batch size {b} has no observation yet")
        floor = min(costs[b][1] for b in arms)
        # Within `contend` x the best mean, or within one standard error of it.
        arms = [
            b
            for b in arms
            if costs[b][1] <= self.config.contend * floor or costs[b][1] * (1.0 - cv / np.sqrt(costs[b][0])) <= floor
        ]
        single = [b for b in arms if costs[b][0] < 2]
        if single:  # a first run also pays for profiling and reads high: run it again first
            b = min(single, key=lambda x: costs[x][1])
            return Decision(b, threshold, "exploitation", f"batch size {b} is a contender with one observation")
        means = np.array([costs[b][1] for b in arms])
        draws = rng.normal(means, self.config.greed * cv * means / np.sqrt([costs[b][0] for b in arms]))
        k = int(np.argmin(draws))
        why = f"sampled cost {draws[k]:.4g} is the lowest of {len(arms)} arms (pooled cv {cv:.3f})"
        return Decision(int(arms[k]), threshold, "exploitation", why)

    def arm_states(self, spec: JobSpec, history: Sequence[Trial]) -> list[ArmState]:
        view = read_history(spec, history)
        walk = self._walk(spec, view)
        candidates = _candidates(view, walk)
        cv = self._cv(view)
        out = []
        for b in spec.batch_sizes:
            n, mean = view.charged(b, spec.window_size)
            if b not in view.feasible:
                stage, pruned = "oom", True
            else:
                pruned = b not in candidates if walk.done else b in walk.ruled_out
                # Out of the running: "pruned" once tried; "skipped" if the walk ruled it out untried (a size past
                # a turn), which says nothing measured about it.
                out_of_running = "pruned" if n else "skipped"
                stage = out_of_running if pruned else "exploitation" if walk.done else "exploration"
            # Posterior precision of the mean cost under the pooled noise model.
            precision = float(n / (cv * mean) ** 2) if mean is not None and mean > 0 and cv > 0 else None
            out.append(ArmState(b, stage, n, None if mean is None else float(mean), precision, pruned))
        return out


def _first_wave(view: HistoryView, default: int, size: int) -> list[int]:
    """The sizes the first wave explores: the first `size` of one down, one up, then further up before further
    down (a size too large tends to miss the target at max_epochs; one too small can reach it at many times the
    best cost, which costs more), less those in flight."""
    sizes, i = view.feasible, view.feasible.index(default)
    order = [i - 1, i + 1, *range(i + 2, len(sizes)), *range(i - 2, -1, -1)]
    return [b for b in [sizes[j] for j in order if 0 <= j < len(sizes)][:size] if not view.in_flight(b)]


def _due_probe(view: HistoryView, walk: WalkState, cv: float) -> tuple[int, float] | None:
    """The size past a turn to probe now, if one is due, and the cap it is stopped past (its direction's step
    before it). Due once n x the chance that the turn was noise reaches one, n the job's observations so far:
    the job's past is the estimate of its future, so a probe (about one run) is due once the recurrences a
    wrong turn is expected to misdirect add up to one. The chance of rises in a row is their product. The
    ratio is over the cheapest step's cost: its first run, or its mean once later runs show the first read low
    (never below the first run: like against like, both first runs carry the profiling)."""
    if not walk.probes or walk.best_cost is None:
        return None
    observed = sum(arm.n for arm in view.tally.arms)
    reference = max(walk.best_cost, view.charged(walk.best_size)[1])
    for probe in walk.probes:
        chance = math.prod(wrong_turn_chance(c / reference, cv) for c in (*probe.rises, probe.cap))
        if not view.in_flight(probe.batch_size) and observed * chance >= 1.0:
            return probe.batch_size, probe.cap
    return None


def wrong_turn_chance(ratio: float, cv: float) -> float:
    """The chance that single runs of two sizes that cost the same differ by `ratio` or more, the dearer one
    read as the turn: each run log-normal with relative noise `cv`, so the log ratio is normal with standard
    deviation sqrt(2) cv (its upper tail beyond log(ratio); a ratio at or below 1 is no evidence: one half)."""
    if ratio <= 1.0:
        return 0.5
    return NormalDist().cdf(-math.log(ratio) / (math.sqrt(2.0) * cv))


def _cheapest_reached(spec: JobSpec, view: HistoryView, walk: WalkState) -> int | None:
    """The size with the lowest charged mean among those that reached and are not ruled out (ties: the
    smaller); None while none has."""
    reached = [b for b in view.feasible if view.has_reached(b) and b not in walk.ruled_out]
    return min(reached, key=lambda b: view.charged(b, spec.window_size)[1]) if reached else None


def _candidates(view: HistoryView, walk: WalkState) -> list[int]:
    """The sizes exploitation picks from: once any size reached the target, those that did (wherever their runs
    came from: a trial run ahead of a turn that came back cheap is data); before, the walk's open sizes, or
    every feasible size when it ruled them all out."""
    reached = [b for b in view.feasible if view.has_reached(b)]
    return reached or [b for b in view.feasible if b not in walk.ruled_out] or list(view.feasible)
