"""Randomized checkers of the store's three layers and of a job's life, each run a function of its seed (interleave.py).

- `consensus_run`: proposers (some only learning, some yielding, some `fresh`, some retrying after an error)
  race on one register. Checked: every non-None value any propose returned is the same and was proposed,
  every `v.*` object holds it, and a learner after the run (and again once every late PUT has landed)
  learns it.
- `log_run`: appenders (each reading, appending, then reading up to its slot, as Store does, and retrying
  after an error) and readers (keeping their prefix or not) share one log. Checked: every read is slots
  1..upto with no gap; no slot differs between any two reads, so of two reads one is a prefix of the other;
  a read after the run, and another once every late PUT has landed, holds each acknowledged entry at the
  slot its append returned; every entry in a slot is noop or was proposed there by its own appender (an
  entry may sit in several slots, the first wins: frames.py).
- `store_run`: twin Stores dispatch the same attempts of one recurrence with different batch sizes while a
  bystander begins recurrences. Checked with the process-based races' own check (store_workers.py): every
  caller was told the trial and decision the store keeps; trial and recurrence numbers are dense.
- `lifecycle` (lifecycle_checker.py): the job deleted and made again while a compactor and readers work on it.

tests/store/test_randomized_checkers.py runs them small with fixed seeds (test_lifecycle_checker.py the
fourth); benchmarks/store_checkers.py at full size. A violation names its seed: `run(checker, seed)` replays it.
"""

from __future__ import annotations

import json
import random
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from interleave import Faults, Scheduler, deterministic
from store_workers import job_spec, told_versus_stored

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import StoreWarning, consensus, entries, keys, log
from zeus_kfp.store.backend import Backend
from zeus_kfp.store.errors import EventConflictError, StoreError
from zeus_kfp.store.store import Store

# The fault mixes a seed picks from (seed % 3): none (interleaving alone), some, and many.
FAULT_MIXES = (
    Faults(),
    Faults(lost_answer=0.03, late_put=0.03, failed_read=0.03, slow_list=0.1, crash=0.01),
    Faults(lost_answer=0.08, late_put=0.08, failed_read=0.08, slow_list=0.3, crash=0.03),
)
REGISTER = "jobs/checked/spec/"
LOG_JOB = "checked-log"
STORE_JOB = "checked-store"


@dataclass
class Outcome:
    """One run: what it did (requests, faults, operations), what it found wrong, and its fingerprint."""

    checker: str
    seed: int
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    digest: str = ""


def _failed_after(outcome: Outcome, scheduler: Scheduler, exc: Exception) -> Outcome:
    """A reader after the run, with no faults and no one else at work, must not fail: a violation."""
    outcome.violations.append(f"a read after the run failed: {type(exc).__name__}: {exc}")
    return _finish(outcome, scheduler)


def _finish(outcome: Outcome, scheduler: Scheduler) -> Outcome:
    outcome.counts.update(scheduler.counts)
    outcome.digest = scheduler.digest
    for worker, exc in sorted(scheduler.errors.items()):
        outcome.violations.append(f"worker {worker} raised {type(exc).__name__}: {exc}")
    return outcome


