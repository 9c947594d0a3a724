"""The walk of `turning-walk`: one pass from the default size, down then up, that stops where the cost turns,
with probes past a turn. The model and the rules: docs/DESIGN.md, "Policy" (Walk, Probes).

Everything is a function of each size's first finished observation (its step, wherever it came from), so a
result that comes back out of order is used when its walker gets there, never rerun. `look_past` replays the
walk with the in-flight sizes as pending steps that change nothing, for what a concurrent recurrence may run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class Margins(Protocol):
    """What the walk reads of the policy's configuration (zeus_kfp.policy.turning_walk.Config says why each)."""

    hard_turn: float
    soft_turn: float
    skip_margin: float


class Observation(NamedTuple):
    """A size's first finished observation: its step. `stopped`: the early stop cut it short (a rise near its
    cap), where a miss that was not stopped (max_epochs ran out) ends a direction."""

    cost: float
    reached: bool
    stopped: bool = False


@dataclass(frozen=True)
class Probe:
    """The size past a turn that a probe would try next, the cost of its direction's step before it (a probe
    costing more rises, and is stopped there), and the costs of the rises in a row before that step."""

    batch_size: int
    cap: float
    rises: tuple[float, ...]


@dataclass(frozen=True)
class WalkState:
    """Where the walk stands. `expected`: the size the walk needs next (None once it is over); `ruled_out`:
    sizes it will not try (a miss, past a turn until probed, a skipped direction); `best_size`/`best_cost`: its
    cheapest reached step; `probes`: the sizes past a turn that are due a probe once it is worth it."""

    expected: int | None
    ruled_out: frozenset[int]
    best_size: int | None
    best_cost: float | None
    probes: tuple[Probe, ...]
    probed: int  # steps taken past a turn so far

    @property
    def done(self) -> bool:
        return self.expected is None


@dataclass(frozen=True)
class Lookahead:
    """What each walker would need next if the pending sizes changed nothing (`look_past`): None when it has
    ended or waits behind a pending step. `down_open`: the down walker has not ended. `up_needed`: the steps
    already show the up direction will be walked."""

    down: int | None
    up: int | None
    down_open: bool
    up_needed: bool


@dataclass
class _Walker:
    frontier: int | None = None  # the next size it needs; None once it has ended
    waiting: bool = False  # it has not ended, but its next size lies behind a pending step


def replay_walk(sizes: tuple[int, ...], default: int, first: Mapping[int, Observation], config: Margins) -> WalkState:
    """The walk over `sizes` (the feasible sizes, ascending) from `default`, given each size's first finished
    observation (an `Observation`, or a (cost, reached) pair)."""
    replay = _Replay(sizes, default, first, config, frozenset())
    down, _, up = replay.walkers()
    reached = [(cost, b) for b, cost in replay.steps.items() if replay.first[b].reached]
    best_cost, best_size = min(reached) if reached else (None, None)
    return WalkState(
        expected=down.frontier if down.frontier is not None else up.frontier,
        ruled_out=frozenset(replay.closed),
        best_size=best_size,
        best_cost=best_cost,
        probes=tuple(replay.probes),
        probed=replay.probed,
    )


def look_past(
    sizes: tuple[int, ...], default: int, first: Mapping[int, Observation], pending: frozenset[int], config: Margins
) -> Lookahead:
    """The walk replayed with the `pending` sizes (in flight) passed over as if they changed nothing: the size
    each walker would need next. Only a size right after an observed step (or the first of its direction):
    one chosen past a pending step with nothing observed beyond it is a guess about the curve."""
    down, needed, up = _Replay(sizes, default, first, config, pending).walkers()
    return Lookahead(
        down=None if down.waiting else down.frontier,
        up=None if up.waiting else up.frontier,
        down_open=down.frontier is not None,
        up_needed=needed,
    )


