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
each, held as numpy arrays (cheap to store, load and search) plus the ones this fold has touched as
small Python objects; `arrays()` merges the two.
"""

from __future__ import annotations

import math

import numpy as np

# Column names of the two tables `arrays()` returns (and `Recurrences(base)` takes back).
REC_COLUMNS = ("rec_id", "rec_spend", "rec_reached", "rec_last_trial", "rec_p_last")
MISS_COLUMNS = ("miss_rec", "miss_size", "miss_settled", "miss_pending", "miss_pending_p")
_DTYPES = {
    "rec_id": np.int64, "rec_spend": np.float64, "rec_reached": np.bool_, "rec_last_trial": np.int64,
    "rec_p_last": np.float64, "miss_rec": np.int64, "miss_size": np.int64, "miss_settled": np.int64,
    "miss_pending": np.int64, "miss_pending_p": np.float64,
}  # fmt: skip

# What folding one trial changed in its sizes' charges: size -> (known charges added, pending misses added).
Settled = dict[int, tuple[float, int]]


class _Rec:
    """One recurrence: spend so far, its last reach (trial, spend then), per size [settled, pending, sum P_i]."""

    __slots__ = ("last_trial", "misses", "p_last", "reached", "spend")

    def __init__(self, spend: float = 0.0, reached: bool = False, last_trial: int = 0, p_last: float = 0.0) -> None:
        self.spend, self.reached, self.last_trial, self.p_last = spend, reached, last_trial, p_last
        self.misses: dict[int, list] = {}

    def copy(self) -> _Rec:
        twin = _Rec(self.spend, self.reached, self.last_trial, self.p_last)
        twin.misses = {b: list(m) for b, m in self.misses.items()}
        return twin


def empty_arrays() -> dict[str, np.ndarray]:
    return {name: np.zeros(0, dtype) for name, dtype in _DTYPES.items()}


class Recurrences:
    """Every recurrence's spend and miss charges. `base`: arrays from `arrays()` (sorted by recurrence)."""

    def __init__(self, base: dict[str, np.ndarray] | None = None) -> None:
        self._base = base if base is not None else empty_arrays()
        self._touched: dict[int, _Rec] = {}

    def copy(self) -> Recurrences:
        """An independent copy (the arrays are shared: they are never written)."""
        twin = Recurrences(self._base)
        twin._touched = {r: rec.copy() for r, rec in self._touched.items()}
        return twin

    def _find(self, recurrence: int) -> _Rec | None:
        rec = self._touched.get(recurrence)
        if rec is not None:
            return rec
        ids = self._base["rec_id"]
        if not ids.size:  # folding from nothing: no stored recurrences to search
            return None
        i = int(ids.searchsorted(recurrence))
        if i == ids.size or int(ids[i]) != recurrence:
            return None
        base = self._base
        rec = _Rec(float(base["rec_spend"][i]), bool(base["rec_reached"][i]), int(base["rec_last_trial"][i]),
                   float(base["rec_p_last"][i]))  # fmt: skip
        lo, hi = np.searchsorted(base["miss_rec"], [recurrence, recurrence + 1])
        for j in range(int(lo), int(hi)):
            rec.misses[int(base["miss_size"][j])] = [
                int(base["miss_settled"][j]),
                int(base["miss_pending"][j]),
                float(base["miss_pending_p"][j]),
            ]
        return rec

    def _get(self, recurrence: int) -> _Rec:
        rec = self._find(recurrence)
        if rec is None:
            rec = _Rec()
        self._touched[recurrence] = rec
        return rec

    def add(
        self, recurrence: int, trial: int, spend: float, miss_size: int | None, reached: bool
    ) -> tuple[float, Settled]:
        """Fold one finished trial (in trial order): its spend, a miss at `miss_size` (an observation that did
        not reach), or a reach. Returns P_i (the recurrence's spend through this trial) and what changed in
        each size's charges."""
        rec = self._get(recurrence)
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
        rec = self._find(recurrence)
        if rec is None or not rec.reached or not trial < rec.last_trial:
            return None
        return rec.p_last - p_i

    def best_spend(self) -> float | None:
        """The lowest spend of a recurrence that reached the target."""
        base = self._base
        keep = base["rec_reached"]
        if self._touched and base["rec_id"].size:
            keep = keep & ~np.isin(base["rec_id"], np.fromiter(self._touched, np.int64, len(self._touched)))
        spends = base["rec_spend"][keep]
        best = float(spends.min()) if spends.size else math.inf
        for rec in self._touched.values():
            if rec.reached and rec.spend < best:
                best = rec.spend
        return None if best == math.inf else best

    def arrays(self) -> dict[str, np.ndarray]:
        """Every recurrence as the two sorted tables (what `Recurrences(base)` takes back)."""
        if not self._touched:
            return self._base
        base = self._base
        old = ~np.isin(base["rec_id"], np.fromiter(self._touched, np.int64, len(self._touched)))
        ids = sorted(self._touched)
        recs = [self._touched[r] for r in ids]
        new = {
            "rec_id": ids, "rec_spend": [r.spend for r in recs], "rec_reached": [r.reached for r in recs],
            "rec_last_trial": [r.last_trial for r in recs], "rec_p_last": [r.p_last for r in recs],
        }  # fmt: skip
        out = {name: np.concatenate([base[name][old], np.asarray(new[name], _DTYPES[name])]) for name in REC_COLUMNS}
        order = np.argsort(out["rec_id"], kind="stable")
        out = {name: column[order] for name, column in out.items()}
        kept = ~np.isin(base["miss_rec"], np.asarray(ids, np.int64))
        rows = [(r, b, *m) for r in ids for b, m in sorted(self._touched[r].misses.items())]
        columns = list(zip(*rows, strict=True)) if rows else [[]] * len(MISS_COLUMNS)
        for name, values in zip(MISS_COLUMNS, columns, strict=True):
            out[name] = np.concatenate([base[name][kept], np.asarray(values, _DTYPES[name])])
        order = np.lexsort((out["miss_size"], out["miss_rec"]))
        out.update({name: out[name][order] for name in MISS_COLUMNS})
        return out
