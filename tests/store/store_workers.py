"""Bodies of the concurrency tests' clients (importable by the processes run_clients starts, so not in a test module).

benchmarks/store_races.py runs the same bodies at full size (300 attempts) on every stand-in.
"""

from __future__ import annotations

import os
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from zeus_kfp.job import Decision, JobSpec, TrialResult


def use_env(env: dict[str, str]) -> None:
    """The test's ZEUS_S3_* variables, exactly: a client forked from the fork server (run_clients) starts with
    the environment the server started with, which an earlier test may have set differently."""
    for key in [key for key in os.environ if key.startswith("ZEUS_S3_")]:
        del os.environ[key]
    os.environ.update(env)


def job_spec(job_id: str) -> JobSpec:
    return JobSpec(job_id=job_id, batch_sizes=(16, 32, 64), default_batch_size=32, target_metric=0.5, max_epochs=5)


def cycle_trials(
    uri: str, env: dict[str, str], job_ids: list[str], worker: int, count: int, start: Any, out: Any
) -> None:
    """A client's whole cycles (dispatch, read the history, finish), its own recurrence in each job, round
    after round (one job a round); any StoreWarning is an error. Reports the trials it was given per job."""
    try:
        use_env(env)
        from zeus_kfp.store import StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        store = open_store(uri)
        given: dict[str, list[int]] = {}
        for job_id in job_ids:
            spec = job_spec(job_id)
            store.ensure_job(spec)
            start.wait()
            rid = f"client-{worker}"
            store.begin_recurrence(job_id, rid)
            for attempt in range(1, count + 1):
                decision = Decision(spec.batch_sizes[attempt % 3], None, "exploration", f"client {worker}")
                trial, recorded = store.dispatch_trial(job_id, rid, attempt, decision)
                given.setdefault(job_id, []).append(trial)
                store.history(job_id)
                done = TrialResult.build(spec, batch_size=recorded.batch_size, status="reached", time_s=1.0,
                                         energy_j=worker * 1000.0 + attempt, num_epochs=1)  # fmt: skip
                store.finish_trial(job_id, rid, attempt, done)
        out.put(("worker", worker, given))
    except BaseException:
        out.put(("error", worker, traceback.format_exc()))


def dispatch_same_attempts(
    uri: str, env: dict[str, str], job_ids: list[str], worker: int, attempts: int, start: Any, out: Any
) -> None:
    """Dispatch attempts 1..N of one recurrence that every worker dispatches too (a KFP retry while the
    first pod still runs, multiplied), reading the history after each. Odd and even workers decide
    different batch sizes: each must be told the stored trial and decision. Any StoreWarning is an error."""
    try:
        use_env(env)
        from zeus_kfp.store import StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        store = open_store(uri)
        told = []
        for job_id in job_ids:
            spec = job_spec(job_id)
            store.ensure_job(spec)
            start.wait()
            store.begin_recurrence(job_id, "shared-run")
            decision = Decision(spec.batch_sizes[worker % 2], None, "exploration", f"group {worker % 2}")
            for attempt in range(1, attempts + 1):
                trial, recorded = store.dispatch_trial(job_id, "shared-run", attempt, decision)
                told.append((job_id, attempt, trial, recorded.batch_size, recorded.reason))
                store.history(job_id)
        out.put(("worker", worker, told))
    except BaseException:
        out.put(("error", worker, traceback.format_exc()))


def compact_until_stopped(uri: str, env: dict[str, str], job_ids: list[str], ready: Any, stop: Any, out: Any) -> None:
    """Compact the jobs round-robin until told to stop (at least once each); says `ready` first, and the
    clients start only then, so the loop overlaps them however slow the start. Reports snapshots written."""
    try:
        use_env(env)
        from zeus_kfp.store import StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        store = open_store(uri)
        for job_id in job_ids:
            store.ensure_job(job_spec(job_id))
        ready.wait()
        rounds = written = 0
        while rounds < 1 or not stop.is_set():
            written += sum(store.compact(job_id).written is not None for job_id in job_ids)
            rounds += 1
            stop.wait(0.1)  # as often as a busy report step would, not as fast as the server answers
        out.put(("compactor", rounds, written))
    except BaseException:
        out.put(("error", "compactor", traceback.format_exc()))


