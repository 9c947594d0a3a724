"""What the bandit and feedback steps read of a job's history: the kept fold, brought up to date.

A decision needs the policy's fold of the whole history (zeus.policy.tally), and the history only
grows, so it is kept in the store (zeus.store.tallies) naming the store cursor it covers: a step
reads it, reads only the events after its cursor (`Store.trial_events(after=...)`), folds them in
(zeus.policy.fold) and decides, in time that grows with the new events, not with the history.

The kept fold is a cache. A missing one, one written by another tally version or under other spec
fields, a corrupt one (reported by key), a cursor the store cannot extend (`reset`), or new trials
that sort into its folded prefix: each falls back to a full fold of the history, which makes the
same decision (the same `Tally.add` calls in the same order). Storing the new fold is best effort:
after the decision is recorded, and a failure to write it is logged, never raised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pandas as pd

from zeus.job import JobSpec, TrialStatus
from zeus.policy.fold import Entry, Fold
from zeus.policy.history import HistoryView
from zeus.policy.tally import TALLY_VERSION
from zeus.store import Store
from zeus.store.errors import StoreInputError
from zeus.store.frames import fold_events

log = logging.getLogger(__name__)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The bandit step keeps the fold only after folding this many new events (or everything): the feedback
# step that follows keeps it anyway, and a write in the decision's path costs it a PUT.
BANDIT_KEEP_AFTER = 32
IN_FLIGHT_COLUMNS = ["status", "recurrence_id", "attempt", "recurrence", "trial", "batch_size", "started_at"]


@dataclass
class JobHistory:
    """A job's fold at `cursor`. `full`: folded from the whole history; `events`: how many new events
    were folded into the kept one (0: nothing to keep)."""

    fold: Fold
    cursor: str
    full: bool
    events: int

    def view(self) -> HistoryView:
        return self.fold.view()

    @property
    def max_trial(self) -> int:
        """The highest trial number folded (a claimed number: the next claim looks only after it)."""
        return max([self.fold.tally.max_trial or 0, *(entry.record.trial for entry in self.fold.tail)])

    @property
    def covers(self) -> int:
        return self.fold.tally.num_records + len(self.fold.tail)


def _advance(fold: Fold, store: Store, job_id: str, cursor: str | None) -> tuple[Fold | None, str, int]:
    """(fold with the events after `cursor`, or None when they cannot extend it; new cursor; how many)."""
    found = store.trial_events(job_id, after=cursor)
    if found.reset:
        return None, found.cursor, 0
    new, results = fold_events(found.dispatched, found.finished)
    return fold.advance([Entry(*values) for values in new], results), found.cursor, len(new) + len(results)


def _kept(store: Store, spec: JobSpec, job_id: str) -> tuple[Fold, str] | None:
    stored = store.kept_tally(job_id)
    if stored is None or stored.version != TALLY_VERSION:
        return None
    try:
        return Fold.from_parts(spec, stored.fold, stored.arrays), stored.cursor
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        log.info("zeus-kfp: kept fold %s not used (%s): folding the whole history", stored.key, exc)
        return None


def read_job_history(store: Store, spec: JobSpec, job_id: str) -> JobHistory:
    """The job's fold now: the kept one plus the events after it, else a full fold of the history."""
    kept = _kept(store, spec, job_id)
    if kept is not None:
        try:
            fold, cursor, count = _advance(kept[0], store, job_id, kept[1])
        except StoreInputError:  # a cursor this store does not read (another job's, another version)
            fold, cursor, count = None, "", 0
        if fold is not None:
            return JobHistory(fold, cursor, full=False, events=count)
    fold, cursor, count = _advance(Fold.empty(spec), store, job_id, None)
    assert fold is not None  # an empty fold takes any history
    return JobHistory(fold, cursor, full=True, events=count)


def update(history: JobHistory, store: Store, job_id: str) -> JobHistory:
    """`history` with the events since it was read (a step that recorded trials meanwhile)."""
    fold, cursor, count = _advance(history.fold, store, job_id, history.cursor)
    if fold is None:
        return read_job_history(store, history.fold.tally.spec, job_id)
    return JobHistory(fold, cursor, history.full, history.events + count)


def in_flight(history: JobHistory, dispatched_by: datetime | None = None) -> pd.DataFrame | None:
    """The job's dispatched, unfinished trials, as zeus.steps.abandoned.fail_stale reads them (the
    fold's tail holds every one: no need to read the whole trials table); only those dispatched at or
    before `dispatched_by`, if given. None when there is none: most decisions have none old enough,
    and building an empty frame alone costs about 0.3 ms."""
    latest = None if dispatched_by is None else (dispatched_by - EPOCH) // timedelta(microseconds=1)  # exact
    rows = [
        {"status": TrialStatus.DISPATCHED.value, "recurrence_id": e.key[2], "attempt": e.key[3],
         "recurrence": e.record.recurrence, "trial": e.record.trial, "batch_size": e.record.batch_size,
         "started_at": e.started_at}
        for e in history.fold.in_flight()
        if latest is None or e.started_at <= latest
    ]  # fmt: skip
    if not rows:
        return None
    frame = pd.DataFrame(rows, columns=IN_FLIGHT_COLUMNS)
    frame["started_at"] = pd.to_datetime(frame["started_at"].astype("int64"), unit="us", utc=True)
    return frame


def keep(history: JobHistory, store: Store, job_id: str, min_events: int = 1) -> None:
    """Store the fold for the next step if it was folded from the whole history or took `min_events` new
    events; best effort (a cache: a failure is only logged, never raised)."""
    if not (history.full or history.events >= min_events):
        return
    try:
        store.keep_tally(job_id, history.covers, history.cursor, TALLY_VERSION, *history.fold.to_parts())
    except Exception as exc:  # never fail a step over a cache
        log.warning("zeus-kfp: could not keep the policy's fold of %s: %s", job_id, exc)
