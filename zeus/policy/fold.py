"""A tally kept between decisions: the fold of the finished prefix of a job's history, plus the rest.

`Tally.add` takes records in trial order, so a tally can only be kept for a *prefix* of the history
that will never change: the trials, in order, up to the first one still in flight. Everything after
that (the in-flight trials, and the finished ones behind them) is the *tail*, kept as records. A
decision folds the tail into a copy of the prefix's tally; that is the same sequence of `Tally.add`
calls a full fold of the history makes (zeus.policy.history.fold_history), so the same decision, to
the last bit.

New events (the store's `trial_events(after=cursor)`) bring new dispatched trials and results of
trials in the tail. `Fold.advance` merges them and moves the prefix forward over the tail's leading
finished trials. A trial number is claimed before its dispatch is written, so with overlapping
recurrences trial n+1 can be dispatched and finished before trial n's dispatch is visible. The prefix
therefore also stops at a skipped number while the tail is short (GAP_WAIT): trial n then arrives in
the tail, in order. A number that stays skipped (its claimer died) is passed over once the tail is
longer. A new trial that still sorts into the prefix cannot be folded in order: `advance` says so
(returns None) and the caller folds the whole history again (about 0.1 s at 10,000 trials; with 8
clients on one job and near-instant trials this happened up to 8 times in 120 cycles before the
prefix waited at gaps). So the kept fold is only a cache: any doubt, and it is rebuilt from the history.

`to_parts` / `from_parts` turn a fold into JSON-able values plus numpy arrays and back, exactly (floats
round-trip through JSON's repr, arrays go as their bytes); the store keeps them as a checksummed side
object (zeus.store.tallies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from zeus.job import JobSpec, TrialRecord, TrialStatus
from zeus.policy.history import HistoryView
from zeus.policy.tally import Tally

SortKey = tuple[int, int, str, int]  # (trial, recurrence, recurrence_id, attempt): the history's order
GAP_WAIT = 64  # the prefix waits at a skipped trial number while at most this many trials are behind it


@dataclass(frozen=True)
class Entry:
    """One trial of the tail: its record, its event name in the store, its sort key, when it was dispatched."""

    name: str
    key: SortKey
    record: TrialRecord
    started_at: int = 0  # microseconds since the epoch (zeus.steps.abandoned ages dispatched trials by it)

    def to_list(self) -> list:
        r = self.record
        return [self.name, list(self.key), r.recurrence, r.trial, r.batch_size, r.status.value, r.cost, r.time_s,
                r.energy_j, self.started_at]  # fmt: skip

    @classmethod
    def from_list(cls, values: list) -> Entry:
        name, key, recurrence, trial, batch, status, cost, time_s, energy, started = values
        record = TrialRecord(recurrence, trial, batch, TrialStatus(status), cost, time_s, energy)
        return cls(name, tuple(key), record, started)  # type: ignore[arg-type]


# A finished trial's result, by event name: (status, cost, time_s, energy_j).
Result = tuple[TrialStatus, float | None, float | None, float | None]


def _finish(entry: Entry, result: Result) -> Entry:
    status, cost, time_s, energy = result
    return replace(entry, record=replace(entry.record, status=status, cost=cost, time_s=time_s, energy_j=energy))


@dataclass
class Fold:
    """The tally of the history's finished prefix (ending at `last_key`) and the tail after it.

    `orphans`: results whose dispatch was not readable when they came (a corrupt or late object); a full
    read would join them once the dispatch is read, so they wait here for it."""

    tally: Tally
    tail: list[Entry]
    last_key: SortKey | None = None
    orphans: dict[str, Result] | None = None

    @classmethod
    def empty(cls, spec: JobSpec) -> Fold:
        return cls(Tally(spec), [], None, {})

    def advance(self, new: Iterable[Entry], results: Mapping[str, Result]) -> Fold | None:
        """This fold with `new` dispatched trials (finished ones carry their result) and `results` of
        trials dispatched before; None when a new trial sorts into the prefix (fold everything again)."""
        orphans = dict(self.orphans or {})
        tail = {entry.name: entry for entry in self.tail}
        for entry in new:
            if self.last_key is not None and entry.key <= self.last_key:
                return None
            waiting = orphans.pop(entry.name, None)
            tail[entry.name] = entry if waiting is None else _finish(entry, waiting)
        for name, result in results.items():
            if name in tail:
                tail[name] = _finish(tail[name], result)
            else:
                orphans[name] = result
        ordered = sorted(tail.values(), key=lambda entry: entry.key)
        done, last_trial = 0, self.last_key[0] if self.last_key is not None else 0
        while done < len(ordered) and ordered[done].record.status is not TrialStatus.DISPATCHED:
            if ordered[done].key[0] > last_trial + 1 and len(ordered) - done <= GAP_WAIT:
                break  # a number skipped: its claimer may not have dispatched it yet (see the module doc)
            last_trial = ordered[done].key[0]
            done += 1
        tally, last_key = self.tally, self.last_key
        if done:
            tally = tally.copy()
            for entry in ordered[:done]:
                tally.add(entry.record)
            last_key = ordered[done - 1].key
        return Fold(tally, ordered[done:], last_key, orphans)

    def view(self) -> HistoryView:
        """The view a policy decides from: the prefix's tally with the tail folded in (a copy)."""
        tally = self.tally
        if self.tail:
            tally = tally.copy()
            for entry in self.tail:
                tally.add(entry.record)
        return HistoryView.of(tally)

    def in_flight(self) -> list[Entry]:
        """The tail's dispatched trials (every in-flight trial of the job is in the tail)."""
        return [entry for entry in self.tail if entry.record.status is TrialStatus.DISPATCHED]

    # -- storing ---------------------------------------------------------------------------------

    def to_parts(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able values, numpy arrays): what `from_parts` rebuilds this fold from, exactly. The arrays
        (a recurrence table has a row per recurrence, thousands) are kept apart so that the store can keep
        them as their bytes (zeus.store.tallies): as JSON numbers or base64 they would cost more to write,
        check and parse than the rest of the fold."""
        meta, arrays = self.tally.to_parts()
        record = {
            "tally": meta,
            "tail": [entry.to_list() for entry in self.tail],
            "last_key": None if self.last_key is None else list(self.last_key),
            "orphans": {name: [r[0].value, *r[1:]] for name, r in (self.orphans or {}).items()},
        }
        return record, {name: np.asarray(values) for name, values in arrays.items()}

    @classmethod
    def from_parts(cls, spec: JobSpec, record: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> Fold:
        """The fold `to_parts` described; ValueError (or KeyError/TypeError) when it does not fit `spec`."""
        tally = Tally.from_parts(spec, record["tally"], dict(arrays))
        tail = [Entry.from_list(values) for values in record["tail"]]
        last_key = None if record["last_key"] is None else tuple(record["last_key"])
        orphans = {name: (TrialStatus(r[0]), *r[1:]) for name, r in record["orphans"].items()}
        return cls(tally, tail, last_key, orphans)  # type: ignore[arg-type]