def told_versus_stored(store: Any, reports: list[tuple]) -> tuple[list[str], int]:
    """(each thing a dispatcher was told that the store does not keep, the dispatched rows)."""
    disagreements, rows, stored = [], 0, {}
    for _kind, worker, told in reports:
        for job_id, attempt, trial, batch_size, reason in told:
            if job_id not in stored:
                stored[job_id] = store.trials(job_id).set_index("attempt")
                rows += len(stored[job_id])
            row = stored[job_id].loc[attempt]
            if (trial, batch_size, reason) != (row["trial"], row["batch_size"], row["decision_reason"]):
                disagreements.append(
                    f"{job_id} attempt {attempt} worker {worker}: told {trial}/{batch_size}, stored {dict(row)}"
                )
    return disagreements, rows


def run_clients(
    target: Callable, client_args: list[tuple], job_ids: list[str], uri: str, compactors: int, processes: bool,
    timeout_s: float = 3600,  # a guard against a hang only: at load 25 a 16-client round through moto takes minutes
) -> tuple[list, list]:  # fmt: skip
    """Run one client per client_args (processes, or threads of this process) alongside `compactors`
    compaction loops; returns (client reports, compactor reports)."""
    import multiprocessing
    import queue

    env = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    if processes:
        # Forked from a fork server: a fresh process (none of the S3 server's threads, which a plain fork would
        # copy mid-request) that imported the clients' modules once, instead of each spawned client importing
        # them again (about a second of CPU each, 17 clients a test).
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["store_workers", "zeus_kfp.store", "zeus_kfp.steps.gate"])
        make, start, stop, out = context.Process, context.Barrier(len(client_args)), context.Event(), context.Queue()
        ready = context.Barrier(compactors + 1)
    else:
        make, start, stop, out = threading.Thread, threading.Barrier(len(client_args)), threading.Event(), queue.Queue()
        ready = threading.Barrier(compactors + 1)
    loops = [make(target=compact_until_stopped, args=(uri, env, job_ids, ready, stop, out)) for _ in range(compactors)]
    clients = [make(target=target, args=(uri, env, job_ids, *args, start, out)) for args in client_args]
    for loop in loops:
        loop.start()
    ready.wait(timeout=timeout_s)
    for client in clients:
        client.start()
    reports = [out.get(timeout=timeout_s) for _ in clients]
    stop.set()
    reports += [out.get(timeout=timeout_s) for _ in loops]
    for each in [*clients, *loops]:
        each.join(timeout=timeout_s)
    return [r for r in reports if r[0] != "compactor"], [r for r in reports if r[0] == "compactor"]


def gate_run_settings(cap: int):
    """Runs that are always due (period 0), capped at `cap` recurrences of the job running at once."""
    from zeus_kfp.run_settings import RunSettings

    return RunSettings(period_s=0.0, max_running=cap)


def gate_run(uri: str, env: dict[str, str], job_ids: list[str], worker: int, plan: tuple, start: Any, out: Any) -> None:
    """One run's recurrence gate per round, as a pipeline's gate step does it (zeus_kfp.steps.gate.gate, the step
    function the component calls), started at once with every other client's: `plan` is (who, cap, rounds),
    who being "schedule-a", "schedule-b" or "submit" (a manual `submit --force`). Between rounds each client
    that opened a recurrence finishes it (a trial that reached), so the next round has free slots again.
    Reports, per round, what its gate step returned and the outcome the store holds for its run."""
    try:
        use_env(env)
        from zeus_kfp.steps import spec_to_params
        from zeus_kfp.steps.gate import gate
        from zeus_kfp.store import StoreWarning, open_store

        warnings.simplefilter("error", StoreWarning)
        who, cap, rounds = plan
        (job_id,) = job_ids
        spec, run = job_spec(job_id), gate_run_settings(cap)
        store = open_store(uri)
        told = []
        for round_ in range(rounds):
            rid = f"{who}-{worker}-r{round_}"
            start.wait()
            opened = gate(spec_to_params(spec), spec_to_params(run), store_uri=uri, run_id=rid, recurrence_id="",
                          owner="", force=who == "submit")  # fmt: skip
            told.append((rid, opened))
            start.wait()  # every gate of the round has answered: now the opened recurrences end
            if opened:
                decision = Decision(32, None, "exploration", who)
                store.dispatch_trial(job_id, rid, 1, decision)
                done = TrialResult.build(spec, batch_size=32, status="reached", time_s=1.0, energy_j=1.0, num_epochs=1)
                store.finish_trial(job_id, rid, 1, done)
            start.wait()
        out.put(("worker", worker, told))
    except BaseException:
        out.put(("error", worker, traceback.format_exc()))
