# A frozen copy of zeus/policy/walk.py as it stood on 2026-12-03 (commit e4ec5d2), the walk of
# frozen/turning_walk_2026_12_03.py. Not imported by zeus_kfp; unchanged.
"""The `default` policy's exploration: one pass from the default size, down then up, that stops where
the cost turns.

Zeus's walk (zeus_kfp.policy.pruning) goes down from the default size until a size misses the target,
then up until one misses. It never stops because a size *costs more*, so it pays for every size on
the far side of the minimum until one fails outright. Zeus assumes the cost is convex in the batch
size (the NSDI'23 traces bear that out, up to noise and the odd bump); on a curve with one minimum,
a size that costs clearly more than the cheapest so far says the curve has turned. This walk uses
that:

- a direction ends at a miss (as in Zeus), except the default size's own: it is the starting point,
  not a step in a direction, and one run of it missing (a noisy epoch count, a tight max_epochs) says
  nothing about its neighbours, so the walk goes on down from it (Zeus's walk, `default_miss_ends`,
  would end the down direction there and, when the first size up misses too, the whole walk); or at
  a size that reached but cost more than `hard_turn` x the cheapest step before it; or more than
  (1 + `turn_margin`) x that, unless the step before it was the cheapest so far. Right after the
  minimum a single worse trial may be noise (a 7-epoch run among 4-epoch ones costs 1.75x) or a bump
  (squad: 24 costs more than both 32 and 16), so the next step decides; further on, it is the curve;
- the up direction is skipped when the down direction found a size cheaper than the default size by
  more than `skip_margin`: with one minimum, it lies below the default size;
- with `confirm` (the relative noise of one run, off when None): a turn or a skip whose first runs are
  within the noise of each other waits for a second run of the two sizes it compares, and is then judged
  on their runs after the first (`_Replay._judged`).

A reached step is never cut short to decide this: stopping a trial that would reach costs its spend
plus the retry, more than letting it finish unless it would cost beta x the best anyway, which the
job's early stop (beta) already caps.

Walk steps are compared with first trials only: a size's first trial also pays for profiling the
power limits, so the comparison is like for like. Everything is a function of each size's first
finished observation: a size's first result, once, per size.

The two directions are two walkers from the default size; run one after the other they are the
sequential walk above. Every size's first finished observation is its walk step, wherever it came from,
so a result that finishes out of order or a trial dispatched ahead is used when its walker gets there,
never rerun.

When recurrences overlap, the walk's next size is often in flight. `look_past` replays the walk with the
in-flight sizes as pending steps that change nothing (as if each came back neither turning the walk nor
becoming the cheapest), and says which size each walker would need next, if any: only a size right after
an observed step (or the first of its direction), never one right behind a pending step. Observed steps
past a pending one say where the curve goes; a size chosen past a pending step with nothing observed
after it is a guess about the curve, and where the curve is steep a wrong guess costs a whole run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


class Observation(NamedTuple):
    """A size's first finished observation: its walk step. `stopped`: the early stop cut it short
    (cost_exceeded), which rule 12 reads as a rise near its cap, where a miss (max_epochs ran out) ends the
    direction. A plain (cost, reached) pair is a run that was not stopped."""

    cost: float
    reached: bool
    stopped: bool = False


# (count, mean cost of those after the first) of a size's finished observations, a miss charged the retry
# it forced; the mean is NaN for a size run once.
Runs = tuple[int, float]

# With `confirm`: a turn or a skip is taken on one run of each side only when the cost ratio behind it
# lies more than CONFIRM_Z standard deviations of the log ratio of two single runs above 1 (that sd is
# sqrt(2) x the relative noise of one run). 2 is the conventional two-sigma line: two sizes that cost the
# same show a ratio that far out about once in 44 comparisons (one-sided), so a walk of a handful of
# steps is rarely sent to a confirmation it did not need, and a ratio inside it is one the noise makes
# often. Not chosen on the traces.
CONFIRM_Z = 2.0


@dataclass(frozen=True)
class WalkStep:
    """One size's walk result: its first finished observation."""

    batch_size: int
    cost: float
    reached: bool


