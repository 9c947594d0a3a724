"""Per recurrence: what it spent and what its misses are charged, folded trial by trial.

Two things the policies need are facts about a whole recurrence, not about one trial:
- the early-stop threshold is beta x the lowest *spend* of a recurrence that reached the target;
- a miss is charged the retries it forced: the spend of the later trials of its recurrence up to
  the last one that reached (`retry_charges` in zeus.policy.history says why). While no later trial
  of its recurrence has reached, the charge is not known yet, and the policy puts in a stand-in
  (the cheapest mean reached cost, which itself changes as results come in).

Both fold. With P the recurrence's cumulative finished spend (in trial order), a miss folded when P
was P_i is charged P_last - P_i once a trial that reached is folded at P_last, and nothing known before.
So per recurrence this keeps P, the P and trial number of its last reach, and per batch size its
misses: how many are settled (before the last reach) and, for those after it (pending), how many and
the sum of their P_i. When a reach is folded, the pending misses settle (each size's known charges
grow by n x P_last - sum P_i) and the settled ones move to the new last reach (by n x (P_last' - P_last):
a second reach in one recurrence is not something the pipeline does, but the charge is defined for
any history, so it is kept exact).

Recurrences can receive trials at any time (overlapping runs), so all of them are kept: a few numbers
each, by recurrence number.
"""

from __future__ import annotations

import math

# What folding one trial changed in its sizes' charges: size -> (known charges added, pending misses added).
Settled = dict[int, tuple[float, int]]


class _Rec:
    """One recurrence: spend so far, its last reach (trial, spend then), per size [settled, pending, sum P_i]."""

    __slots__ = ("last_trial", "misses", "p_last", "reached", "spend")

    def __init__(self) -> None:
        self.spend, self.reached, self.last_trial, self.p_last = 0.0, False, 0, 0.0
        self.misses: dict[int, list] = {}


class Recurrences:
    """Every recurrence's spend and miss charges, by recurrence number."""

    def __init__(self) -> None:
        self._recs: dict[int, _Rec] = {}

    def add(
        self, recurrence: int, trial: int, spend: float, miss_size: int | None, reached: bool
    ) -> tuple[float, Settled]:
        """Fold one finished trial (in trial order): its spend, a miss at `miss_size` (an observation that did
        not reach), or a reach. Returns P_i (the recurrence's spend through this trial) and what changed in
        each size's charges."""
        rec = self._recs.get(recurrence)
        if rec is None:
            rec = self._recs[recurrence] = _Rec()
        rec.spend += spend
        p = rec.spend
        changed: Settled = {}
        if miss_size is not None:
            entry = rec.misses.setdefault(miss_size, [0, 0, 0.0])
            entry[1] += 1
            entry[2] += p
            changed[miss_size] = (0.0, 1)
        if reached:
            for b, entry in rec.misses.items():
                settled, pending, pending_p = entry
                known = (settled * (p - rec.p_last) if rec.reached else 0.0) + (pending * p - pending_p)
                changed[b] = (known, -pending)
                entry[0], entry[1], entry[2] = settled + pending, 0, 0.0
            rec.reached, rec.last_trial, rec.p_last = True, trial, p
        return p, changed

    def known_charge(self, recurrence: int, trial: int, p_i: float) -> float | None:
        """A miss's charge (what its recurrence spent after it, up to its last reach), or None while it is
        not known: no trial of its recurrence after it has reached."""
        rec = self._recs.get(recurrence)
        if rec is None or not rec.reached or not trial < rec.last_trial:
            return None
        return rec.p_last - p_i

    def best_spend(self) -> float | None:
        """The lowest spend of a recurrence that reached the target."""
        best = math.inf  # a spend that overflowed to inf counts as none, as a NaN does (strict <)
        for rec in self._recs.values():
            if rec.reached and rec.spend < best:
                best = rec.spend
        return None if best == math.inf else best
