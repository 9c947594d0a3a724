"""The recurrence gate's part of the Store (zeus/zeus_kfp/store/gating.py has the rule): asking to open a recurrence,
reading what the log made of each ask, and the data summaries drift detectors compare with.

A mixin of Store, apart so that neither module grows past one concern: it uses only Store's log reads and
appends (`_read`, `_settled`, `_append`) and its backend. Also here: `begin_recurrence`, the plain begin
(no request), which asks the same way and refuses an id the gate skipped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pandas as pd
import pyarrow.compute as pc

from zeus_kfp.store import entries, fields, frames, gating, keys, log
from zeus_kfp.store.backend import ObjectNotFound
from zeus_kfp.store.errors import UnknownTrialError
from zeus_kfp.store.text import storable


class Recurrences:
    """Store's recurrence-gate methods (see Store)."""

    backend: Any

    def begin_recurrence(self, job_id: str, recurrence_id: str) -> int:
        """The recurrence's number (1, 2, ...), dense and in the order recurrences began; idempotent per id.
        A recurrence the gate opened (open_recurrence) is returned as it is; one it skipped is refused."""
        outcome = self.open_recurrence(job_id, recurrence_id)
        if not outcome.opened:
            raise UnknownTrialError(
                f"recurrence {recurrence_id!r} of job {job_id!r} was skipped by the recurrence gate ({outcome.why})"
            )
        assert outcome.recurrence is not None
        return outcome.recurrence

    def open_recurrence(
        self, job_id: str, recurrence_id: str, request: gating.GateRequest | None = None
    ) -> gating.GateOutcome:
        """Ask to open recurrence `recurrence_id`: a `begin` entry carrying `request` (None: a plain begin,
        which always opens one), whose outcome the log decides (gating.py). Idempotent per id: the first
        begin of an id stands, and every caller and reader is told the same outcome."""
        keys.check_recurrence_id(recurrence_id)
        read = self._read(job_id)
        settled = self._settled(read)
        if self._outcome(settled, recurrence_id) is None:
            entry = {"kind": "begin", "recurrence_id": recurrence_id, "at": entries.now_us()}
            if request is not None and request.spec is not None:
                request = replace(request, spec=gating.spec_text(json.loads(request.spec)))  # as the rule compares it
                if request.spec != settled.specs[-1]:  # it may replace the spec in force: a blind reader must stop
                    entry["format"] = fields.BEGIN_SPEC_FORMAT
            settled = self._append(read, entry | (request.entry() if request is not None else {}))
        outcome = self._outcome(settled, recurrence_id)
        assert outcome is not None  # ours, or a twin's before it
        return outcome

    @staticmethod
    def _outcome(settled: frames.Settled, recurrence_id: str) -> gating.GateOutcome | None:
        found = pc.index(settled.requests.column("recurrence_id"), recurrence_id).as_py()
        return None if found < 0 else gating.outcome_of(settled.requests, found)

    def gate_outcome(self, job_id: str, recurrence_id: str) -> gating.GateOutcome | None:
        """What the gate made of `recurrence_id`'s begin (None: it never asked)."""
        return self._outcome(self._settled(self._read(job_id)), keys.check_recurrence_id(recurrence_id))

    def end_recurrence(self, job_id: str, recurrence_id: str, reason: str) -> None:
        """Record that a recurrence ended with no trial to say so (its run's step failed before one finished),
        so it holds no slot of the job's cap (gating.py)."""
        keys.check_recurrence_id(recurrence_id)
        read = self._read(job_id)
        entry = {"kind": "end", "recurrence_id": recurrence_id, "at": entries.now_us(), "reason": storable(reason, 500)}
        log.append(self.backend, read, entry)

    def recurrences(self, job_id: str) -> pd.DataFrame:
        """Every run that asked to open a recurrence, in slot order: opened or skipped and why, and the drift
        statistic its gate stored (what `zeus-kfp show` lists)."""
        table = self._settled(self._read(job_id)).requests
        columns = ["recurrence", "recurrence_id", "opened", "why", "at", "forced", *gating.DRIFT_COLUMNS]
        frame = table.select(columns).to_pandas()
        frame["recurrence"] = frame["recurrence"].astype("Int64")
        frame["at"] = pd.to_datetime(frame["at"], unit="us", utc=True)
        return frame

    def drift_recurrences(self, job_id: str) -> list[int]:
        """The numbers of the recurrences the gate opened on drift, ascending (for the policies: their
        data changed, so older observations may be stale)."""
        return list(frames.drift_recurrences(self._settled(self._read(job_id))))

    def recurrence_number(self, job_id: str, recurrence_id: str) -> int:
        """The number `begin_recurrence` gave `recurrence_id` (UnknownTrialError if it was never begun)."""
        keys.check_recurrence_id(recurrence_id)
        number = self._settled(self._read(job_id)).recurrence(recurrence_id)
        if number is None:
            raise UnknownTrialError(
                f"recurrence {recurrence_id!r} of job {job_id!r} was never begun: call begin_recurrence first"
            )
        return number

    def put_drift_summary(self, job_id: str, recurrence_id: str, data: bytes) -> None:
        """Store the summary of a recurrence's input data (Parquet, zeus_kfp.steps.drift_detectors) its next gate
        compares with; one writer per recurrence id, so a retried gate rewrites the same object."""
        self.backend.put(keys.drift_key(job_id, recurrence_id), bytes(data))

    def get_drift_summary(self, job_id: str, recurrence_id: str) -> bytes | None:
        try:
            return self.backend.get(keys.drift_key(job_id, recurrence_id))
        except ObjectNotFound:
            return None