@dataclass(frozen=True)
class WalkState:
    """Where the walk stands.

    `expected` is the size the sequential walk needs next (None once it is over). `survivors` are the
    sizes whose walk step reached; `ruled_out` the sizes the walk will never try (a miss, past the end
    of a direction, a skipped direction); `best_size`/`best_cost` the cheapest walk step.
    """

    expected: int | None
    survivors: tuple[int, ...]
    ruled_out: frozenset[int]
    steps: tuple[WalkStep, ...]
    best_size: int | None
    best_cost: float | None
    # With `resume`: the size past each turn or skip that a probe would try next (down first) with the cost
    # of the direction's step before it (a probe costing more is a rise: it can stop there) and, with
    # `compound_rises`, the caps of the rises in a row before that step (each probe past them compounds their
    # chance of being noise); and how many probes have been taken.
    lazy: tuple[tuple[int, float, tuple[float, ...]], ...] = ()
    probes: int = 0

    @property
    def done(self) -> bool:
        return self.expected is None


@dataclass(frozen=True)
class Lookahead:
    """What each walker would need next if the in-flight (pending) sizes changed nothing (`look_past`).

    `down`/`up`: that size, or None when the walker has ended or waits behind a pending step that is not
    right before it. `down_open`: the down walker has not ended (it may be waiting). `up_needed`: the
    observed steps show the up direction will be walked (the default size reached, and a step below it
    came back without beating it by skip_margin, or there is nothing below it)."""

    down: int | None
    up: int | None
    down_open: bool
    up_needed: bool


@dataclass
class _Walker:
    """One direction's progress."""

    frontier: int | None = None  # the next size it needs; None once it has ended
    waiting: bool = False  # it has not ended, but its next size lies behind a pending step


def replay_walk(
    sizes: tuple[int, ...],
    default: int,
    first: Mapping[int, Observation],
    *,
    turn_margin: float | None = 0.2,
    hard_turn: float | None = 1.5,
    skip_margin: float | None = 0.05,
    resume: bool = False,
    default_miss_ends: bool = False,
    confirm: float | None = None,
    runs: Mapping[int, Runs] | None = None,
    compound_rises: bool = False,
) -> WalkState:
    """Replay the walk over `sizes` (the feasible sizes, ascending) from `default`, given each size's
    first finished observation `first[b]` (an `Observation`, or a (cost, reached) pair). A None margin
    turns its rule off (benchmarks measure the walk without it). `resume`: a turn or a skip rules the
    sizes past it out only until a probe (see `_Replay._past`). `confirm`: the relative noise of one run
    (a coefficient of variation); a turn or a skip within it waits for a second run of the size it rests
    on, then is judged on `runs` (each size's count of runs and mean cost after its first; see
    `_Replay._judged`).
    `compound_rises` (rule 12): a probe that rises does not end its direction (see `_Replay._past`)."""
    replay = _Replay(sizes, default, first, turn_margin, hard_turn, skip_margin, resume=resume, compound=compound_rises)
    replay.default_miss_ends = default_miss_ends
    replay.set_confirm(confirm, runs)
    return replay.run()


def look_past(
    sizes: tuple[int, ...],
    default: int,
    first: Mapping[int, Observation],
    pending: frozenset[int],
    *,
    turn_margin: float | None = 0.2,
    hard_turn: float | None = 1.5,
    skip_margin: float | None = 0.05,
    resume: bool = False,
    default_miss_ends: bool = False,
    confirm: float | None = None,
    runs: Mapping[int, Runs] | None = None,
    compound_rises: bool = False,
) -> Lookahead:
    """The walk replayed as `replay_walk` does, with the `pending` sizes (in flight, no result yet) passed
    over as if they changed nothing: which size each walker would need next. A walker whose turn waits
    for a confirmation in flight waits."""
    replay = _Replay(sizes, default, first, turn_margin, hard_turn, skip_margin, pending, resume, compound_rises)
    replay.default_miss_ends = default_miss_ends
    replay.set_confirm(confirm, runs)
    down, needed, up = replay.walkers()
    return Lookahead(
        down=None if down.waiting else down.frontier,
        up=None if up.waiting else up.frontier,
        down_open=down.frontier is not None,
        up_needed=needed,
    )


