"""Process bodies for the concurrency test (importable by spawned children, so not in the test module)."""

from __future__ import annotations

import os
import time
import traceback
from typing import Any

from zeus.job import JobSpec, TrialResult
from zeus.policy.base import Decision


def job_spec(job_id: str) -> JobSpec:
    return JobSpec(job_id=job_id, batch_sizes=(16, 32, 64), default_batch_size=32, target_metric=0.5, max_epochs=5)


def append_trials(uri: str, env: dict[str, str], job_id: str, worker: int, count: int, barrier: Any, out: Any) -> None:
    """One recurrence appending `count` trials (dispatch + finish each), started with the others at once."""
    try:
        os.environ.update(env)
        from zeus.store import open_store

        store = open_store(uri)
        spec = job_spec(job_id)
        store.ensure_job(spec)
        barrier.wait()
        rid = f"worker-{worker}"
        recurrence = store.begin_recurrence(job_id, rid)
        trials = []
        for attempt in range(1, count + 1):
            batch = spec.batch_sizes[attempt % 3]
            decision = Decision(batch, None, "exploration", f"worker {worker} attempt {attempt}")
            trials.append(store.dispatch_trial(job_id, rid, attempt, decision))
            done = TrialResult.build(
                spec, batch_size=batch, status="reached", time_s=float(attempt), energy_j=worker * 1000.0 + attempt,
                num_epochs=1,
            )  # fmt: skip
            store.finish_trial(job_id, rid, attempt, done)
        out.put(("worker", worker, recurrence, trials))
    except BaseException:
        out.put(("error", worker, traceback.format_exc(), None))


def compact_until_done(uri: str, env: dict[str, str], job_id: str, barrier: Any, stop: Any, out: Any) -> None:
    """Compact the job over and over while the workers append; report how much it merged."""
    try:
        os.environ.update(env)
        from zeus.store import open_store

        store = open_store(uri)
        barrier.wait()
        rounds = merged = 0
        while not stop.is_set():
            merged += sum(result.merged for result in store.compact_streams(job_id))
            rounds += 1
            time.sleep(0.1)
        out.put(("compactor", rounds, merged, None))
    except BaseException:
        out.put(("error", "compactor", traceback.format_exc(), None))