def consensus_run(seed: int, proposers: int = 4) -> Outcome:
    """Two to `proposers` proposers on one register."""
    plan, outcome = random.Random(f"plan-{seed}"), Outcome("consensus", seed)
    scheduler = Scheduler(seed, FAULT_MIXES[seed % 3])
    proposers = plan.randint(2, proposers)
    values = [json.dumps({"proposer": i, "seed": seed}).encode() for i in range(proposers)]
    returned: list[bytes | None] = []

    def proposer(i: int) -> Callable[[Backend], None]:
        value = None if plan.random() < 0.15 else values[i]
        yielding, fresh, tries = plan.random() < 0.3, plan.random() < 0.3, plan.randint(1, 3)

        def body(backend: Backend) -> None:
            for _ in range(tries):  # a retried step proposes again, with a new token
                try:
                    returned.append(consensus.propose(backend, REGISTER, value, yield_to_others=yielding, fresh=fresh))
                    outcome.counts["proposes answered"] += 1
                    return
                except StoreError:
                    outcome.counts["proposes told an error"] += 1

        return body

    with deterministic(seed):
        scheduler.run([proposer(i) for i in range(proposers)])
        learned: list[bytes | None] = []
        try:
            learned.append(consensus.propose(scheduler.memory, REGISTER, None))  # a learner after the run
            scheduler.land_late()
            learned.append(consensus.propose(scheduler.memory, REGISTER, None))  # and once the late PUTs landed
        except Exception as exc:  # any error here is the protocol's: reported with the seed
            _failed_after(outcome, scheduler, exc)
    scheduler.land_late()
    outcome.counts["runs"] += 1
    decided = {v for v in returned if v is not None}
    committed = {data for key, data in scheduler.memory.objects.items() if keys.basename(key).startswith("v.")}
    if len(decided) > 1:
        outcome.violations.append(f"proposers were told {len(decided)} different values: {sorted(decided)}")
    if (decided | committed) - set(values):
        outcome.violations.append(f"a value no one proposed was decided: {sorted((decided | committed) - set(values))}")
    if len(committed) > 1 or (decided and committed - decided):
        outcome.violations.append(f"the v.* objects hold {sorted(committed)}, proposers were told {sorted(decided)}")
    # A learner's None says nothing was decided yet: a late phase-2 block may still get decided after it.
    if len(learned) == 2 and ((learned[0] is not None and learned[1] != learned[0]) or decided - {learned[0]}):
        outcome.violations.append(f"learners after the run learned {learned}, proposers were told {sorted(decided)}")
    return _finish(outcome, scheduler)


def _view(read: log.LogRead) -> dict[int, bytes]:
    """A read's slots and their entries' bytes, kept as they were when it returned."""
    return {slot: entries.encode(entry) for slot, entry in read.by_slot.items() if slot <= read.upto}


def log_run(seed: int, appenders: int = 3, appends: int = 3, readers: int = 2) -> Outcome:
    """`appenders` appending `appends` entries each, and `readers` reading as often, on one log."""
    plan, outcome = random.Random(f"plan-{seed}"), Outcome("log", seed)
    scheduler = Scheduler(seed, FAULT_MIXES[seed % 3])
    reads: list[dict[int, bytes]] = []
    acked: list[tuple[int, bytes]] = []  # (slot its append returned, the entry's bytes)

    def appender(i: int) -> Callable[[Backend], None]:
        tries = plan.randint(1, 3)

        def body(backend: Backend) -> None:
            read: log.LogRead | None = None
            for n in range(appends):
                entry = {"kind": "begin", "recurrence_id": f"w{i}-{n}", "at": n}
                for _ in range(tries):  # a retried step: reads, and appends again unless a try before landed
                    try:
                        read = log.read(backend, LOG_JOB, read)
                        reads.append(_view(read))
                        if entries.encode(entry) in reads[-1].values():
                            break
                        slot = log.append(backend, read, entry)
                        acked.append((slot, entries.encode(entry)))
                        outcome.counts["appends acknowledged"] += 1
                        reads.append(_view(log.read(backend, LOG_JOB, read, until=slot)))  # what Store answers from
                        break
                    except StoreError:
                        outcome.counts["appends or reads told an error"] += 1

        return body

    def reader(keep: bool) -> Callable[[Backend], None]:
        def body(backend: Backend) -> None:
            read: log.LogRead | None = None
            for _ in range(appends + 1):
                try:
                    read = log.read(backend, LOG_JOB, read if keep else None)
                    reads.append(_view(read))
                except StoreError:
                    outcome.counts["appends or reads told an error"] += 1

        return body

    workers = [appender(i) for i in range(appenders)] + [reader(plan.random() < 0.5) for _ in range(readers)]
    with deterministic(seed):
        # The job's spec, as every job has one: a reader closes holes only in a job whose spec is listed (log.py)
        consensus.propose(scheduler.memory, keys.spec_dir(LOG_JOB), b'{"job_id":"checked-log"}')
        scheduler.run(workers)
        try:
            after = _view(log.read(scheduler.memory, LOG_JOB))  # closes what crashed writers left open
            scheduler.land_late()
            final = _view(log.read(scheduler.memory, LOG_JOB))
        except Exception as exc:  # any error here is the protocol's: reported with the seed
            return _failed_after(outcome, scheduler, exc)
    outcome.counts["runs"] += 1
    outcome.counts["reads compared"] += len(reads) + 2
    outcome.counts["entries in more than one slot"] += len(final) - len(set(final.values()))
    phase_2 = {(w, keys.slot_of(key), data) for w, key, data in scheduler.puts if ".2." in keys.basename(key)}
    outcome.violations += _log_violations([*reads, after], final, acked, phase_2)
    return _finish(outcome, scheduler)