class _Replay:
    def __init__(
        self,
        sizes: tuple[int, ...],
        default: int,
        first: Mapping[int, Observation],
        turn_margin: float | None,
        hard_turn: float | None,
        skip_margin: float | None,
        pending: frozenset[int] = frozenset(),
        resume: bool = False,
        compound: bool = False,
    ) -> None:
        idx = sizes.index(default)
        self.down, self.up = list(reversed(sizes[: idx + 1])), list(sizes[idx + 1 :])
        self.default = default
        self.first = {b: Observation(*o) for b, o in first.items()}
        self.turn = math.inf if turn_margin is None else 1.0 + turn_margin
        self.hard_turn = math.inf if hard_turn is None else hard_turn
        self.skip_margin = skip_margin
        self.pending = pending
        self.resume = resume
        self.compound = compound  # with resume: a rise leaves the next probe to a compounded chance (_past)
        self.default_miss_ends = False  # the default size's miss ends the down direction (Zeus's walk does)
        self.lazy: list[tuple[int, float, tuple[float, ...]]] = []  # with resume: see WalkState.lazy
        self.probes = 0  # with resume: steps taken past a turn or a skip
        self.steps: list[WalkStep] = []
        self.closed: set[int] = set()  # misses, the rest of an ended direction, a skipped direction
        self.cheapest = math.inf  # the cheapest step so far, in walk order: what the next one is compared with
        self.cheapest_size: int | None = None  # the size of that step
        self.band = 0.0  # with confirm: a first-run cost ratio below this is within the noise (set_confirm)
        self.runs: Mapping[int, Runs] = {}
        self.again: int | None = None  # the size a skip within the noise needs run again (_below_default)

    def set_confirm(self, cv: float | None, runs: Mapping[int, Runs] | None) -> None:
        """Turn confirmation on with `cv`, the relative noise of one run, and each size's runs (`runs`: count,
        and mean cost after the first). Off (None): every turn and skip is taken on first runs."""
        self.band = 0.0 if cv is None else math.exp(CONFIRM_Z * math.sqrt(2.0) * cv)
        self.runs = runs or {}

    def _judged(self, b: int, reference: int, ratio: float) -> tuple[int | None, float] | None:
        """How a turn or a skip that rests on size `b`'s first run against `reference`'s (`ratio`: the first
        runs' cost ratio that makes it, above 1) is judged. None: on the first runs (the ratio is outside the
        noise, or confirmation is off). Else (the size to run again, or None once both sizes have run
        twice; the ratio of b's mean cost after its first run to reference's): it stands while that is
        above 1.

        Why: a turn or a skip rules sizes out for good, and it is read off single first runs, whose epochs
        to target spread 0.7-1.4x their mean in the traces (more on a generated job): a 1.6x first-run
        difference on a 1.03x true one. A second run of `b` (the turning step; for a skip, the default
        size) costs about the gap between the two sizes, a fraction of a recurrence; one of `reference`
        (the cheapest step so far) about nothing. Both are run again because a first run also profiles
        the power limits (a tenth of a run on a job of a few epochs): like is compared with like, runs
        after the first, which take in every later run too (a size exploited since adds to its mean), so
        a turn the first runs got wrong is undone once the runs say so."""
        if ratio >= self.band:
            return None
        (nb, mb), (nr, mr) = self.runs.get(b, (1, math.nan)), self.runs.get(reference, (1, math.nan))
        if nb < 2 or nr < 2:
            return (b if nb < 2 else reference), math.nan
        return None, mb / mr

    def _walk(self, plan: list[int], skipped: bool) -> _Walker:
        """Replay one direction over `plan`; a `skipped` direction ends at its frontier. Pending sizes are
        passed over; a frontier behind one is marked `waiting`."""
        walker = _Walker()
        if skipped and self.resume:
            return self._past(plan, walker, self.first[self.default].cost)
        after_best, behind_pending = True, False
        for k, b in enumerate(plan):
            if b not in self.first:
                if skipped:
                    self.closed.update(plan[k:])
                    return walker
                if b in self.pending:
                    behind_pending = True
                    continue
                walker.frontier, walker.waiting = b, behind_pending
                return walker
            behind_pending = False
            cost, reached, _ = self.first[b]
            self.steps.append(WalkStep(b, cost, reached))
            if not reached:
                if b == self.default and not self.default_miss_ends:
                    continue  # the starting point, not a step away from it: go on down (module docstring)
                self.closed.update(plan[k:])
                return walker
            reference, ref_size = self.cheapest, self.cheapest_size
            turned = self._turns(cost, reference, after_best)
            judged = self._judged(b, ref_size, cost / reference) if turned and ref_size is not None else None
            if judged is not None:  # within the noise: judged on the runs after the first
                again, later = judged
                if again is not None:  # a second run of b or of its reference first
                    walker.frontier, walker.waiting = again, again in self.pending
                    return walker
                turned = later > 1.0  # b keeps its first run's cost: later steps are compared with first runs
            if cost < self.cheapest:
                self.cheapest, self.cheapest_size = cost, b
            if turned:
                if not self.resume:
                    self.closed.update(plan[k + 1 :])
                    return walker
                return self._past(plan[k + 1 :], walker, cost)
            after_best = cost <= reference
        return walker

    def _turns(self, cost: float, reference: float, after_best: bool) -> bool:
        """Clearly worse; or worse, and past the minimum already (a worse step right after the cheapest one
        may be noise or a bump at the minimum: the next step decides)."""
        return cost > self.hard_turn * reference or (cost > self.turn * reference and not after_best)

    def _past(self, rest: list[int], walker: _Walker, last: float) -> _Walker:
        """With `resume`: the sizes past a turn or a skip (`rest`, in walk order; `last` the cost of the
        direction's step before them) are ruled out only until probed, one at a time (the policy says
        when; each observed one is a step). A probe cheaper than every step so far resumes the walk from
        it: the turn was noise or a bump. A probe that misses ends the direction for good, as any miss
        does; so does one that costs at least the step before it: two rises in a row are the curve
        rising, not noise. Otherwise the next size is the one to probe.

        With `compound` (rule 12), a rise is evidence, not a verdict:
        a probe that reached at a cost of at least `last`, or was stopped (its cost at least the cap it was
        stopped near, `last`), passes the probe on to the next size, whose chance of being worth it is the
        product of every rise's in a row (the policy's rule 10): a curve can rise over two sizes before it falls
        further (a bump), and two independent rises are both noise only as often as the product says. Only a
        miss (max_epochs ran out) still ends the direction."""
        rises: tuple[float, ...] = ()  # the caps of the rises in a row before `last`
        for j, b in enumerate(rest):
            if b not in self.first:
                if b not in self.pending:
                    self.lazy.append((b, last, rises))
                self.closed.update(rest[j:])
                return walker
            cost, reached, stopped = self.first[b]
            self.probes += 1
            if reached and cost < self.cheapest:
                return self._walk(rest[j:], skipped=False)
            self.steps.append(WalkStep(b, cost, reached))
            if self.compound and (cost >= last if reached else stopped):  # a rise (rule 12)
                rises, last = (*rises, last), max(cost, last)
                continue
            if not reached or cost >= last:
                self.closed.update(rest[j + (1 if reached else 0) :])
                return walker
            rises, last = (), cost
        return walker

    def _below_default(self) -> bool | None:
        """A down step beat the default size by more than skip_margin: the minimum lies below it. None while
        that is within the noise and a second run of the default size or of that step is not in (it is
        then `self.again`, and the skip is judged on their runs after the first: `_judged`)."""
        self.again = None
        if self.skip_margin is None:
            return False
        costs = {s.batch_size: s.cost for s in self.steps if s.reached}
        below = [b for b in costs if b < self.default]
        if self.default not in costs or not below:
            return False
        best = min(below, key=lambda b: costs[b])
        if not costs[best] < (1.0 - self.skip_margin) * costs[self.default]:
            return False
        judged = self._judged(self.default, best, costs[self.default] / costs[best])
        if judged is None:
            return True
        self.again = judged[0]
        return None if self.again is not None else judged[1] > 1.0

    def _up_needed(self) -> bool:
        """The down direction has shown the up direction will be walked: the default size reached and a
        step below it came back without beating it by skip_margin (or there is nothing below)."""
        default_reached = any(s.batch_size == self.default and s.reached for s in self.steps)
        if self._below_default() is not False or not default_reached:
            return False
        return len(self.down) == 1 or any(s.batch_size < self.default for s in self.steps)

    def walkers(self) -> tuple[_Walker, bool, _Walker]:
        """(the down walker, whether the up direction is needed, the up walker). While a skip waits for its
        confirmation the up walker needs the size to run again (once the down walker has ended)."""
        down = self._walk(self.down, skipped=False)
        needed = self._up_needed()
        skip = self._below_default()
        if skip is None:
            if down.frontier is not None:  # the down walker goes on: the skip may not be the last word yet
                return down, False, _Walker(waiting=True)
            return down, False, _Walker(self.again, self.again in self.pending)
        return down, needed, self._walk(self.up, skipped=skip)

    def run(self) -> WalkState:
        down, _, up = self.walkers()
        return self._state(down.frontier if down.frontier is not None else up.frontier)

    def _state(self, expected: int | None) -> WalkState:
        reached = [s for s in self.steps if s.reached]
        best = min(reached, key=lambda s: (s.cost, s.batch_size)) if reached else None
        return WalkState(
            expected=expected,
            survivors=tuple(sorted(s.batch_size for s in reached)),
            ruled_out=frozenset(self.closed),
            steps=tuple(self.steps),
            best_size=best.batch_size if best else None,
            best_cost=best.cost if best else None,
            lazy=tuple(self.lazy),
            probes=self.probes,
        )
