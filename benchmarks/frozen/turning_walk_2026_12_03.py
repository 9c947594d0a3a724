# A frozen copy of `turning-walk` as it stood on 2026-12-03 (zeus/policy/turning_walk.py at commit e4ec5d2),
# with every switch it had, so benchmarks/policy.py can run it beside today's policy in the same run. Not
# imported by zeus_kfp; only its import of its walk (frozen/walk_2026_12_03.py) is changed.
"""`turning-walk` (alias `default`): this project's batch-size policy. A walk that stops where the
cost turns, then Thompson sampling with a pooled noise model over the sizes that can still be the
cheapest, and a probe past a turn once the turn may have been noise and the job has run long enough
for that to matter.

It is measured against `zeus-nsdi23` in the same simulator, under the same rules
(benchmarks/policy.py); what each rule below is worth, and what was tried and dropped, is in
benchmarks/RESULTS.md ("Policies in the trace simulator").

1. One exploration pass from the default size, down then up. Zeus runs two rounds, the second
   re-running every survivor, which costs more than it learns.
2. The pass stops where the cost turns (zeus_kfp.policy.walk): a size costing more than 1.5x the cheapest
   step before it ends its direction, so does one costing 1.2x once past the minimum, and the up
   direction is skipped when a smaller size beat the default by 5 %. A miss ends its direction, as in
   Zeus, except at the default size: it is where the walk starts, not a step away from it, so its one
   run missing (a noisy epoch count, a tight max_epochs) says nothing about the sizes below it.
3. The early stop is beta x what the cheapest size costs per run: the lowest mean cost over the sizes
   that have reached the target, each mean over all the size's observations (a run stopped or missed
   counted at what it cost, a lower bound of what it would have). Zeus stops at beta x the cheapest
   *recurrence*, the minimum of ever more noisy runs, which falls with every run towards the luckiest
   one (one size's runs span 0.7-1.4x their mean epochs in the traces, wider on a perturbed job) until
   it cuts the best size's own typical runs: every size then looks as cheap as its cut-off plus a
   retry (benchmarks/RESULTS.md, issue 25: job #217). beta is the user's factor, applied to the
   expectation it is meant for; a stopped run only raises a mean, so a low basis corrects itself.
   No exploration trial is cut short beyond it: a stopped trial costs its spend plus the retry, more
   than letting a size that is merely worse finish.
4. Contenders: sizes whose mean cost (a miss charged the retry it forced, zeus_kfp.policy.history) is
   within 1.1x of the best mean, or within one noise level of it (mean x (1 - cv / sqrt(n)) <= best):
   one unlucky first trial must not rule a size out for good. A contender seen once is tried again
   first: a first trial also pays for profiling and reads high.
5. Thompson sampling with one relative noise level for all sizes (coefficient of variation from
   repeat trials that reached, shrunk toward 0.1): N(mean, (0.3 cv mean)^2 / n). Zeus estimates each
   arm's variance from its own two or three trials, which makes posteriors erratically sharp or
   flat; 0.3 samples more greedily than the posterior.
6. Once any size has reached the target, only sizes that have reached it are exploited.

Overlapping recurrences (a decision sees the other recurrences' dispatched, unfinished trials):

7. While nothing has finished (the first wave), the recurrences that start alongside the default's
   first trial explore up to three sizes next to the default, in this order of preference: one
   down, one up, two up, two down, three down, three up (the first three the job has). They run
   with no early stop, since no recurrence has a cost yet. Running the default K times instead
   would pay its first (profiling) trial K times. The one size down and the one size up are each the
   walk's step in its direction whenever that direction is walked. Past them, two up comes before
   two down: a size too large tends to miss the target (cut off at max_epochs), while one too small
   can reach it at many times the best cost, which on the NSDI'23 traces costs more. Further
   recurrences run the default (more blind sizes cost more than the default's profiling does).
8. Afterwards, while the walk's next size is in flight, a recurrence explores the size each walker
   would need next if the in-flight sizes changed nothing (zeus_kfp.policy.walk.look_past), but only a
   size right after an observed step: results that came back out of order (a first-wave size
   below an in-flight default, say) tell the walk where to go on. The up walker's size only once
   it is needed (the down direction did not beat the default), the down walker has ended, or the
   in-flight trial was outlasted (a trial dispatched after it finished first: it is slow, and in a
   recurring job a slow trial is a costly one). Never without an early stop.
9. Otherwise the concurrent recurrence runs the cheapest size that has reached the target (by mean
   charged cost, wherever its trials came from, not only walk steps), never a pruned one; the
   default while nothing has reached.

Past the walk (`resume`, on by default since issue 25; `resume=False` turns it off, and rule 12 with it):

10. A turn or a skip rules the sizes past it out only until probed (zeus_kfp.policy.walk, `_due_probe`): one
    size at a time, once the job's observations n make n x the chance that the turn was noise reach one
    (that chance from the ratio behind the turn and the job's own pooled noise; the ratio over the cheapest
    step's mean once its runs show its first run read low), under the early stop
    and stopped once it costs more than the step before it; a probe cheaper than every step resumes the
    walk; a miss ends the direction for good, and a second rise is rule 12's. On jobs generated from the traces
    (zeus_kfp.simulate.perturb) a noisy first run, a plateau or a bump past a turn otherwise leaves a job on
    a local minimum for good; on the measured cells, whose curves have one minimum and little noise,
    most turns are far outside the noise and are probed late or never.
12. (`compound_rises`, on by default since issue 25's fourth round; numbered after rule 11, which came
    first.) A probe that rises (it reached at a cost of at least the step before it, or the early stop cut
    it short near that cap) does not end its direction: the next size past it is probed, under rule 10's
    timing with the chances of every rise in a row multiplied (n x the product reaches one). Why: on a curve
    that rises over two sizes before it falls further, ending the direction at the second rise leaves the
    job on a local minimum for good (benchmarks/RESULTS.md, issue 25, "Past a bump"); two independent rises
    are both noise only as often as the product of their chances, so a real rise, whose chance is small, is
    rarely passed twice. A miss (max_epochs ran out) still ends the direction.

Off by default (`confirm=True`; benchmarks/RESULTS.md, issue 25, "Confirming a turn", says why it is not the
default yet):

11. A turn or a skip whose first runs are within the noise of each other (their cost ratio below
    exp(2 sqrt(2) cv): two standard deviations of the log ratio of two single runs, cv = prior_cv, the
    traces' spread of one run) rules nothing out until both sizes it compares have run twice (the
    turning step or the default size first, then the step it was compared with), under the job's early
    stop; it then stands while the first size's runs after its first cost more on average than the
    other's (zeus_kfp.policy.walk, `_judged`). Why: rule 2 reads turns and skips off single first runs, and
    one run's epochs to target are noisy enough (a 1.6x first-run difference on a 1.03x true one) to
    rule the cheapest sizes out for good. Runs after the first are compared because a first run also
    profiles the power limits; later runs (exploitation) keep counting, so a turn the first runs got
    wrong is undone once the runs say so. The noise is the prior's, not the pooled estimate `_cv`: that
    one grows as exploitation repeats sizes, and would send turns taken long before back to a
    confirmation (measured: it costs more on the tuned cells).

Everything is derived from the history (dispatched trials included), so any process decides the
same, and every statistic used is computed over the history's columns (zeus_kfp.policy.tally): per size its
first result, the count and sum of its costs and its misses' charges (with `confirm`, less the first),
the spread of its repeat costs, whether it reached; the smallest oom; the cheapest reached recurrence;
the largest finished trial number (for "outlasted").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from frozen.walk_2026_12_03 import WalkState, look_past, replay_walk

from zeus_kfp.job import JobSpec
from zeus_kfp.policy.base import ArmState, Decision
from zeus_kfp.policy.history import HistoryView, decision_rng, read_history
from zeus_kfp.policy.pruning import feasible_default
from zeus_kfp.trials import Trial

EARLY_STOP_BASES = ("mean", "lowest-spend")


@dataclass(frozen=True)
class _Plan:
    """Everything decide and arm_states read: the history, the walk, and the sizes exploitation may pick."""

    view: HistoryView
    walk: WalkState
    candidates: tuple[int, ...]  # exploitation's arms; every other size is pruned once the walk is over


class TurningWalkPolicy:
    """A one-pass walk that stops where the cost turns, then pooled-noise Thompson sampling over contenders.

    The constructor's knobs exist so benchmarks can measure alternatives; the defaults are the winners.
    """

    name = "turning-walk"  # named by its algorithm; "default" is an alias (zeus_kfp.policy.ALIASES)

    def __init__(
        self,
        turn_margin: float | None = 0.2,
        hard_turn: float | None = 1.5,
        skip_margin: float | None = 0.05,
        overlap: bool = True,
        first_wave: tuple[int, ...] = (-1, 1, 2, -2, -3, 3),
        first_wave_size: int = 3,
        prior_cv: float = 0.1,
        prior_weight: float = 2.0,
        contend_factor: float = 1.1,
        contend_z: float = 1.0,
        std_scale: float = 0.3,
        resume: bool = True,
        early_stop: str = "mean",
        default_miss_ends: bool = False,
        confirm: bool = False,
        compound_rises: bool = True,
    ) -> None:
        self.turn_margin = turn_margin
        self.hard_turn = hard_turn
        self.skip_margin = skip_margin
        self.overlap = overlap
        self.first_wave, self.first_wave_size = first_wave, first_wave_size  # offsets from the default size
        self.prior_cv = prior_cv
        self.prior_weight = prior_weight
        self.contend_factor = contend_factor
        self.contend_z = contend_z
        self.std_scale = std_scale
        self.resume = resume
        if early_stop not in EARLY_STOP_BASES:
            raise ValueError(f"invalid early_stop={early_stop!r}: allowed {', '.join(EARLY_STOP_BASES)}")
        self.early_stop = early_stop
        self.default_miss_ends = default_miss_ends
        self.confirm = confirm
        self.compound_rises = compound_rises

    # -- shared by decide and arm_states -------------------------------------------------------

    def _walk_rules(self, view: HistoryView) -> dict:
        """The walk's keyword arguments (replay_walk and look_past alike): its margins and rules, and with
        `confirm` (rule 11) the noise of one run and each size's runs; and rule 12 (`compound_rises`)."""
        return {
            "turn_margin": self.turn_margin,
            "hard_turn": self.hard_turn,
            "skip_margin": self.skip_margin,
            "resume": self.resume,
            "default_miss_ends": self.default_miss_ends,
            "confirm": self.prior_cv if self.confirm else None,
            "runs": _runs(view) if self.confirm else None,
            "compound_rises": self.compound_rises,
        }

    def _plan(self, spec: JobSpec, view: HistoryView) -> _Plan:
        default = feasible_default(view.feasible, spec.default_batch_size)
        walk = replay_walk(view.feasible, default, view.first_observations(), **self._walk_rules(view))
        return _Plan(view, walk, _candidates(view, walk))

    def stop_threshold(self, spec: JobSpec, history: Sequence[Trial]) -> float | None:
        """Rule 3 on the history as it is now (what a running trial stops at, zeus_kfp.policy.base)."""
        return self._threshold(spec, read_history(spec, history))

    def _threshold(self, spec: JobSpec, view: HistoryView) -> float | None:
        """The early stop (rule 3): beta x what the cheapest size costs per run, its mean (`early_stop="mean"`),
        or Zeus's beta x the lowest recurrence spend (`"lowest-spend"`, as zeus-nsdi23 does). None without
        beta or before anything reached."""
        if self.early_stop == "lowest-spend":
            return view.threshold(spec)
        basis = view.tally.cheapest_size_mean()
        return None if spec.beta_knob is None or basis is None else spec.beta_knob * basis

    def _cv(self, view: HistoryView) -> float:
        """Relative noise of a trial's cost, pooled over sizes from reached trials after each size's
        first (which carries the profiling epoch), shrunk toward prior_cv."""
        num, den = self.prior_weight * self.prior_cv**2, self.prior_weight
        for arm in view.tally.arms:
            if arm.rep_n >= 2:
                num += arm.rep_m2 / (arm.rep_n - 1) / arm.rep_mean**2 * (arm.rep_n - 1)
                den += arm.rep_n - 1
        return float(np.sqrt(num / den))

    # -- the policy ------------------------------------------------------------------------------

    def _explore(self, spec: JobSpec, plan: _Plan) -> Decision:
        walk, view = plan.walk, plan.view
        threshold = self._threshold(spec, view)
        expected = walk.expected
        if not view.in_flight(expected):
            if view.tally.arm(expected).n:  # rule 11: a second run before a turn or a skip within the noise
                why = f"confirming batch size {expected}: the turn or skip resting on its first run is within the noise"
                return Decision(expected, threshold, "exploration", why)
            return Decision(expected, threshold, "exploration", f"exploring batch size {expected}")
        default = feasible_default(view.feasible, spec.default_batch_size)
        if self.overlap and view.max_trial is None:  # the first wave: nothing has finished yet
            for b in _first_wave(view, default, self.first_wave, self.first_wave_size):
                why = f"exploration of {expected} is in flight and nothing has finished: exploring {b} meanwhile"
                return Decision(b, threshold, "exploration", why)
        elif self.overlap and threshold is not None:  # never without an early stop: it could run max_epochs
            for b in self._meanwhile(view, walk, default):
                why = f"exploration of {expected} is in flight: exploring {b} meanwhile"
                return Decision(b, threshold, "exploration", why)
        fallback = _cheapest_reached(spec, view, walk) or walk.best_size or default
        why = f"exploration of {expected} is in flight; running the cheapest size so far, {fallback}"
        missed = view.tally.arm(fallback).n > 0 and not view.has_reached(fallback)
        if fallback in walk.ruled_out or missed:  # e.g. the default missed, nothing reached yet: never rerun a miss
            fallback, why = expected, f"exploration of {expected} is in flight and no explored size is left: {expected}"
        return Decision(fallback, threshold, "exploration-concurrent", why)

    def _meanwhile(self, view: HistoryView, walk: WalkState, default: int) -> list[int]:
        """What an overlapping recurrence explores while the walk's next size is in flight (rule 8), best
        first: the down walker's next size past the in-flight ones, then the up walker's once it may run.
        Sizes in flight or ruled out are left out."""
        pending = frozenset(r.batch_size for r in view.dispatched)
        ahead = look_past(view.feasible, default, view.first_observations(), pending, **self._walk_rules(view))
        started = min(r.trial for r in view.dispatched if r.batch_size == walk.expected)
        outlasted = view.max_trial is not None and view.max_trial > started
        up_may_run = ahead.up_needed or outlasted or not ahead.down_open
        options = [ahead.down, ahead.up if up_may_run else None]
        return [b for b in options if b is not None and b not in pending and b not in walk.ruled_out]

    def decide(self, spec: JobSpec, history: Sequence[Trial], seed: int) -> Decision:
        view = read_history(spec, history)
        plan = self._plan(spec, view)
        if not plan.walk.done:
            return self._explore(spec, plan)
        threshold = self._threshold(spec, view)
        cv = self._cv(view)  # the job's noise: rule 10's chance of a wrong turn, rules 4 and 5's contenders
        probe = _due_probe(view, plan.walk, cv) if threshold is not None else None
        if probe is not None:
            b, cap = probe
            why = f"probing {b}, past where the walk turned ({plan.walk.probes} probes so far); stopped past {cap:.4g}"
            return Decision(b, min(threshold, cap), "exploration", why)
        arms = list(plan.candidates)
        costs = {b: view.charged(b, spec.window_size) for b in arms}  # (count, mean)
        cold = [b for b in arms if costs[b][0] == 0]
        rng = decision_rng(seed, view.num_records)
        if cold:
            b = int(cold[int(rng.integers(len(cold)))])
            return Decision(b, threshold, "exploitation", f"batch size {b} has no observation yet")
        floor = min(costs[b][1] for b in arms)
        arms = [
            b
            for b in arms
            if costs[b][1] <= self.contend_factor * floor
            or costs[b][1] * (1.0 - self.contend_z * cv / np.sqrt(costs[b][0])) <= floor
        ]
        single = [b for b in arms if costs[b][0] < 2]
        if single:
            b = min(single, key=lambda x: costs[x][1])
            return Decision(b, threshold, "exploitation", f"batch size {b} is a contender with one observation")
        means = np.array([costs[b][1] for b in arms])
        stds = self.std_scale * cv * means / np.sqrt([costs[b][0] for b in arms])
        draws = rng.normal(means, stds)
        k = int(np.argmin(draws))
        why = f"sampled cost {draws[k]:.4g} is the lowest of {len(arms)} arms (pooled cv {cv:.3f})"
        return Decision(int(arms[k]), threshold, "exploitation", why)

    def arm_states(self, spec: JobSpec, history: Sequence[Trial]) -> list[ArmState]:
        view = read_history(spec, history)
        plan = self._plan(spec, view)
        walk = plan.walk
        stage = "exploitation" if walk.done else "exploration"
        cv = self._cv(view)
        out = []
        for b in spec.batch_sizes:
            n, mean = view.charged(b, spec.window_size)
            if b not in view.feasible:
                arm_stage, pruned = "oom", True
            else:
                pruned = b not in plan.candidates if walk.done else b in walk.ruled_out
                arm_stage = "pruned" if pruned else stage
            # Posterior precision of the mean cost under the pooled noise model.
            precision = float(n / (cv * mean) ** 2) if mean is not None and mean > 0 and cv > 0 else None
            out.append(ArmState(b, arm_stage, n, None if mean is None else float(mean), precision, pruned))
        return out