def _log_violations(
    reads: list[dict[int, bytes]], final: dict[int, bytes], acked: list[tuple[int, bytes]], phase_2: set[tuple]
) -> list[str]:
    found = []
    for n, view in enumerate([*reads, final]):
        if sorted(view) != list(range(1, len(view) + 1)):
            found.append(f"read {n} is not slots 1..upto: {sorted(view)}")
        for slot, data in sorted(view.items()):
            if final.get(slot) != data:
                found.append(f"slot {slot}: read {n} shows {data!r}, the read after the run {final.get(slot)!r}")
    for slot, data in acked:
        if final.get(slot) != data:
            found.append(f"an append acknowledged at slot {slot} ({data!r}) is not there: {final.get(slot)!r}")
    for slot, data in sorted(final.items()):
        entry = json.loads(data)
        if entry["kind"] != "noop":
            owner = int(entry["recurrence_id"].split("-")[0][1:])
            if (owner, slot, data) not in phase_2:
                found.append(f"slot {slot} holds {data!r}, which its appender never proposed there")
    return found


SPEC = job_spec(STORE_JOB)
BATCHES = SPEC.batch_sizes


def store_run(seed: int, twins: int = 3, attempts: int = 2) -> Outcome:
    """`twins` Stores dispatching and finishing attempts 1..`attempts` of one recurrence (odd and even twins with
    different batch sizes and energies), a bystander beginning as many other recurrences, and on half the seeds
    a compactor compacting as often (snapshots, reads that start from one, a deleted one's readers listing again)."""
    plan, outcome = random.Random(f"plan-{seed}"), Outcome("store", seed)
    scheduler = Scheduler(seed, FAULT_MIXES[seed % 3])
    told: dict[int, list[tuple]] = {}
    results: list[tuple[int, float, bool]] = []  # (attempt, energy a twin finished it with, whether it was refused)
    begun: dict[str, int] = {}

    def twin(i: int) -> Callable[[Backend], None]:
        decision = Decision(BATCHES[i % 2], None, "exploration", f"group {i % 2}")
        tries = plan.randint(1, 3)

        def body(backend: Backend) -> None:
            store = Store(backend)
            for attempt in range(1, attempts + 1):
                for _ in range(tries):  # a retried bandit step dispatches the same attempt again
                    try:
                        trial, recorded = store.dispatch_trial(STORE_JOB, "shared-run", attempt, decision)
                    except StoreError:
                        outcome.counts["calls told an error"] += 1
                        continue
                    told.setdefault(i, []).append((STORE_JOB, attempt, trial, recorded.batch_size, recorded.reason))
                    outcome.counts["dispatches answered"] += 1
                    _finish_trial(store, attempt, recorded.batch_size, 100.0 + i % 2, tries)
                    break

        return body

    def _finish_trial(store: Store, attempt: int, batch_size: int, energy_j: float, tries: int) -> None:
        done = TrialResult.build(SPEC, batch_size=batch_size, status="reached", time_s=1.0, energy_j=energy_j,
                                 num_epochs=1)  # fmt: skip
        for _ in range(tries):  # a retried feedback step
            try:
                store.finish_trial(STORE_JOB, "shared-run", attempt, done)
            except EventConflictError:
                results.append((attempt, energy_j, True))
                outcome.counts["results refused (a twin's stood)"] += 1
                return
            except StoreError:
                outcome.counts["calls told an error"] += 1
                continue
            results.append((attempt, energy_j, False))
            outcome.counts["results answered"] += 1
            return

    def bystander(backend: Backend) -> None:
        """Another recurrence's steps appending meanwhile: slots the twins must step over."""
        store = Store(backend)
        for n in range(attempts):
            try:
                begun[f"other-{n}"] = store.begin_recurrence(STORE_JOB, f"other-{n}")
            except StoreError:
                outcome.counts["calls told an error"] += 1

    def compactor(backend: Backend) -> None:
        store = Store(backend)
        for _ in range(attempts):
            try:
                outcome.counts["snapshots written"] += store.compact(STORE_JOB).written is not None
            except StoreError:
                outcome.counts["calls told an error"] += 1

    workers = [twin(i) for i in range(twins)] + [bystander] + ([compactor] if plan.random() < 0.5 else [])
    with deterministic(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)  # problems a read reports are counted below, not failures
        setup = Store(scheduler.memory)
        setup.ensure_job(SPEC)
        setup.begin_recurrence(STORE_JOB, "shared-run")
        scheduler.run(workers)
        scheduler.land_late()
        final = Store(scheduler.memory)
        try:
            disagreements, _rows = told_versus_stored(final, [("worker", i, t) for i, t in sorted(told.items())])
            trials = final.trials(STORE_JOB)
            numbers = {rid: final.recurrence_number(STORE_JOB, rid) for rid in begun}
        except Exception as exc:  # any error here is the protocol's: reported with the seed
            return _failed_after(outcome, scheduler, exc)
        outcome.counts["problems reported"] += len(final.problems)
    outcome.counts["runs"] += 1
    outcome.violations += disagreements
    if sorted(trials["trial"]) != list(range(1, len(trials) + 1)) or trials["attempt"].duplicated().any():
        outcome.violations.append(f"trials not numbered 1..N once per attempt: {trials[['trial', 'attempt']]}")
    stored = dict(zip(trials["attempt"], trials["energy_j"], strict=True))
    for attempt, energy_j, refused in results:
        if refused == (stored.get(attempt) == energy_j):
            said = "refused" if refused else "accepted"
            outcome.violations.append(f"attempt {attempt}: a result of {energy_j} J was {said}, stored {stored}")
    if numbers != begun:
        outcome.violations.append(f"recurrence numbers told {begun}, stored {numbers}")
    return _finish(outcome, scheduler)


