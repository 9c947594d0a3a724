"""8 processes x 25 trials append to one job at once while a ninth compacts: exactly 200 finished
trials come back, none lost, none twice, with unique trial and recurrence numbers. Both backends."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from store_workers import (
    append_trials,
    compact_until_done,
    dispatch_same_attempts,
    run_with_compactors,
    told_versus_stored,
)

from zeus.store import open_store

WORKERS = 8
TRIALS = 25
JOB = "concurrent-job"


@pytest.mark.slow
def test_eight_appenders_and_a_compactor_lose_nothing(store_uri):
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs the S3 server threads
    env = {k: v for k, v in os.environ.items() if k.startswith("ZEUS_S3_")}
    barrier, halfway = ctx.Barrier(WORKERS + 1), ctx.Barrier(WORKERS + 1)
    stop = ctx.Event()
    out = ctx.Queue()
    workers = [
        ctx.Process(target=append_trials, args=(store_uri, env, JOB, w, TRIALS, barrier, halfway, out))
        for w in range(WORKERS)
    ]
    compactor = ctx.Process(target=compact_until_done, args=(store_uri, env, JOB, barrier, halfway, stop, out))
    for process in [*workers, compactor]:
        process.start()
    reports = [out.get(timeout=240) for _ in workers]
    stop.set()
    reports.append(out.get(timeout=60))
    for process in [*workers, compactor]:
        process.join(timeout=60)
    errors = [r[2] for r in reports if r[0] == "error"]
    assert not errors, errors[0]

    store = open_store(store_uri)
    trials = store.trials(JOB)
    assert len(trials) == WORKERS * TRIALS
    assert trials["finished"].all() and (trials["status"] == "reached").all()
    assert not trials.duplicated(["recurrence_id", "attempt"]).any()
    numbers = trials["trial"].tolist()
    duplicated = sorted(n for n in set(numbers) if numbers.count(n) > 1)
    gaps = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
    assert (duplicated, gaps) == ([], []), f"duplicated trial numbers {duplicated}, gaps {gaps}"
    assert sorted(set(trials["recurrence"])) == list(range(1, WORKERS + 1))
    for _kind, worker, recurrence, numbers in (r for r in reports if r[0] == "worker"):
        mine = trials[trials["recurrence_id"] == f"worker-{worker}"]
        assert set(mine["recurrence"]) == {recurrence} and mine["trial"].tolist() == numbers
        assert mine["energy_j"].tolist() == [worker * 1000.0 + a for a in range(1, TRIALS + 1)]
    _, rounds, merged, _ = next(r for r in reports if r[0] == "compactor")
    assert rounds >= 2 and merged > 0  # the compactor really ran alongside the appenders' second half
    store.compact(JOB)
    assert store.trials(JOB).equals(trials)
    assert store.problems == []


@pytest.mark.slow
def test_eight_processes_dispatching_the_same_attempts_with_two_compactors_agree(store_uri):
    """8 processes dispatch the same attempts of one recurrence while 2 compactors loop, 3 rounds:
    every process is told what the store keeps, and no read warns. (300 attempts: benchmarks/store_races.py.)"""
    job_ids = [f"same-attempts-{r}" for r in range(3)]
    attempts = 8
    workers = [(w, attempts) for w in range(WORKERS)]
    reports, compactors, _ = run_with_compactors(dispatch_same_attempts, workers, job_ids, store_uri, 2, 240)
    errors = [r[2] for r in reports if r[0] == "error"]
    assert not errors, errors[0]
    store = open_store(store_uri)
    disagreements, rows = told_versus_stored(store, job_ids, [r for r in reports if r[0] == "worker"])
    assert disagreements == [] and rows == len(job_ids) * attempts
    assert store.problems == []
    assert sum(r[2] for r in compactors) > 0  # the compactors really merged meanwhile