def _first_wave(view: HistoryView, default: int, offsets: tuple[int, ...], size: int) -> list[int]:
    """What overlapping recurrences explore while nothing has finished (rule 7): the first `size` of the
    sizes at `offsets` from the default size (in the feasible sizes) that the job has, in that order,
    less those in flight."""
    sizes = view.feasible
    i = sizes.index(default)
    options = [sizes[i + k] for k in offsets if 0 <= i + k < len(sizes)][:size]
    return [b for b in options if not view.in_flight(b)]


def _due_probe(view: HistoryView, walk: WalkState, cv: float) -> tuple[int, float] | None:
    """The size past a turn or a skip to probe now, if one is due (with `resume`; rule 10), and what it is
    stopped past (the cost of its direction's step before it).

    A turn or a skip rests on the first runs of two sizes, whose cost ratio r can be the job's run-to-run
    noise (a 7-epoch run among 4-epoch ones costs 1.75x), and a curve can rise before it falls further (a
    bump, a plateau): ruling the sizes past it out for good can leave a job on a local minimum for all its
    recurrences. The chance that the ratio is noise, that two sizes costing the same show r or more in
    single runs, is `wrong_turn_chance(r, cv)` with cv the job's own pooled noise. A probe pays about one
    run (capped at the step before it); a turn that was wrong costs every recurrence from then on. The
    job's past is the estimate of its future (a recurring job that has run n recurrences is expected to
    run about as many again), so a probe is due once n x that chance reaches one: the recurrences a wrong
    turn would be expected to misdirect add up to the run that finds out. A turn well outside the noise
    (a low chance) is probed late or never; on a noisy job, or a turn read off a small ratio, early.
    Measured (benchmarks/RESULTS.md, issue 25): this replaced probes at doubling intervals, which probed
    every turn alike and cost the measured cells' one-minimum curves about one run per direction.

    The ratio is the step before the sizes past the turn over the cheapest step's first run, or over that
    step's mean once its later runs put the mean above it: a lucky first run of the cheapest step (21 epochs
    among runs of 33-40) makes an ordinary run of the next size look like a turn, and the job's own runs of
    that step later say so. Never below the first run: a first run carries the profiling epoch, as the turning
    step's first run does, so a first run against a first run is like against like (benchmarks/RESULTS.md,
    issue 25, "A turn judged on a lucky first run")."""
    if not walk.lazy or not walk.done or walk.best_cost is None:
        return None
    observed = sum(arm.n for arm in view.tally.arms)
    reference = max(walk.best_cost, view.charged(walk.best_size)[1])  # the cheapest step's runs, its first included
    for b, cap, rises in walk.lazy:  # rises: with compound_rises (rule 12), the rises in a row before cap
        chance = math.prod(wrong_turn_chance(c / reference, cv) for c in (*rises, cap))
        if not view.in_flight(b) and observed * chance >= 1.0:
            return b, cap
    return None


