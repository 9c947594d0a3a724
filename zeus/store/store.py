"""The store's public face: `open_store(uri)` and the `Store` every step and the CLI use.

A Store holds a backend, the problems its last read found and a memory of facts that never
change once stored (a dispatch, a recurrence number); all state is in the objects
(DESIGN.md, "Stateless steps"), so any number of processes may open the same store.

The protocol (streams.py has the argument, snapshots.py the commits):
- Each trial's event in a stream is one *record*, created exclusively and never deleted, so
  the first write of an attempt decides for good: every caller of that (recurrence, attempt)
  gets what the record holds, whatever compaction does meanwhile. dispatched/finished refuse
  different content (EventConflictError); profiles/bandit keep the first write (a retried
  feedback step succeeds whatever other recurrences did). Every such rule: conflicts.py.
- Reads never race compaction into an error: records are never deleted and a snapshot is
  retired only GRACE_S after its successor is committed; a reader that slow starts over,
  quietly, a bounded number of times, then fails with one StoreError.
- `trials()`/`history()` read one consistent cut: finished first, then dispatched.
- Every object carries a checksum (schemas.py). A corrupt record is skipped and reported by
  key; a committed snapshot that is lost, emptied or corrupt is reported and the stream is
  read from its records instead (exact, slower) until the next compaction rebuilds it.

Reading for an incremental fold (cuts.py): `trial_events(job_id)` returns a consistent cut
of the dispatched and finished events as Arrow tables plus an opaque cursor;
`trial_events(job_id, after=cursor)` returns only the events after it (exactly; `reset` says
when it had to return the whole cut instead), and a new cursor. The policy's fold is kept beside
the events as a cache that names its cursor (`kept_tally` / `keep_tally`, tallies.py).
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from zeus.store import catalog, cuts, events, frames, keys, ledger, tallies
from zeus.store.backend import Backend, LocalBackend, ObjectNotFound
from zeus.store.compaction import CompactResult, compact_stream
from zeus.store.errors import EventConflictError, ObjectProblem, StoreError, StoreInputError, StoreWarning
from zeus.store.streams import StreamRead, read_stream

if TYPE_CHECKING:  # pandas only for the functions that return frames (a cold step imports less)
    import pandas as pd

    from zeus.job import JobSpec, TrialRecord, TrialResult
    from zeus.policy.base import ArmState, Decision

log = logging.getLogger(__name__)

DEFAULT_LOCAL_STORE = "./.zeus-kfp/store"
STORE_ENV = "ZEUS_KFP_STORE"
# Loose records a read may find before it compacts the stream: at least this many, and at least the
# square root of the snapshot's rows. A loose record costs every read a listed name (its record is
# fetched once: a cursor keeps it); a compaction rewrites the whole snapshot. With the compaction's
# cost growing with the rows, waiting for about sqrt(rows) records balances the two, each then about
# sqrt(rows) per record (the figures: benchmarks/RESULTS.md, "Figures behind choices in the code").
AUTO_COMPACT_AFTER = 32
STORE_FORMS = "a directory path, file:///absolute/path, or s3://bucket[/prefix] (S3 settings from ZEUS_S3_* env)"
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class Store:
    """Jobs, trials, profiles and bandit snapshots of zeus-kfp, in a directory or a bucket."""

    def __init__(self, backend: Backend, auto_compact_after: int | None = AUTO_COMPACT_AFTER) -> None:
        self.backend = backend
        # A read that found more loose events than this (or than sqrt of the snapshot's rows) compacts
        # that stream afterwards (best effort), so reads stay fast even if no step ever calls compact().
        # None: never.
        self.auto_compact_after = auto_compact_after
        self.uri = backend.uri
        self.problems: list[ObjectProblem] = []  # objects the last read skipped, key + reason
        # Dispatches and recurrence numbers this Store has seen; both are immutable once stored.
        self._known: events.Known = {}
        self._recurrences: dict[tuple[str, str], int] = {}
        self._looked_up: set[tuple[str, str, int]] = set()  # attempts get_dispatch just found undispatched

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    def _report(self, problems: list[ObjectProblem]) -> None:
        self.problems = problems
        for problem in problems:
            log.warning("store: skipped %s", problem)
            warnings.warn(f"zeus-kfp store skipped {problem}", StoreWarning, stacklevel=3)

    # -- jobs ---------------------------------------------------------------------------------

    def ensure_job(self, spec: JobSpec, owner: str = "") -> JobSpec:
        """Store the spec on first use; afterwards the same spec must come back (JobSpecMismatchError)."""
        problems: list[ObjectProblem] = []
        try:
            return catalog.ensure_job(self.backend, spec, owner, problems)
        finally:
            self._report(problems)

    def get_job(self, job_id: str) -> JobSpec:
        problems: list[ObjectProblem] = []
        try:
            return catalog.get_job(self.backend, job_id, problems)
        finally:
            self._report(problems)

    def list_jobs(self, phase: str | None = None, owner: str | None = None) -> pd.DataFrame:
        """Jobs with their phase and spec fields, filtered like GET /jobs?phase=completed."""
        problems: list[ObjectProblem] = []
        try:
            return catalog.list_jobs(self.backend, phase, owner, problems)
        finally:
            self._report(problems)

    def set_phase(self, job_id: str, phase: str) -> None:
        """Record the job as "running" or "completed" (an event; the latest wins)."""
        catalog.set_phase(self.backend, job_id, phase)

    # -- recurrences and trials ---------------------------------------------------------------

    def begin_recurrence(self, job_id: str, recurrence_id: str) -> int:
        """The recurrence's number (1, 2, ...), unique and ordered; idempotent per recurrence_id."""
        number = ledger.begin_recurrence(
            self.backend, keys.check_job_id(job_id), keys.check_recurrence_id(recurrence_id)
        )
        self._recurrences[(job_id, recurrence_id)] = number
        return number

    def recurrence_number(self, job_id: str, recurrence_id: str) -> int:
        """The number `begin_recurrence` gave `recurrence_id` (UnknownTrialError if it was never begun)."""
        number = self._recurrences.get((job_id, recurrence_id))
        if number is None:
            number = ledger.recurrence_number(
                self.backend, keys.check_job_id(job_id), keys.check_recurrence_id(recurrence_id)
            )
            self._recurrences[(job_id, recurrence_id)] = number
        return number

    def dispatch_trial(
        self,
        job_id: str,
        recurrence_id: str,
        attempt: int,
        decision: Decision,
        kfp_run_id: str = "",
        seen_trial: int = 0,
    ) -> int:
        """Record a dispatched trial; returns its job-wide trial number. Idempotent on
        (recurrence_id, attempt); a different decision for a dispatched trial is an EventConflictError.
        `seen_trial`: the highest trial number in the history the caller read (0: none); the claim of the
        next number then lists only the claims after it."""
        self._check_trial(job_id, recurrence_id, attempt)
        recurrence = self.recurrence_number(job_id, recurrence_id)
        # Right after get_dispatch found none (the bandit step's order), skip looking again: a racer
        # that dispatched meanwhile is still caught, by the exclusive create of the record.
        looked_up = (job_id, recurrence_id, attempt) in self._looked_up
        self._looked_up.discard((job_id, recurrence_id, attempt))
        return events.dispatch(
            self.backend, job_id, recurrence_id, attempt, decision, kfp_run_id, self._known, recurrence, looked_up,
            seen_trial,
        )  # fmt: skip

    def get_dispatch(self, job_id: str, recurrence_id: str, attempt: int) -> tuple[int, Decision] | None:
        """(trial number, decision) if this attempt was dispatched: a retried bandit step reuses it."""
        self._check_trial(job_id, recurrence_id, attempt)
        found = events.find_dispatch(self.backend, job_id, recurrence_id, attempt)
        if found is None:
            self._looked_up.add((job_id, recurrence_id, attempt))
            return None
        self._known[(job_id, recurrence_id, attempt)] = found
        return found.trial, found.decision

    def finish_trial(self, job_id: str, recurrence_id: str, attempt: int, result: TrialResult) -> None:
        """Record a trial's result. The same result twice is a no-op; a different one is refused."""
        self._check_trial(job_id, recurrence_id, attempt)
        events.finish(self.backend, job_id, recurrence_id, attempt, result, self._known)

    def write_profile(self, job_id: str, recurrence_id: str, attempt: int, profile: pd.DataFrame) -> None:
        """Store a trial's power profile (phase, power_limit_w, average_power_w, throughput, simulated).
        The first profile of a trial is kept: a retried step's later one is not written (side table)."""
        self._check_trial(job_id, recurrence_id, attempt)
        events.write_profile(self.backend, job_id, recurrence_id, attempt, profile, self._known)

    def write_bandit_state(
        self, job_id: str, recurrence_id: str, attempt: int, arms: list[ArmState], lowest_cost: float | None
    ) -> None:
        """Store the policy's per-arm view after a feedback, for people and tools (never read back as truth).
        The first snapshot of a trial is kept: a retry, whose view may include other recurrences'
        trials finished meanwhile, succeeds and leaves it (side table; a corrupt old one never blocks it)."""
        self._check_trial(job_id, recurrence_id, attempt)
        events.write_bandit_state(self.backend, job_id, recurrence_id, attempt, list(arms), lowest_cost, self._known)

    def put_handoff(self, job_id: str, recurrence_id: str, attempt: int, run: str, name: str, data: bytes) -> None:
        """Store a file a cluster trial hands over (keys.HANDOFF_FILES). The same bytes again are a no-op (a
        retried upload); different bytes are refused: one job run has one result."""
        key = keys.handoff_key(job_id, recurrence_id, attempt, run, name)
        if not self.backend.put_new(key, data) and self.backend.get(key) != data:
            raise EventConflictError(key, "a different file is already stored for this job run")

    def get_handoff(self, job_id: str, recurrence_id: str, attempt: int, run: str, name: str) -> bytes | None:
        """A handed-over file, or None while nobody has written it."""
        try:
            return self.backend.get(keys.handoff_key(job_id, recurrence_id, attempt, run, name))
        except ObjectNotFound:
            return None

    def tensorboard_logs(
        self, job_id: str, add: Mapping[str, bytes] | None = None, read: bool = True
    ) -> dict[str, bytes]:
        """The job's TensorBoard event files (name -> bytes), after storing those in `add` (name -> bytes).

        One function for the TensorBoard log objects (keys.tensorboard_dir): the report step adds one
        event file per recurrence, `zeus-kfp tensorboard` reads them all. Each is created once (first
        wins, like the events): a retried report step finds its file there and changes nothing.
        """
        for name, data in (add or {}).items():
            self.backend.put_new(keys.tensorboard_key(job_id, name), bytes(data))
        if not read:
            return {}
        found = self.backend.get_many(self.backend.list(keys.tensorboard_dir(job_id)))
        return {keys.basename(key): data for key, data in found.items() if isinstance(data, bytes)}

    @staticmethod
    def _check_trial(job_id: str, recurrence_id: str, attempt: int) -> None:
        keys.check_job_id(job_id)
        keys.check_recurrence_id(recurrence_id)
        keys.check_attempt(attempt)

    # -- reading ------------------------------------------------------------------------------

    def _cut(self, job_id: str, after: str | None) -> cuts.TrialEvents:
        keys.check_job_id(job_id)
        found = cuts.read_trial_events(self.backend, job_id, after)
        for stream, read in found.reads.items():
            self._maybe_compact(job_id, stream, read, full=after is None or found.reset)
        return found

    def trial_events(self, job_id: str, after: str | None = None) -> cuts.TrialEvents:
        """A consistent cut of the job's dispatched and finished events, with a cursor; with
        `after`, only the events after that cursor (see cuts.py). Problems are reported as by trials()."""
        found = self._cut(job_id, after)
        self._report(found.problems)
        return found

    def trials(self, job_id: str) -> pd.DataFrame:
        """Every trial of the job, dispatched-but-unfinished ones included (status "dispatched")."""
        found = self._cut(job_id, None)
        problems = list(found.problems)
        try:
            return frames.trials_frame(job_id, found.reads["dispatched"], found.reads["finished"], problems)
        finally:
            self._report(problems)

    def history(self, job_id: str) -> list[TrialRecord]:
        """The job's trials as policies take them, in trial order (built from Arrow, no DataFrame)."""
        found = self.trial_events(job_id)
        return frames.history_from_tables(found.dispatched, found.finished)

    def kept_tally(self, job_id: str) -> tallies.StoredTally | None:
        """The newest kept fold of the job's history (zeus.store.tallies), or None; a corrupt one is
        reported like any skipped object and read as None (it is only a cache)."""
        problems: list[ObjectProblem] = []
        try:
            return tallies.read_tally(self.backend, keys.check_job_id(job_id), problems)
        finally:
            self._report(problems)

    def keep_tally(self, job_id: str, covers: int, cursor: str, version: int, fold: dict, arrays: dict) -> str:
        """Store a fold of the job's history over `covers` trials at `cursor` (a cache): its JSON-able
        values and its numpy arrays (tallies.write_tally). Returns its key."""
        return tallies.write_tally(self.backend, keys.check_job_id(job_id), covers, cursor, version, fold, arrays)

    def profiles(self, job_id: str) -> pd.DataFrame:
        keys.check_job_id(job_id)
        read = self._read(job_id, "profiles")
        self._report(read.problems)
        return frames.profiles_frame(read)

    def bandit_state(self, job_id: str, latest_only: bool = True) -> pd.DataFrame:
        """The latest bandit snapshot (one row per arm); every snapshot with latest_only=False."""
        keys.check_job_id(job_id)
        read = self._read(job_id, "bandit")
        self._report(read.problems)
        return frames.bandit_frame(read, latest_only)

    def _read(self, job_id: str, stream: str) -> StreamRead:
        read = read_stream(self.backend, job_id, stream)
        self._maybe_compact(job_id, stream, read)
        return read

    def _maybe_compact(self, job_id: str, stream: str, read: StreamRead, full: bool = True) -> None:
        """Compact after a read that fetched many loose records (or had to rebuild), reusing that read
        when it was a full one; a reader that finds another compactor ahead of it leaves it be."""
        if self.auto_compact_after is None:
            return
        threshold = max(self.auto_compact_after, math.isqrt(read.position.rows))
        if not (read.rebuilt or len(read.position.loose) > threshold):
            return
        try:
            compact_stream(self.backend, job_id, stream, repair=read.rebuilt, read=read if full else None)
        except (StoreError, OSError) as exc:  # a reader without write access still reads
            log.warning("store: could not compact %s of %s after reading: %s", stream, job_id, exc)

    def compact(self, job_id: str) -> None:
        """Merge the job's events into snapshots so reads stay fast. Safe while others append."""
        results = self.compact_streams(job_id)
        log.info("store: compacted %s: %s", job_id, results)

    def compact_streams(self, job_id: str) -> list[CompactResult]:
        """`compact`, returning what it did per stream (for the CLI and benchmarks)."""
        keys.check_job_id(job_id)
        results = [compact_stream(self.backend, job_id, stream) for stream in keys.STREAMS]
        self._report([problem for result in results for problem in result.problems])
        return results


