"""Per recurrence: what it spent and what its misses are charged, over the history's columns.

Two things the policies need are facts about a whole recurrence, not about one trial:
- the early-stop threshold is beta x the lowest *spend* of a recurrence that reached the target;
- a miss is charged the retries it forced: the spend of the later trials of its recurrence up to
  the last one that reached (`retry_charges` in zeus_kfp.policy.history says why). While no later trial
  of its recurrence has reached, the charge is not known yet, and the policy puts in a stand-in
  (the retry stand-in, Tally.cheapest_reached_mean, which itself changes as results come in).

With P_i a recurrence's running spend through its i-th finished trial (in trial order), a miss at
P_i is charged P_last - P_i, P_last being the running spend at the recurrence's last reach after it.
Running spends are summed in trial order, the same additions in the same order as a running total
kept trial by trial, so a charge is the same to the last bit however the history is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def running_spend(groups: np.ndarray, spend: np.ndarray) -> np.ndarray:
    """Per record (records in trial order, `groups` their recurrence's index): its recurrence's spend
    through it. One vector step per rank within a recurrence (a recurrence has a few trials), so each
    sum is (((0 + s1) + s2) + ...), in order, as a running total would be."""
    n = len(groups)
    order = np.argsort(groups, kind="stable")
    s = spend[order]
    g = groups[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = g[1:] != g[:-1]
    rank = np.arange(n) - np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    running = np.where(starts, s + 0.0, 0.0)
    by_rank = np.argsort(rank, kind="stable")
    counts = np.bincount(rank) if n else np.zeros(1, dtype=np.int64)
    at = int(counts[0])
    for count in counts[1:]:
        rows = by_rank[at : at + count]
        running[rows] = running[rows - 1] + s[rows]
        at += int(count)
    out = np.empty(n)
    out[order] = running
    return out


@dataclass(frozen=True)
class Charges:
    """What the recurrences say about a history's finished records."""

    charge: np.ndarray  # per record: a miss's retry charge, NaN where not known (or not a miss)
    best_spend: float | None  # the lowest spend of a recurrence that reached the target


def charges(recurrence: np.ndarray, spend: np.ndarray, reached: np.ndarray, miss: np.ndarray) -> Charges:
    """The charges of the misses among finished records (in trial order) and the best recurrence spend."""
    numbers, groups = np.unique(recurrence, return_inverse=True)
    groups = groups.reshape(-1)
    position = np.arange(len(groups))
    running = running_spend(groups, spend)
    last = np.full(len(numbers), -1)
    np.maximum.at(last, groups[reached], position[reached])
    reach_of = last[groups]  # each record's recurrence's last reach (-1: none)
    settled = miss & (reach_of > position)
    charge = np.full(len(groups), math.nan)
    charge[settled] = running[reach_of[settled]] - running[settled]
    totals = np.bincount(groups, weights=spend, minlength=len(numbers))  # in order: a running total's bits
    ok = (last >= 0) & (totals < math.inf)  # a spend that overflowed to inf, or a NaN, counts as none
    return Charges(charge, float(totals[ok].min()) if ok.any() else None)
