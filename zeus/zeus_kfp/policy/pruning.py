"""Zeus's pruning exploration, replayed from observations instead of driven by a generator.

Each round starts at the round's default size, walks down through smaller sizes, then up
through larger ones; a size that misses the target ends its direction. The sizes that
reached the target survive into the next round, whose default is the cheapest one of them.
Zeus keeps this as a live generator fed by callbacks; a stateless policy instead rebuilds the
same walk from the observation list on every call, accepting an observation only when its size
is the one the walk is waiting for (Zeus's `expecting` check, which is what keeps results of
concurrent runs at other sizes from derailing the walk).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ExplorationStep:
    """One accepted exploration result: which round, which size, whether it reached, what it cost."""

    round: int
    batch_size: int
    reached: bool
    cost: float


@dataclass(frozen=True)
class PruningState:
    """Where the walk stands. `expected` is the size to explore next; None once pruning is over."""

    expected: int | None
    round: int
    survivors: tuple[int, ...]  # current round's candidates; the final set once done
    steps: tuple[ExplorationStep, ...]
    best_size: int  # cheapest reached size of the current round (the round default before any)
    # The trial number of the last observation the walk took: it has waited for `expected` since then,
    # so only a trial dispatched after it can be that size's exploration. None: none taken (or unnumbered).
    waiting_since: int | None = None

    @property
    def done(self) -> bool:
        return self.expected is None


class PruningWalk:
    """The exploration order as explicit state, so it can be replayed step by step, or fed one
    observation at a time (zeus_kfp.policy.tally)."""

    def __init__(self, sizes: tuple[int, ...], default: int, num_rounds: int) -> None:
        self.num_rounds = num_rounds
        self.round = 0
        self.steps: list[ExplorationStep] = []
        self.waiting_since: int | None = None
        self.previous: tuple[int, ...] = sizes
        self._start(sizes, default)
        if num_rounds == 0:
            self.expected = None

    def _start(self, sizes: tuple[int, ...], default: int) -> None:
        idx = sizes.index(default)
        self.sizes = sizes
        self.directions = (list(reversed(sizes[: idx + 1])), list(sizes[idx + 1 :]))
        self.direction, self.position = 0, 0
        self.good: list[int] = []
        self.best_cost, self.best_size = math.inf, default
        self._settle()

    def _settle(self) -> None:
        """Skip finished directions; end the round (and maybe pruning) when both are done."""
        while self.direction < 2 and self.position >= len(self.directions[self.direction]):
            self.direction, self.position = self.direction + 1, 0
        if self.direction < 2:
            self.expected: int | None = self.directions[self.direction][self.position]
            return
        survivors = tuple(sorted(self.good))
        self.round += 1
        if not survivors:
            # Nothing reached this round: keep the previous candidates rather than crash (Zeus raises here).
            self.sizes, self.expected = self.previous, None
            return
        self.previous = survivors
        if self.round >= self.num_rounds:
            self.sizes, self.expected = survivors, None
            return
        self._start(survivors, self.best_size)

    def offer(self, batch_size: int, cost: float, reached: bool) -> None:
        """One observation, in trial order: used only if it is the size the walk waits for."""
        if self.expected is not None and batch_size == self.expected:
            self.report(batch_size, cost, reached)

    def pruning_state(self) -> PruningState:
        return PruningState(
            expected=self.expected,
            round=self.round,
            survivors=self.sizes,
            steps=tuple(self.steps),
            best_size=self.best_size,
            waiting_since=self.waiting_since,
        )

    def report(self, batch_size: int, cost: float, reached: bool, trial: int | None = None) -> None:
        """Take the observation of the size the walk waits for; `trial` is its trial number, when known."""
        self.waiting_since = trial
        self.steps.append(ExplorationStep(self.round, batch_size, reached, cost))
        if reached:
            self.good.append(batch_size)
            if cost < self.best_cost:
                self.best_cost, self.best_size = cost, batch_size
            self.position += 1
        else:
            self.direction, self.position = self.direction + 1, 0
        self._settle()


def replay_pruning(
    sizes: tuple[int, ...],
    default: int,
    num_rounds: int,
    observations: Iterable[tuple[int, float, bool]],
) -> PruningState:
    """Replay pruning over (batch_size, cost, reached) observations in trial order.

    `sizes` are the feasible candidates (sorted); `default` must be one of them.
    """
    walk = PruningWalk(tuple(sizes), default, num_rounds)
    for batch_size, cost, reached in observations:
        if walk.expected is None:
            break
        walk.offer(batch_size, cost, reached)
    return walk.pruning_state()


def feasible_default(feasible: tuple[int, ...], default: int) -> int:
    """The default size, or the largest feasible size below it when an oom ruled it out."""
    below = [b for b in feasible if b <= default]
    return below[-1] if below else feasible[0]
