"""The store's public face: `open_store(uri)` and the `Store` every step and the CLI use.

A Store holds a backend, the decided log prefixes it has read (facts: decided slots never change), the agreed
specs and the problems its last read found. All state is in the objects (docs/STORE.md), so any number of
processes may open the same store.

Each write appends one entry to the job's log (log.py) and then reads the log up to its own slot,
so what it tells its caller is what every reader reads from then on:
- `dispatch_trial` returns the dispatch as recorded: a twin step of the same attempt that recorded
  first is handed the same decision, never an error.
- `finish_trial`: the first result of a trial stands; the same result again is a no-op, a different
  one is refused with EventConflictError. Results and profiles are checked where they enter (one line
  naming the field), and every entry against its kind's field table before it is proposed (fields.py), so
  nothing malformed is ever stored. The text a trial or its script hands in (a reason, a failure message) is
  made storable (text.py: escaped or cut, saying so) rather than refused: its measured figures are stored.
- `write_profile`: the first profile of a trial stands; a retried step's later one changes nothing.
Reads derive everything from the log every time (frames.py): there is no kept state to go stale.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes, urlparse

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from zeus_kfp.job import Decision, JobSpec, JobSpecError, TrialResult, check_result_for
from zeus_kfp.profiles import PowerProfile, check_profile
from zeus_kfp.store import catalog, entries, frames, keys, log, strays
from zeus_kfp.store.backend import Backend, LocalBackend, ObjectNotFound, get_many
from zeus_kfp.store.compaction import CompactResult, compact
from zeus_kfp.store.errors import (
    CorruptObjectError,
    EventConflictError,
    ObjectProblem,
    StoreError,
    StoreInputError,
    StoreWarning,
    UnknownJobError,
    UnknownTrialError,
)
from zeus_kfp.store.recurrences import Recurrences
from zeus_kfp.store.specs import Specs
from zeus_kfp.store.text import storable
from zeus_kfp.trial_history import TrialHistory

logger = logging.getLogger(__name__)

DEFAULT_LOCAL_STORE = "./.zeus-kfp/store"
STORE_ENV = "ZEUS_KFP_STORE"
STORE_FORMS = "a directory path, file:///absolute/path, or s3://bucket[/prefix] (S3 settings from ZEUS_S3_* env)"
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class Store(Recurrences, Specs):
    """Jobs, trials and power profiles of zeus-kfp, in a directory or a bucket."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.uri = backend.uri
        self.problems: list[ObjectProblem] = []  # objects the last read skipped or repaired, key + reason
        # The decided prefix of each job's log this Store has read. Decided slots never change (log.py),
        # so a later read only lists and fetches the slots after it: a fact, not a cache that can go stale.
        self._prefixes: dict[str, log.LogRead] = {}
        self._first: dict[str, JobSpec] = {}  # each job's first spec (specs.py has the spec in force)
        self._parsed: dict[str, JobSpec] = {}
        # each job's settled view, and of which prefix (the read and how far it went)
        self._views: dict[str, tuple[log.LogRead, int, frames.Settled]] = {}

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    def _report(self, problems: list[ObjectProblem]) -> None:
        self.problems = list(problems)
        for problem in problems:
            logger.warning("store: %s", problem)
            warnings.warn(f"zeus-kfp store: {problem}", StoreWarning, stacklevel=3)

    # -- jobs ---------------------------------------------------------------------------------

    def list_jobs(self, phase: str | None = None, owner: str | None = None, in_force: bool = False) -> pd.DataFrame:
        """Jobs with their phase and spec fields, filtered like GET /jobs?phase=completed: their first spec's, or
        (`in_force`, which reads each job's log) the spec a run replaced it with (specs.py)."""
        problems: list[ObjectProblem] = []
        try:
            frame = catalog.list_jobs(self.backend, phase, owner, problems)
        finally:
            self._report(problems)
        if in_force:
            for i, job_id in enumerate(frame["job_id"]):
                try:
                    spec = self.get_job(job_id).to_dict()
                except (StoreError, UnknownJobError):  # a newer format, a job deleted meanwhile: as listed
                    continue
                for name in frame.columns.intersection(list(spec)).drop("job_id", errors="ignore"):
                    frame.at[i, name] = spec[name]
        return frame

    def delete_job(self, job_id: str) -> int:
        """Remove every object of the job (a junk job: its log, snapshots, phases, TensorBoard logs, hand-offs,
        its spec last, so a delete cut short leaves a listed job to delete again); returns how many objects.
        Reads nothing the job holds, so a job whose spec or log is damaged can always be deleted. UnknownJobError
        for a job the store has no object of; DeleteRefusedError where the server refuses deletes.

        The order keeps readers at work meanwhile from writing into it (docs/STORE.md, "Deleting a job"): the
        log from its last slot back, each slot's blocks before its value, so a listing shows a prefix of the log,
        never a hole to close; then the spec. Once the spec is gone the job is listed again, and what a reader
        or compactor wrote meanwhile is removed too (a write after that is its writer's to undo: strays.py)."""
        names = self.backend.list(keys.job_dir(job_id))
        if not names:
            raise UnknownJobError(f"no job {job_id!r} in {self.backend.location}")
        removed = 0
        for _ in range(DELETE_PASSES):
            for key in _deletion_order(job_id, names):
                self.backend.delete(key)
            removed += len(names)
            names = self.backend.list(keys.job_dir(job_id))
            if not names or strays.incarnation(self.backend, job_id) is not None:
                break  # all gone, or the id made again meanwhile: what is there now is the new job's
        if isinstance(self.backend, LocalBackend):  # folders are not objects: left empty, they would still list
            self.backend.remove_empty_dirs(keys.job_dir(job_id))
        for cache in (self._first, self._prefixes, self._views):
            cache.pop(job_id, None)
        return removed

    def set_phase(self, job_id: str, phase: str) -> None:
        """Record the job as "running" or "completed" (an event; the latest wins)."""
        catalog.set_phase(self.backend, keys.check_job_id(job_id), phase)

    # -- the log ------------------------------------------------------------------------------

    def _read(self, job_id: str, base: log.LogRead | None = None, until: int | None = None) -> log.LogRead:
        base = base or self._prefixes.get(keys.check_job_id(job_id))
        found = log.read(self.backend, job_id, base, until)
        if base is not None and found is not base:  # the job was deleted and made again: its spec may differ too
            self._first.pop(job_id, None)
        self._prefixes[job_id] = found
        self._report(found.problems)
        return found

    def _settled(self, read: log.LogRead) -> frames.Settled:
        """The settled view of `read`; the same prefix is settled once (a bandit step asks five times)."""
        of, upto, settled = self._views.get(read.job_id, (None, -1, None))
        if of is read and upto == read.upto and settled is not None:  # (a read anew of a job made again: another)
            self._report(read.problems)
            return settled
        problems = list(read.problems)
        try:
            first: str | None = self.first_spec_text(read.job_id)
        except CorruptObjectError as exc:  # its spec record gone or unreadable: the log still reads (and deletes)
            problems.append(ObjectProblem(exc.key, exc.reason))
            first = None  # the first spec a begin presents stands for it (gating.gate_outcomes)
        settled = frames.settle(read.job_id, read.table(), problems, first)
        self._views[read.job_id] = (read, read.upto, settled)
        self._report(problems)
        return settled

    def _append(self, read: log.LogRead, entry: dict[str, Any]) -> frames.Settled:
        """Append `entry`, then settle the log up to its slot: what the caller is told."""
        slot = log.append(self.backend, read, entry)
        return self._settled(self._read(read.job_id, read, until=slot))

    @staticmethod
    def _dispatch(settled: frames.Settled, recurrence_id: str, attempt: int) -> dict[str, Any] | None:
        table = settled.dispatched
        # numpy, not pc.indices_nonzero: pyarrow 15-25 segfault on a column with no chunks (a job's first
        # attempt, nothing dispatched yet): test_store_api.py, run with pyarrow 15 by make test-envs
        found = np.flatnonzero(_is_trial(table, recurrence_id, attempt).to_numpy(zero_copy_only=False))
        if not len(found):
            return None
        i = int(found[0])  # settled: at most one dispatch per trial
        return {name: table.column(name)[i].as_py() for name in table.column_names} | {"_row": i}

    @staticmethod
    def _decision(row: dict[str, Any]) -> tuple[int, Decision]:
        decision = Decision(row["batch_size"], row["cost_threshold"], row["stage"], row["decision_reason"])
        return row["trial"], decision

    def get_dispatch(self, job_id: str, recurrence_id: str, attempt: int) -> tuple[int, Decision] | None:
        """(trial number, decision) if this attempt was dispatched: a retried bandit step reuses it."""
        _check_trial(job_id, recurrence_id, attempt)
        row = self._dispatch(self._settled(self._read(job_id)), recurrence_id, attempt)
        return None if row is None else self._decision(row)

    def dispatch_trial(
        self, job_id: str, recurrence_id: str, attempt: int, decision: Decision, kfp_run_id: str = ""
    ) -> tuple[int, Decision]:
        """Record the attempt as dispatched with `decision`; returns (trial number, the decision as
        recorded): a twin step's, if it recorded this attempt first. Hand out what this returns."""
        _check_trial(job_id, recurrence_id, attempt)
        if not isinstance(decision, Decision):
            raise StoreInputError("decision", type(decision).__name__, "a zeus_kfp.job.Decision")
        read = self._read(job_id)
        settled = self._settled(read)
        if settled.recurrence(recurrence_id) is None:
            raise UnknownTrialError(f"recurrence {recurrence_id!r} of job {job_id!r} was never begun")
        row = self._dispatch(settled, recurrence_id, attempt)
        if row is None and settled.epoch_of(recurrence_id) != settled.epoch:
            raise UnknownTrialError(
                f"recurrence {recurrence_id!r} of job {job_id!r} opened under a spec a later run replaced (`zeus-kfp "
                "show` says which): its trials are left out of the job's history, so no trial of it is dispatched"
            )
        if row is None:
            entry = {"kind": "dispatched", "recurrence_id": recurrence_id, "attempt": attempt, "at": entries.now_us(),
                     "batch_size": decision.batch_size, "cost_threshold": decision.cost_threshold,
                     "stage": decision.stage, "decision_reason": _storable(decision.reason),
                     "kfp_run_id": kfp_run_id}  # fmt: skip
            row = self._dispatch(self._append(read, entry), recurrence_id, attempt)
            assert row is not None  # ours, or a twin's before it
        return self._decision(row)

    def _require_dispatch(
        self, job_id: str, recurrence_id: str, attempt: int
    ) -> tuple[log.LogRead, frames.Settled, dict]:
        _check_trial(job_id, recurrence_id, attempt)
        read = self._read(job_id)
        settled = self._settled(read)
        row = self._dispatch(settled, recurrence_id, attempt)
        if row is None:
            raise UnknownTrialError(
                f"trial {recurrence_id!r} attempt {attempt} of job {job_id!r} was never dispatched: "
                "call dispatch_trial first"
            )
        return read, settled, row

    def finish_trial(self, job_id: str, recurrence_id: str, attempt: int, result: TrialResult) -> None:
        """Record a trial's result. The same result twice is a no-op; a different one is refused."""
        if not isinstance(result, TrialResult):
            raise StoreInputError("result", type(result).__name__, "a zeus_kfp.job.TrialResult")
        # priced as its recurrence's spec prices it (the spec in force, unless a run replaced it since)
        check_result_for(self.spec_of(self._settled(self._read(job_id)), recurrence_id), result)
        result = replace(result, reason=storable(result.reason), source=storable(result.source))
        read, settled, row = self._require_dispatch(job_id, recurrence_id, attempt)
        if result.batch_size != row["batch_size"]:
            raise StoreInputError(
                "batch_size", result.batch_size, f"{row['batch_size']}, the batch size trial {row['trial']} ran with"
            )
        given = {name: getattr(result, name) for name in entries.RESULT_FIELDS} | {"status": result.status.value}
        stored = _result_at(settled, row["_row"])
        if stored is None:
            entry = {"kind": "finished", "recurrence_id": recurrence_id, "attempt": attempt, "at": entries.now_us()}
            stored = _result_at(self._append(read, entry | given), row["_row"])
        if _as_written_now(stored) != given:  # (a result an older zeus-kfp stored may hold longer text)
            where = keys.log_dir(job_id) + f" ({recurrence_id} attempt {attempt})"
            raise EventConflictError(where, f"another result is stored: {entries.differences(stored, given)}")

    def write_profile(self, job_id: str, recurrence_id: str, attempt: int, profile: PowerProfile) -> None:
        """Store a trial's power profile (phase, power_limit_w, average_power_w, throughput, simulated).
        The first profile of a trial is kept: a retried step's later one is not written. The store numbers
        it: it is read back with its batch size, recurrence and trial (`profiles`, ProfileBook)."""
        if not isinstance(profile, PowerProfile):
            raise JobSpecError("profile", type(profile).__name__, "a zeus_kfp.profiles.PowerProfile")
        clean = check_profile(profile.rows)
        read, settled, _row = self._require_dispatch(job_id, recurrence_id, attempt)
        trials = settled.profiles.filter(_is_trial(settled.profiles, recurrence_id, attempt))
        if trials.num_rows == 0:
            entry = {"kind": "profile", "recurrence_id": recurrence_id, "attempt": attempt, "at": entries.now_us(),
                     "rows": clean.to_dict("records")}  # fmt: skip
            log.append(self.backend, read, entry)

    # -- reading ------------------------------------------------------------------------------

    def _current(self, job_id: str) -> frames.Settled:
        """The settled view of the recurrences under the job's spec in force (a replaced spec's: specs.py)."""
        return self._settled(self._read(job_id)).under(True)

    def read_trials(self, job_id: str) -> frames.JobTrials:
        """One read of the job: its history as policies take it, and the trials dispatched and not finished."""
        return frames.job_trials(self._current(job_id))

    def history(self, job_id: str) -> TrialHistory:
        """The job's trials as policies take them, in trial order: columns whose rows are Trials."""
        return self.read_trials(job_id).history

    def trials(self, job_id: str) -> pd.DataFrame:
        """Every trial of the job under its spec in force, dispatched-but-unfinished ones included (status
        "dispatched"); those under a spec a run replaced: replaced_trials."""
        return frames.trials_frame(job_id, self._current(job_id))

    def profiles(self, job_id: str) -> pd.DataFrame:
        return frames.profiles_frame(job_id, self._current(job_id))

    def compact(self, job_id: str) -> CompactResult:
        """Write the job's log as one snapshot so reads stay fast (the report step and `zeus-kfp compact`)."""
        result = compact(self.backend, keys.check_job_id(job_id))
        self._report(result.problems)
        logger.info("store: compacted %s up to slot %d", job_id, result.upto)
        return result

    # -- files --------------------------------------------------------------------------------

    def put_handoff(self, job_id: str, recurrence_id: str, attempt: int, run: str, name: str, data: bytes) -> None:
        """Store a file a cluster trial hands over (keys.HANDOFF_FILES). The same bytes again are a no-op (a
        retried upload); different bytes are refused: one job run has one result, from its one writer."""
        key = keys.handoff_key(job_id, recurrence_id, attempt, run, name)
        try:
            if self.backend.get(key) != data:
                raise EventConflictError(key, "a different file is already stored for this job run")
            return
        except ObjectNotFound:
            self.backend.put(key, data)

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
        One writer per file (the report step of its recurrence), so a retried step rewrites the same file."""
        for name, data in (add or {}).items():
            self.backend.put(keys.tensorboard_key(job_id, name), bytes(data))
        if not read:
            return {}
        found = get_many(self.backend, self.backend.list(keys.tensorboard_dir(job_id)))
        return {keys.basename(key): data for key, data in found.items() if isinstance(data, bytes)}


DELETE_PASSES = 3  # listings of a job being deleted: what readers wrote meanwhile is found by the next


def _deletion_order(job_id: str, names: list[str]) -> list[str]:
    """The job's objects in the order a delete removes them: all but the log and the spec, then the log from its
    last slot back (each slot's blocks before its value), then the spec (its blocks before its value). A
    listing, which runs in key order, then never shows a slot without its value before a slot with one."""
    spec = keys.spec_dir(job_id)

    def rank(key: str) -> tuple[int, int, str]:
        slot = keys.slot_of(key)
        if key.startswith(spec):
            return (2, 0, key)
        return (0, 0, key) if slot is None else (1, -slot, key)

    return sorted(names, key=rank)


def _check_trial(job_id: str, recurrence_id: str, attempt: int) -> None:
    keys.check_job_id(job_id)
    keys.check_recurrence_id(recurrence_id)
    keys.check_attempt(attempt)


def _is_trial(table: Any, recurrence_id: str, attempt: int) -> Any:
    return pc.and_(pc.equal(table.column("recurrence_id"), recurrence_id), pc.equal(table.column("attempt"), attempt))


def _result_at(settled: frames.Settled, row: int) -> dict[str, Any] | None:
    """The stored result of the dispatch in row `row`, as the fields a TrialResult gives, or None."""
    if settled.finished.column("status")[row].as_py() is None:
        return None
    return {name: settled.finished.column(name)[row].as_py() for name in entries.RESULT_FIELDS}


def _storable(text: Any) -> Any:
    return storable(text) if isinstance(text, str) else text  # anything else the field table refuses, naming it


def _as_written_now(result: dict[str, Any]) -> dict[str, Any]:
    """A stored result's fields as a writer of this version would store them (its text made storable)."""
    return result | {name: _storable(result[name]) for name in ("reason", "source")}


def _local_path(uri: str) -> Path:
    """The directory a local store's URI or path names. A file URI's path is percent-decoded to bytes and then to
    the OS's name for them (os.fsdecode), the inverse of Path.as_uri: a directory name that is not UTF-8 comes
    back as itself, never as another directory with U+FFFD in its name."""
    if "\x00" in uri:
        raise StoreInputError("store", uri.replace("\x00", "\\0"), STORE_FORMS + "; no NUL characters")
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StoreInputError("store", uri, STORE_FORMS + "; file URIs name no host")
        name = os.fsdecode(unquote_to_bytes(parsed.path))
        if "\x00" in name:
            raise StoreInputError("store", uri, STORE_FORMS + "; no NUL characters (%00)")
        path = Path(name)
    else:
        try:
            path = Path(uri).expanduser()
        except RuntimeError:  # ~name of no user on this machine
            raise StoreInputError("store", uri, STORE_FORMS + f"; {uri.split('/')[0]} names no user here") from None
    if path.exists() and not path.is_dir():
        what = "is a file, not a directory" if path.is_file() else "exists and is not a directory"
        raise StoreInputError("store", uri, f"a directory ({path} {what})")
    return path


_S3_BACKENDS: dict[tuple, Backend] = {}


def _s3_backend(bucket: str, prefix: str, settings: object) -> Backend:
    """One S3Backend per bucket, prefix and settings in a process: stores opened again (the bandit and
    feedback steps each open one) reuse its connections. It holds no data."""
    from zeus_kfp.store.s3 import S3Backend  # deferred: minio's import is slow; only an s3:// store needs it

    key = (bucket, prefix, settings)
    if key not in _S3_BACKENDS:
        _S3_BACKENDS[key] = S3Backend(bucket, prefix, settings)  # type: ignore[arg-type]
    return _S3_BACKENDS[key]


def open_store(uri: str | None = None, *, read_only: bool = False) -> Store:
    """A Store for `uri`: a directory, file:///abs/path, or s3://bucket/prefix.

    None means $ZEUS_KFP_STORE, else ./.zeus-kfp/store. `store.uri` is the resolved form
    (absolute for a directory) to hand to pipeline steps. `read_only`: a missing bucket is an error,
    whatever ZEUS_S3_CREATE_BUCKET says (a command that only reads never creates anything).
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
        if any(part in {".", ".."} for part in prefix.split("/")) or "\x00" in prefix:
            raise StoreInputError("store", uri, STORE_FORMS + "; no '.', '..' or NUL in the prefix")
        from zeus_kfp.store.s3 import S3Settings  # minio only when a step really talks to S3 (its import is slow)

        settings = S3Settings.from_env()
        return Store(_s3_backend(bucket, prefix, replace(settings, create_bucket=False) if read_only else settings))
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", uri) and not uri.startswith("file://"):
        raise StoreInputError("store", uri, STORE_FORMS)
    return Store(LocalBackend(_local_path(uri)))
