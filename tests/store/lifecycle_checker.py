"""A randomized checker of a job's whole life: deleted and made again while a compactor and readers work on it.

`lifecycle_run(seed)`: job `checked-life` is made with two finished trials (making 0, compacted on half the
seeds); then its owner deletes it and makes it again `cycles` times, each making writing trials of its own
(recurrence ids `m{k}-{n}`), and on half the seeds ends with a delete. Meanwhile a compactor compacts it and
`readers` readers read its trials, some keeping their Store across reads (a kept prefix), some opening one per
read. All of it runs under the seed's interleaving and faults (interleave.py), real Store code throughout.
Checked:
- every read a reader was answered shows one making: its recurrence ids all `m{k}-` for one k (a compaction
  that stamped one making's rows as another's, or a read that mixed two, shows both), and none whose delete
  had returned before the read began (a kept Store's view of a deleted making);
- no two reads of one making number its trials differently;
- after the run (no faults, every late PUT landed): if the owner ended with making K, a fresh read shows every
  trial of K its owner was told finished, reached, and no other making's; if it ended with a delete, nothing of
  the job is left and the id can be made again, with no trial. Where the owner was cut short (an error on every
  try of a step) or any worker died (a reader killed between closing a hole and undoing it), the job is
  deleted once more first, as a person would.
Faults: those of checkers.FAULT_MIXES but late PUTs. A PUT that lands after its job was deleted and made again
lands in the new job: its keys do not name the making, so the store cannot tell (docs/STORE.md, "Deleting a
job": delete a job only when nothing runs it). Late PUTs are the other checkers' part.
"""

from __future__ import annotations

import contextlib
import logging
import random
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace

from checkers import FAULT_MIXES, Outcome, _failed_after, _finish
from interleave import Scheduler, deterministic
from store_workers import job_spec

from zeus_kfp.job import Decision, TrialResult
from zeus_kfp.store import StoreWarning, keys
from zeus_kfp.store.backend import Backend
from zeus_kfp.store.errors import StoreError, UnknownJobError
from zeus_kfp.store.store import Store

JOB = "checked-life"
SPEC = job_spec(JOB)
LIFE_MIXES = tuple(replace(mix, late_put=0.0) for mix in FAULT_MIXES)
EXPECTED = (StoreError, LookupError)  # what a call may be told while its job is deleted under it, or faults hit
TRIES = 4


def _trials(store: Store, making: int, count: int, acked: set[str], outcome: Outcome) -> bool:
    """Making `making`'s trials m{making}-0.., each begun, dispatched and finished (retried on errors); whether
    every call was answered."""
    for n in range(count):
        rid = f"m{making}-{n}"
        done = TrialResult.build(SPEC, batch_size=SPEC.default_batch_size, status="reached", time_s=1.0,
                                 energy_j=10.0 + making, num_epochs=1)  # fmt: skip
        calls: list[Callable[[], object]] = [
            lambda rid=rid: store.begin_recurrence(JOB, rid),
            lambda rid=rid: store.dispatch_trial(JOB, rid, 1, Decision(SPEC.default_batch_size, None, "x", "y")),
            lambda rid=rid, done=done: store.finish_trial(JOB, rid, 1, done),
        ]
        for call in calls:
            if not _answered(call, outcome):
                return False
        acked.add(rid)
    return True


def _answered(call: Callable[[], object], outcome: Outcome) -> bool:
    for _ in range(TRIES):
        try:
            call()
            return True
        except EXPECTED:
            outcome.counts["calls told an error"] += 1
    return False


