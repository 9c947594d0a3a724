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


def append_trials(
    uri: str, env: dict[str, str], job_id: str, worker: int, count: int, barrier: Any, halfway: Any, out: Any
) -> None:
    """One recurrence appending `count` trials (dispatch + finish each), started with the others at once;
    after half of them it waits at `halfway` with the others and the compactor, so the compactor's rounds
    overlap the second half whatever the machine's speed."""
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
            if attempt == count // 2 + 1:
                halfway.wait()
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


def compact_until_done(
    uri: str, env: dict[str, str], job_id: str, barrier: Any, halfway: Any, stop: Any, out: Any
) -> None:
    """Compact the job over and over while the workers append their second half, at least twice (the
    first round meets every first-half record loose); report how much it merged."""
    try:
        os.environ.update(env)
        from zeus.store import open_store

        store = open_store(uri)
        barrier.wait()
        halfway.wait()
        rounds = merged = 0
        while rounds < 2 or not stop.is_set():
            merged += sum(result.merged for result in store.compact_streams(job_id))
            rounds += 1
            time.sleep(0.1)
        out.put(("compactor", rounds, merged, None))
    except BaseException:
        out.put(("error", "compactor", traceback.format_exc(), None))


def dispatch_same_attempts(
    uri: str, env: dict[str, str], job_ids: list[str], worker: int, attempts: int, barrier: Any, out: Any
) -> None:
    """Dispatch attempts 1..N of one recurrence that every worker dispatches too (a KFP retry while
    the first pod still runs, multiplied), reading the history after each, round after round.

    Odd and even workers decide different batch sizes: a worker must be told the stored trial when
    it decided the same, and refused (EventConflictError) when it decided otherwise. Any StoreWarning
    is an error here: these races must not produce spurious ones."""
    import warnings

    try:
        os.environ.update(env)
        from zeus.store import EventConflictError, StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        store = open_store(uri)
        told = []
        for job_id in job_ids:
            spec = job_spec(job_id)
            store.ensure_job(spec)
            barrier.wait()
            store.begin_recurrence(job_id, "shared-run")
            batch = spec.batch_sizes[worker % 2]
            for attempt in range(1, attempts + 1):
                decision = Decision(batch, None, "exploration", f"group {worker % 2}")
                try:
                    told.append((job_id, attempt, "ok", store.dispatch_trial(job_id, "shared-run", attempt, decision)))
                except EventConflictError:
                    told.append((job_id, attempt, "conflict", batch))
                store.history(job_id)
        out.put(("worker", worker, told, None))
    except BaseException:
        out.put(("error", worker, traceback.format_exc(), None))


def compact_jobs_until_done(uri: str, env: dict[str, str], job_ids: list[str], ready: Any, stop: Any, out: Any) -> None:
    """Like compact_until_done, over several jobs (one per round), round-robin; it says `ready` before
    its first round, and the workers start only then, so the loop overlaps them however slow the start."""
    try:
        os.environ.update(env)
        from zeus.store import open_store

        store = open_store(uri)
        rounds = merged = 0
        for job_id in job_ids:
            store.ensure_job(job_spec(job_id))
        ready.wait()
        while not stop.is_set():
            merged += sum(result.merged for job_id in job_ids for result in store.compact_streams(job_id))
            rounds += 1
        out.put(("compactor", rounds, merged, None))
    except BaseException:
        out.put(("error", "compactor", traceback.format_exc(), None))


def told_versus_stored(store: Any, job_ids: list[str], reports: list[tuple]) -> tuple[list[str], int]:
    """(disagreements between what each worker was told and what the store keeps, dispatched rows)."""
    disagreements, rows = [], 0
    for job_id in job_ids:
        trials = store.trials(job_id).set_index("attempt")
        rows += len(trials)
        for _kind, worker, told, _ in reports:
            batch = job_spec(job_id).batch_sizes[worker % 2]
            for told_job, attempt, outcome, value in told:
                if told_job != job_id:
                    continue
                stored = trials.loc[attempt]
                right = (
                    (value == stored["trial"] and batch == stored["batch_size"])
                    if outcome == "ok"
                    else batch != stored["batch_size"]
                )
                if not right:
                    disagreements.append(
                        f"{job_id} attempt {attempt} worker {worker}: {outcome} {value}, stored {dict(stored)}"
                    )
    return disagreements, rows


def cycle_trials(uri: str, env: dict[str, str], job_ids: list[str], worker: int, count: int, barrier: Any, out: Any):
    """A client's whole cycles (dispatch, read the history, finish), one recurrence per job, round after
    round; any StoreWarning is an error. Reports the trial numbers it was given per job."""
    import warnings

    try:
        os.environ.update(env)
        from zeus.store import StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        store = open_store(uri)
        given: dict[str, list[int]] = {}
        for job_id in job_ids:
            spec = job_spec(job_id)
            store.ensure_job(spec)
            barrier.wait()
            rid = f"client-{worker}"
            store.begin_recurrence(job_id, rid)
            for attempt in range(1, count + 1):
                batch = spec.batch_sizes[attempt % 3]
                decision = Decision(batch, None, "exploration", f"client {worker} attempt {attempt}")
                given.setdefault(job_id, []).append(store.dispatch_trial(job_id, rid, attempt, decision))
                store.history(job_id)
                done = TrialResult.build(spec, batch_size=batch, status="reached", time_s=1.0,
                                         energy_j=worker * 1000.0 + attempt, num_epochs=1)  # fmt: skip
                store.finish_trial(job_id, rid, attempt, done)
        out.put(("worker", worker, given, None))
    except BaseException:
        out.put(("error", worker, traceback.format_exc(), None))


def run_with_compactors(
    target, worker_args: list[tuple], job_ids: list[str], uri: str, compactors: int, timeout_s: float = 3600
) -> tuple[list, list, float]:
    """Start `compactors` compaction loops and, once they are ready, one process per worker_args running
    `target`; wait for the workers, stop the loops. Returns (worker reports, compactor reports, seconds)."""
    import multiprocessing
    import time

    context = multiprocessing.get_context("spawn")  # no fork of a process that runs the S3 server threads
    env = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    barrier, stop, out = context.Barrier(len(worker_args)), context.Event(), context.Queue()
    ready = context.Barrier(compactors + 1)
    workers = [context.Process(target=target, args=(uri, env, job_ids, *a, barrier, out)) for a in worker_args]
    loops = [
        context.Process(target=compact_jobs_until_done, args=(uri, env, job_ids, ready, stop, out))
        for _ in range(compactors)
    ]
    started = time.perf_counter()
    for process in loops:
        process.start()
    ready.wait(timeout=timeout_s)
    for process in workers:
        process.start()
    reports = [out.get(timeout=timeout_s) for _ in workers]
    stop.set()
    reports += [out.get(timeout=timeout_s) for _ in loops]
    for process in [*workers, *loops]:
        process.join(timeout=timeout_s)
    seconds = time.perf_counter() - started
    return [r for r in reports if r[0] != "compactor"], [r for r in reports if r[0] == "compactor"], seconds