def _lifecycle(seed: int, **size: int) -> Outcome:
    from lifecycle_checker import lifecycle_run  # a module of its own, built on this one's Outcome and faults

    return lifecycle_run(seed, **size)


CHECKERS: dict[str, Callable[..., Outcome]] = {
    "consensus": consensus_run,
    "log": log_run,
    "store": store_run,
    "lifecycle": _lifecycle,
}


# The suite's size (tests/store/test_randomized_checkers.py) and the benchmark's (benchmarks/store_checkers.py).
SIZES: dict[str, dict[str, dict[str, int]]] = {
    "small": {"consensus": {"proposers": 4}, "log": {"appenders": 3, "appends": 3, "readers": 2},
              "store": {"twins": 3, "attempts": 2}, "lifecycle": {"cycles": 2, "readers": 2, "trials": 2, "rounds": 3}},
    "full": {"consensus": {"proposers": 6}, "log": {"appenders": 4, "appends": 4, "readers": 2},
             "store": {"twins": 4, "attempts": 3}, "lifecycle": {"cycles": 3, "readers": 3, "trials": 2, "rounds": 3}},
}  # fmt: skip


def run(checker: str, seed: int, size: str = "small") -> Outcome:
    """One run of a checker at a size: what a violation's seed replays."""
    return CHECKERS[checker](seed, **SIZES[size][checker])
