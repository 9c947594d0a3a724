"""Which power limit the JIT profiler measures next: the search over a GPU's limits, as a pure function of
the rows measured so far.

Zeus (NSDI'23) measures every limit from the maximum down in 25 W steps (`SWEEP`), 21 windows on a
700 W GPU. That fits Zeus's V100, which most jobs drive into its 250 W maximum, and a first epoch long
enough for all of them. On an H200 neither holds (shared/traces/h200): a ResNet-18 drew 282-330 W under any
limit from 300 to 700 W, so 16 of 21 windows measured the same thing, and trials of 6-20 s ended after
4-16 windows, choosing 625 W where the optimum was 250 W. `DESCEND` spends the windows where the answer is:

1. **The maximum first.** Its window measures the workload's unconstrained draw.
2. **Limits above the draw are the maximum.** A cap above what the GPU draws uncapped changes nothing, so
   every rung above `draw * (1 + DRAW_MARGIN)` needs no window of its own. The margin covers one window's
   reading of the draw falling short of the true one: on the H200 the uncapped draw read 282-330 W from
   window to window around 306 W (+-8 %), so a rung within 10 % above a reading may still bind.
3. **Coarse, then fine.** Zeus's cost per unit of work is close to unimodal in the limit (flat where the
   limit does not bind, falling as power falls faster than throughput, rising once throughput falls
   faster). Below the draw the search steps down two rungs at a time and stops after two rungs in a row
   clearly costlier than the best so far (one window can read far off), or at the lowest limit; then it
   measures the best's unmeasured neighbours, and theirs while the best moves, so the minimum is
   bracketed by measured rungs on both sides.
4. **The pick is confirmed.** The least of several noisy readings is the one the noise flattered most
   (the winner's curse: on the fitted H200 an outlying window at 700 W kept 1 seed in 40 there), so on a
   real meter (`confirm`) the best is measured in a second window before the profile is complete, whichever
   search found it and however many rungs were measured, and the search goes on if that moves it. On the
   H200's curve that is 6 windows (700, 325, 275, 225, 250, 250 W) where a sweep takes 21.

"Best" and "clearly costlier" are the profiler's own selector (zeus_kfp.power.selection), so the search
stops where the pick is decided. Being a function of the rows alone, a profile that a trial left
unfinished is continued by the next trial at that batch size (`next_limit` on the stored rows), and a
profile is complete exactly when `next_limit` has nothing left to measure: nothing to remember between
trials but the rows the store already keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeus_kfp.power.selection import OptimumSelector
from zeus_kfp.profiles import PowerProfile

SWEEP = "sweep"  # Zeus: every limit from the maximum down
DESCEND = "descend"  # the draw first, then coarse-to-fine below it (module docstring)
SEARCHES = (SWEEP, DESCEND)
DRAW_MARGIN = 0.10  # rungs above the uncapped draw * 1.1 are the maximum (module docstring, point 2)
COARSE_RUNGS = 2  # the descent's stride below the draw, in rungs
STOP_AFTER = 2  # coarse rungs in a row clearly costlier than the best end the descent
CONFIRM_WINDOWS = 2  # windows the pick rests on


def per_limit(profile: PowerProfile) -> dict[float, tuple[float, float]]:
    """The valid training rows, pooled per limit: {limit: (mean power, mean throughput)}. A limit measured in
    more than one window (a continued profile) counts as their mean."""
    rows = profile.rows[profile.train_rows()]
    pooled = rows.groupby("power_limit_w", sort=False)[["average_power_w", "throughput"]].mean()
    return {float(limit): (float(r.average_power_w), float(r.throughput)) for limit, r in pooled.iterrows()}


@dataclass(frozen=True)
class LimitSearch:
    """The search over `ladder` (a GPU's limits, from the maximum down; zeus_kfp.power.profile_params)."""

    ladder: tuple[float, ...]
    selector: OptimumSelector
    how: str = DESCEND
    confirm: bool = True  # a real meter's pick rests on CONFIRM_WINDOWS windows (module docstring, point 4)

    def __post_init__(self) -> None:
        if self.how not in SEARCHES:
            raise ValueError(f"invalid search={self.how!r}: allowed {', '.join(SEARCHES)}")
        if not self.ladder:
            raise ValueError("a power-limit search needs at least one limit")

    def next_limit(self, profile: PowerProfile) -> float | None:
        """The limit to measure next, or None: the profile is complete."""
        measured = per_limit(profile)
        unmeasured = [limit for limit in self.ladder if limit not in measured]
        if self.how == SWEEP:
            found = unmeasured[0] if unmeasured else None
        elif self.ladder[0] not in measured:
            found = self.ladder[0]
        else:
            rungs = self.candidates(measured, profile)
            found = self._coarse(rungs, measured, profile) or self._refine(rungs, measured, profile)
        return found or (self._confirm(profile) if self.confirm else None)

    def is_complete(self, profile: PowerProfile) -> bool:
        return self.next_limit(profile) is None

    def candidates(self, measured: dict[float, tuple[float, float]], profile: PowerProfile) -> list[float]:
        """The rungs that may bind, from the highest down: those at or below the draw * (1 + DRAW_MARGIN)
        (the maximum is measured anyway, and stands for every rung above them).

        Where the draw is below every rung (a launch-bound job averages far below what its compute bursts
        draw), the lowest rung alone is checked: if it costs the same as the maximum nothing binds; if it
        costs clearly more or less, the average hid the bursts, and every rung is a candidate."""
        draw_w = measured[self.ladder[0]][0]
        below = [limit for limit in self.ladder[1:] if limit <= draw_w * (1.0 + DRAW_MARGIN)]
        if below or len(self.ladder) == 1:
            return below
        lowest = self.ladder[-1]
        if lowest in measured and self.selector.differ(profile, lowest, self.ladder[0]):
            return list(self.ladder[1:])
        return [lowest]

    def _best(self, measured: dict[float, tuple[float, float]], profile: PowerProfile) -> float:
        return self.selector.choose(profile) if measured else self.ladder[0]

    def _coarse(
        self, rungs: list[float], measured: dict[float, tuple[float, float]], profile: PowerProfile
    ) -> float | None:
        """Down the rungs COARSE_RUNGS at a time until two in a row are clearly costlier than the best so far
        (one window can read far off: a stop on one would end the search on noise)."""
        worse = 0
        for limit in rungs[::COARSE_RUNGS]:
            if limit not in measured:
                return limit
            worse = worse + 1 if self.selector.clearly_worse(profile, limit) else 0
            if worse == STOP_AFTER:
                return None
        return None

    def _confirm(self, profile: PowerProfile) -> float | None:
        """The best once more if it was read in one window only: the least of several noisy readings is
        the one the noise flattered most (the winner's curse), so a pick rests on two windows."""
        if len(self.ladder) == 1:
            return None
        best = self.selector.choose(profile)
        windows = int((profile.rows.loc[profile.train_rows(), "power_limit_w"] == best).sum())
        return best if windows < CONFIRM_WINDOWS else None

    def _refine(
        self, rungs: list[float], measured: dict[float, tuple[float, float]], profile: PowerProfile
    ) -> float | None:
        """The best's unmeasured neighbours among the rungs (the lower first: ties go to the lower power)."""
        best = self._best(measured, profile)
        ladder = [self.ladder[0], *rungs]
        at = int(np.argmin([abs(limit - best) for limit in ladder]))
        for neighbour in (at + 1, at - 1):
            if 0 <= neighbour < len(ladder) and ladder[neighbour] not in measured:
                return ladder[neighbour]
        return None