def _local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StoreInputError("store", uri, STORE_FORMS + "; file URIs name no host")
        return Path(unquote(parsed.path))
    return Path(uri).expanduser()


_S3_BACKENDS: dict[tuple, Backend] = {}


def _s3_backend(bucket: str, prefix: str, settings: object) -> Backend:
    """One S3Backend per bucket, prefix and settings in a process: stores opened again (the bandit and
    feedback steps each open one) reuse its connections and its bucket check. It holds no data."""
    from zeus.store.s3 import S3Backend

    key = (bucket, prefix, settings)
    if key not in _S3_BACKENDS:
        _S3_BACKENDS[key] = S3Backend(bucket, prefix, settings)  # type: ignore[arg-type]
    return _S3_BACKENDS[key]


def open_store(uri: str | None = None) -> Store:
    """A Store for `uri`: a directory, file:///abs/path, or s3://bucket/prefix.

    None means $ZEUS_KFP_STORE, else ./.zeus-kfp/store. `store.uri` is the resolved form
    (absolute for a directory) to hand to pipeline steps.
    """
    if uri is None:
        uri = os.environ.get(STORE_ENV) or DEFAULT_LOCAL_STORE
    if not isinstance(uri, str) or not uri.strip():
        raise StoreInputError("store", uri, STORE_FORMS)
    uri = uri.strip()
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not BUCKET_PATTERN.fullmatch(bucket):
            raise StoreInputError("store", uri, STORE_FORMS + "; bucket names are 3-63 of a-z, 0-9, '.', '-'")
        if any(part in {".", ".."} for part in prefix.split("/")):
            raise StoreInputError("store", uri, STORE_FORMS + "; no '.' or '..' in the prefix")
        from zeus.store.s3 import S3Settings  # minio only when a step really talks to S3 (its import is slow)

        return Store(_s3_backend(bucket, prefix, S3Settings.from_env()))
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", uri) and not uri.startswith("file://"):
        raise StoreInputError("store", uri, STORE_FORMS)
    return Store(LocalBackend(_local_path(uri)))