def wrong_turn_chance(ratio: float, cv: float) -> float:
    """The chance that two single runs of sizes that cost the same differ by `ratio` or more, the dearer one
    taken as the turn: each run's cost log-normal with relative noise `cv`, so the log of their ratio is
    normal with standard deviation sqrt(2) x cv (the one-sided tail beyond log(ratio))."""
    if ratio <= 1.0:
        return 0.5
    return NormalDist().cdf(-math.log(ratio) / (math.sqrt(2.0) * cv))


def _runs(view: HistoryView) -> dict[int, tuple[int, float]]:
    """Per observed size: its count of runs, and the mean charged cost of those after its first (NaN when run
    once), what the walk judges a turn or a skip within the noise on (rule 11). A reached first run is
    charged its cost, so the rest is the size's charged total less it."""
    out = {}
    for b in view.feasible:
        n, mean = view.charged(b)
        if n:
            arm = view.tally.arm(b)
            out[b] = (n, (n * mean - arm.first_cost) / (n - 1) if n > 1 and arm.first_reached else math.nan)
    return out


def _cheapest_reached(spec: JobSpec, view: HistoryView, walk: WalkState) -> int | None:
    """The size with the lowest mean charged cost among those that reached the target and are not ruled
    out (rule 9); None while none has. Ties go to the smaller size."""
    reached = [b for b in view.feasible if view.has_reached(b) and b not in walk.ruled_out]
    if not reached:
        return None
    return min(reached, key=lambda b: view.charged(b, spec.window_size)[1])


def _candidates(view: HistoryView, walk: WalkState) -> tuple[int, ...]:
    """The sizes exploitation picks from. Once any size has reached the target: the sizes that have
    reached it (a size that never finished the job is never exploited), including any the walk passed
    over (a trial run ahead of a turn that came back cheap is data, not noise). Before: the walk's
    open sizes, or every feasible size when the walk ruled them all out."""
    reached = tuple(b for b in view.feasible if view.has_reached(b))
    if reached:
        return reached
    return tuple(b for b in view.feasible if b not in walk.ruled_out) or view.feasible