def lifecycle_run(seed: int, cycles: int = 2, readers: int = 2, trials: int = 2, rounds: int = 3) -> Outcome:
    """The job deleted and made again `cycles` times, `trials` trials a making, while a compactor and `readers`
    readers each work `rounds` times a making."""
    plan, outcome = random.Random(f"plan-{seed}"), Outcome("lifecycle", seed)
    scheduler = Scheduler(seed, LIFE_MIXES[seed % 3])
    end_deleted = plan.random() < 0.5
    acked: dict[int, set[str]] = {0: set()}  # per making, the trials its owner was told finished
    reads: list[tuple[int, dict[int, str]]] = []  # each read answered: the last making deleted as it began, and
    # trial number -> recurrence id
    owner_did = {"making": 0, "all": False, "deleted": -1}  # the making it last made (None: deleted), whether every
    # call was answered, the last making whose delete returned

    def owner(backend: Backend) -> None:
        store = Store(backend)
        for making in range(1, cycles + 1):
            if not _answered(lambda: _delete(store), outcome):
                return
            owner_did["making"], owner_did["deleted"] = None, making - 1
            outcome.counts["deletes"] += 1
            if making == cycles and end_deleted:
                break
            if not _answered(lambda: store.ensure_job(SPEC), outcome):
                return
            owner_did["making"], acked[making] = making, set()
            if not _trials(store, making, trials, acked[making], outcome):
                return
        owner_did["all"] = True

    def compactor(backend: Backend) -> None:
        store = Store(backend)
        for _ in range(rounds * cycles):
            try:
                outcome.counts["snapshots written"] += store.compact(JOB).written is not None
            except EXPECTED:
                outcome.counts["calls told an error"] += 1

    def reader(keep: bool) -> Callable[[Backend], None]:
        def body(backend: Backend) -> None:
            store = Store(backend)
            for _ in range(rounds * cycles):
                floor = owner_did["deleted"]
                try:
                    frame = (store if keep else Store(backend)).trials(JOB)
                except EXPECTED:
                    outcome.counts["reads told an error"] += 1
                    continue
                reads.append((floor, dict(zip(frame["trial"].tolist(), frame["recurrence_id"].tolist(), strict=True))))
                outcome.counts["reads answered"] += 1

        return body

    workers = [owner, compactor] + [reader(plan.random() < 0.5) for _ in range(readers)]
    with deterministic(seed), warnings.catch_warnings(), _quiet(logging.getLogger("zeus_kfp.store")):
        warnings.simplefilter("ignore", StoreWarning)  # problems a read reports are counted, not failures
        setup = Store(scheduler.memory)
        setup.ensure_job(SPEC)
        _trials(setup, 0, 2, acked[0], outcome)
        if plan.random() < 0.5:
            setup.compact(JOB)
        scheduler.run(workers)
        scheduler.land_late()
        final_making = owner_did["making"] if owner_did["all"] else None
        try:
            if final_making is None:
                if not owner_did["all"] or scheduler.counts["crashes"]:  # cut short: deleted again, as a person would
                    outcome.counts["deleted after the run"] += _delete_after(scheduler.memory)
                final: dict[str, list] = {"left": scheduler.memory.list(keys.job_dir(JOB))}
                again = Store(scheduler.memory)
                again.ensure_job(SPEC)  # the id can be made again
                final["shown"] = again.trials(JOB)["recurrence_id"].tolist()
            else:
                Store(scheduler.memory).compact(JOB)
                shown = Store(scheduler.memory).trials(JOB)
                final = {"shown": list(zip(shown["recurrence_id"], shown["status"], strict=True))}
        except Exception as exc:  # any error here is the store's: reported with the seed
            return _failed_after(outcome, scheduler, exc)
    outcome.counts["runs"] += 1
    outcome.violations += _violations(reads, final_making, acked, final)
    return _finish(outcome, scheduler)


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """The store's log lines held back for the run: a job deleted under its readers makes many, all expected."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _delete(store: Store) -> None:
    with contextlib.suppress(UnknownJobError):  # an earlier try, told an error, had removed it all
        store.delete_job(JOB)


def _delete_after(memory: Backend) -> int:
    """The job deleted once more after the run (its owner's last step was a delete, or it was cut short)."""
    try:
        Store(memory).delete_job(JOB)
        return 1
    except UnknownJobError:
        return 0


def _violations(
    reads: list[tuple[int, dict[int, str]]], final_making: int | None, acked: dict[int, set[str]], final: dict
) -> list[str]:
    found = []
    numbered: dict[tuple[str, int], str] = {}
    for n, (floor, read) in enumerate(reads):
        makings = {rid.split("-")[0] for rid in read.values()}
        if len(makings) > 1:
            found.append(f"read {n} shows trials of several makings of the job: {sorted(read.items())}")
            continue
        if makings and int(next(iter(makings))[1:]) <= floor:
            found.append(f"read {n}, begun once making {floor} was deleted, shows {sorted(read.items())}")
        for trial, rid in read.items():
            making = rid.split("-")[0]
            if numbered.setdefault((making, trial), rid) != rid:
                found.append(
                    f"read {n}: trial {trial} of making {making} is {rid}, another read's {numbered[(making, trial)]}"
                )
    if final_making is None:
        if final["left"]:
            found.append(f"deleting the job left {final['left'][:4]}")
        if final["shown"]:
            found.append(f"the job made again after the run shows trials: {final['shown']}")
        return found
    shown = final["shown"]
    wrong = [rid for rid, _status in shown if not rid.startswith(f"m{final_making}-")]
    if wrong:
        found.append(f"the job's making {final_making} shows another making's trials: {wrong}")
    missing = sorted(acked.get(final_making, set()) - {rid for rid, status in shown if status == "reached"})
    if missing:
        found.append(f"trials of making {final_making} its owner was told finished are not shown reached: {missing}")
    return found