class _Replay:
    """One replay of the walk: the down walker, then the up walker, over the first observations."""

    def __init__(
        self,
        sizes: tuple[int, ...],
        default: int,
        first: Mapping[int, Observation],
        config: Margins,
        pending: frozenset[int],
    ) -> None:
        idx = sizes.index(default)
        self.down, self.up = list(reversed(sizes[: idx + 1])), list(sizes[idx + 1 :])
        self.default, self.config, self.pending = default, config, pending
        self.first = {b: Observation(*o) for b, o in first.items()}
        self.steps: dict[int, float] = {}  # size -> its step's cost, in walk order
        self.closed: set[int] = set()
        self.cheapest = math.inf  # the cheapest reached step so far, in walk order
        self.probes: list[Probe] = []
        self.probed = 0

    def walkers(self) -> tuple[_Walker, bool, _Walker]:
        """(the down walker, whether the up direction is needed, the up walker)."""
        down = self._walk(self.down)
        default = self.first.get(self.default)
        needed = default is not None and default.reached and not self._below_default()
        needed = needed and (len(self.down) == 1 or any(b < self.default for b in self.steps))
        if self._below_default():  # the minimum lies below the default size: up only by probes
            return down, needed, self._past(self.up, _Walker(), self.first[self.default].cost)
        return down, needed, self._walk(self.up)

    def _walk(self, plan: list[int]) -> _Walker:
        """One direction over `plan`: it ends at a miss (but the default size's own, the starting point) or a
        turn, whose sizes past it are left to probes. Pending sizes are passed over; a frontier behind one
        waits."""
        walker = _Walker()
        after_best, behind_pending = True, False
        for k, b in enumerate(plan):
            if b not in self.first:
                if b in self.pending:
                    behind_pending = True
                    continue
                walker.frontier, walker.waiting = b, behind_pending
                return walker
            behind_pending = False
            cost, reached, _ = self.first[b]
            self.steps[b] = cost
            if not reached:
                if b == self.default:
                    continue
                self.closed.update(plan[k:])
                return walker
            reference = self.cheapest
            self.cheapest = min(cost, self.cheapest)
            if self._turns(cost, reference, after_best):
                return self._past(plan[k + 1 :], walker, cost)
            after_best = cost <= reference
        return walker

    def _turns(self, cost: float, reference: float, after_best: bool) -> bool:
        """Clearly worse than the cheapest step; or worse, and past the minimum already (right after the
        cheapest step one worse run may be noise or a bump: the next step decides)."""
        hard, soft = self.config.hard_turn, self.config.soft_turn
        return cost > hard * reference or (cost > soft * reference and not after_best)

    def _past(self, rest: list[int], walker: _Walker, last: float) -> _Walker:
        """The sizes past a turn or a skip (`rest`, in walk order; `last`: the cost of the step before them),
        ruled out until probed one at a time (the policy says when). A probe cheaper than every step resumes
        the walk; one that rises (reached at `last` or more, or stopped near that cap) passes the probe on to
        the next size, its chance compounded; a miss that was not stopped ends the direction."""
        rises: tuple[float, ...] = ()
        for j, b in enumerate(rest):
            if b not in self.first:
                if b not in self.pending:
                    self.probes.append(Probe(b, last, rises))
                self.closed.update(rest[j:])
                return walker
            cost, reached, stopped = self.first[b]
            self.probed += 1
            if reached and cost < self.cheapest:
                return self._walk(rest[j:])
            self.steps[b] = cost
            if cost >= last if reached else stopped:
                rises, last = (*rises, last), max(cost, last)
            elif not reached:
                self.closed.update(rest[j:])
                return walker
            else:
                rises, last = (), cost
        return walker

    def _below_default(self) -> bool:
        """A reached step below the default size beat it by more than the skip margin."""
        default = self.first.get(self.default)
        if default is None or not default.reached:
            return False
        below = [cost for b, cost in self.steps.items() if b < self.default and self.first[b].reached]
        return bool(below) and min(below) < (1.0 - self.config.skip_margin) * default.cost
