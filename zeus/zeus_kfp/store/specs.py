"""The job's spec in force and how its script reports: the spec part of the Store (gating.py has the rule).

A mixin of Store, as recurrences.py is. A job's first spec is agreed in its spec register (catalog.py); a run's
gated begin may replace it while none of its trials has reached the target and no recurrence runs, by the log's
rule (gating.py: "spec replaced", a new epoch of the job). So the spec in force is read from the log, and the job's
history, its figures and its power profiles are those of the recurrences opened under it (frames.Settled.under):
trials under a spec it replaced compared a different job (another metric, target, batch sizes, GPU), so neither
the bandit nor a saving may learn from them; `replaced_trials` keeps them readable. How the script reports (its
metric pattern, collector and keep globs) is no part of the spec: each gated begin records what its run used, and
the job's is the latest recurrence's (`reads`).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow.compute as pc

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.store import catalog, frames, gating, keys
from zeus_kfp.store.errors import JobSpecMismatchError, UnknownJobError

READS = ("zeus_aware", "metric_pattern", "metrics_collector", "keep")  # how a script reports (gating.GateRequest)


class Specs:
    """Store's spec methods (see Store)."""

    backend: Any
    _first: dict[str, JobSpec]  # each job's first spec (its register's), which never changes
    _parsed: dict[str, JobSpec]  # specs by their text, parsed once

    def first_spec_text(self, job_id: str) -> str:
        """The spec register's spec (gating.spec_text): the job's spec until a run replaces it; "" for no job."""
        if job_id not in self._first:
            record = catalog.stored(self.backend, keys.check_job_id(job_id))
            if record is None:
                return ""
            self._first[job_id] = record["spec"]
        return gating.spec_text(self._first[job_id].to_dict())

    def _spec(self, text: str) -> JobSpec:
        if text not in self._parsed:
            self._parsed[text] = JobSpec.from_dict(json.loads(text))
        return self._parsed[text]

    def _in_force(self, job_id: str) -> tuple[JobSpec, frames.Settled]:
        if not self.first_spec_text(job_id):
            raise UnknownJobError(f"no job {job_id!r} in {self.backend.location}")
        settled = self._settled(self._read(job_id))
        return self._spec(settled.specs[-1]), settled

    def get_job(self, job_id: str) -> JobSpec:
        """The job's spec in force: its first, or the one a run replaced it with (UnknownJobError: no such job)."""
        return self._in_force(job_id)[0]

    def spec_of(self, settled: frames.Settled, recurrence_id: str) -> JobSpec:
        """The spec recurrence `recurrence_id` opened under (the spec in force for one that never began)."""
        epoch = settled.epoch_of(recurrence_id)
        return self._spec(settled.specs[-1 if epoch is None else epoch])

    def recurrence_spec(self, job_id: str, recurrence_id: str) -> JobSpec:
        """The spec recurrence `recurrence_id` opened under, what its trials train to (the spec in force for one
        that never began; UnknownJobError: no such job)."""
        return self.spec_of(self._in_force(job_id)[1], recurrence_id)

    def reached_trial(self, job_id: str) -> int | None:
        """The first trial under the job's spec in force that reached the target (it settles the spec), or None."""
        return self.settled_by(self._in_force(job_id)[1])

    @staticmethod
    def settled_by(settled: frames.Settled) -> int | None:
        """The first trial under the spec in force that reached the target (it settles the spec), None if none."""
        current = settled.under(True)
        reached = pc.equal(current.finished.column("status"), TrialStatus.REACHED.value)
        trials = pc.filter(current.dispatched.column("trial"), pc.fill_null(reached, False))
        return None if len(trials) == 0 else int(pc.min(trials).as_py())

    def ensure_job(self, spec: JobSpec, owner: str = "") -> JobSpec:
        """Store the spec on first use; afterwards the spec in force must come back, field for field
        (JobSpecMismatchError naming each changed one): the spec is the job's identity, and only a run's gate
        replaces it (spec_change). How a run runs (the recurrence gate's period and cap, zeus_kfp.run_settings) is
        no part of it: each gated begin carries the settings it ran under."""
        changes = self.spec_change(spec, owner)
        if changes:
            raise JobSpecMismatchError(spec.job_id, changes)
        return spec

    def spec_change(self, spec: JobSpec, owner: str = "") -> dict[str, tuple[Any, Any]]:
        """Register the job with `spec` on first use; then what `spec` changes against the spec in force ({}:
        nothing), which a run's gated begin may take (gating.py). Refused with JobSpecMismatchError, naming the
        trial and what helps, once a trial under the spec in force has reached the target: the spec is settled."""
        first = catalog.register(self.backend, spec, owner)
        self._first[first.job_id] = first
        in_force, settled = self._in_force(spec.job_id)
        changes = in_force.diff(spec)  # the whole spec: it is the job's identity
        reached = self.settled_by(settled) if changes else None
        if reached is not None:
            raise JobSpecMismatchError(spec.job_id, changes, settled_by=reached)
        return changes

    def spec_history(self, job_id: str) -> list[tuple[int | None, JobSpec]]:
        """The job's specs in the order they were in force: (the recurrence that took it, None for the first, which
        its first run stored; the spec)."""
        _, settled = self._in_force(job_id)
        requests = settled.requests
        took = requests.filter(pc.equal(requests.column("why"), gating.SPEC_REPLACED)).column("recurrence").to_pylist()
        return [(number, self._spec(text)) for number, text in zip([None, *took], settled.specs, strict=True)]

    def replaced_trials(self, job_id: str) -> pd.DataFrame:
        """The trials of the recurrences opened under specs the job has since replaced (the trials frame's
        columns): left out of its history and figures, kept to be read."""
        _, settled = self._in_force(job_id)
        return frames.trials_frame(job_id, settled.under(False))

    def reads(self, job_id: str) -> dict[str, Any] | None:
        """How the job's script reports, as its latest recurrence that said it ran (READS: zeus_aware,
        metric_pattern, metrics_collector, keep; "" is the default of each), with that `recurrence`; None when
        no recurrence said (a new job, or one whose runs were older than this record)."""
        requests = self._settled(self._read(job_id)).requests
        said = requests.filter(pc.and_(requests.column("opened"), pc.is_valid(requests.column("metric_pattern"))))
        if said.num_rows == 0:
            return None
        last = {name: said.column(name)[-1].as_py() for name in (*READS, "recurrence")}
        return last | {name: last[name] or "" for name in READS if name != "zeus_aware"}
