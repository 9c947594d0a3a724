"""Real store code under a seeded scheduler: every interleaving of requests reproducible from one number.

Why: the store's safety (consensus.py, log.py) rests on orders of requests that real runs meet rarely
and never twice the same way, so a race found there cannot be replayed. Here each worker is a thread
running the store's own code (consensus.propose, log.append, Store), and each of its requests blocks
until the scheduler, driven by `random.Random(seed)`, picks it. The scheduler picks only once every live
worker is blocked at a request or has finished, so one thread runs at a time and the run is a function
of its seed: the same seed replays the same run, whatever the machine's load.

Faults stay inside what the store says it trusts (backend.py: a LIST that starts after a PUT was
answered lists it; a GET returns the bytes PUT), since a protocol is only wrong if it fails within
them: a lost answer (the PUT applied, its caller told StoreUnavailableError), a late PUT (its caller
told an error, the PUT landing at a later scheduling point, or after the run), a failed GET or LIST
(an error, nothing applied), a slow LIST (it spans other requests: it shows every key there when it
began and any of those that landed meanwhile), and a crash (the worker dies at a request, before it
or just after a PUT applied). No delete is injected (compaction's own deletes of superseded
snapshots run as asked): the store never needs one to stay correct.

The protocol's own time, randomness and tokens come from the seed too (`deterministic`); sleeps are
no-ops, since here waiting is the scheduler's choice. Nothing else of the store is touched.
"""

from __future__ import annotations

import hashlib
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from zeus_kfp.store import consensus, entries, log
from zeus_kfp.store.backend import Backend, ObjectNotFound
from zeus_kfp.store.errors import StoreUnavailableError

HANG_GUARD_S = 120.0  # only a worker blocked outside the store's requests waits this long: a bug of the checker


class MemoryBackend:
    """Objects in a dict: the store's Backend, with read-after-write by construction."""

    uri = "memory://checker"
    location = "memory (the interleaving checker)"
    parallel = 1  # get_many then fetches in the calling thread, where the scheduler sees each request

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def get(self, key: str) -> bytes:
        try:
            return self.objects[key]
        except KeyError:
            raise ObjectNotFound(key) from None

    def put(self, key: str, data: bytes) -> None:
        self.objects[key] = bytes(data)

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        return sorted(k for k in self.objects if k.startswith(prefix) and (start_after is None or k > start_after))

    def list_dirs(self, prefix: str) -> list[str]:
        rests = (k[len(prefix) :] for k in self.objects if k.startswith(prefix))
        return sorted({prefix + rest.split("/", 1)[0] + "/" for rest in rests if "/" in rest})

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)


@dataclass(frozen=True)
class Faults:
    """The chance of each fault per request (crash: per request of a worker; land: per scheduling step)."""

    lost_answer: float = 0.0  # a PUT applied, its caller told StoreUnavailableError
    late_put: float = 0.0  # a PUT answered with an error that lands later
    failed_read: float = 0.0  # a GET or LIST answered with an error, nothing applied
    slow_list: float = 0.0  # a LIST that spans other requests
    crash: float = 0.0  # the worker dies at this request
    land: float = 0.2  # a late PUT lands at this scheduling step

    @property
    def any(self) -> bool:
        return any((self.lost_answer, self.late_put, self.failed_read, self.slow_list, self.crash))


class Crash(BaseException):
    """Raised in a worker at the request it dies at. A BaseException, so no `except Exception` of the store
    catches it: the worker's code stops there, as a killed process does."""


@dataclass
class _Call:
    worker: int
    op: str
    args: tuple
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    began: frozenset[str] | None = None  # a slow LIST: the keys listed when it began


class Scheduled:
    """The backend a worker sees: each request waits for the scheduler to run it."""

    def __init__(self, scheduler: Scheduler, worker: int) -> None:
        self.scheduler, self.worker = scheduler, worker
        self.uri, self.location, self.parallel = scheduler.memory.uri, scheduler.memory.location, 1

    def get(self, key: str) -> bytes:
        return self.scheduler.request(self.worker, "get", (key,))

    def put(self, key: str, data: bytes) -> None:
        self.scheduler.request(self.worker, "put", (key, bytes(data)))

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        return self.scheduler.request(self.worker, "list", (prefix, start_after))

    def list_dirs(self, prefix: str) -> list[str]:
        return self.scheduler.request(self.worker, "list_dirs", (prefix,))

    def delete(self, key: str) -> None:
        self.scheduler.request(self.worker, "delete", (key,))


def unavailable(why: str) -> StoreUnavailableError:
    return StoreUnavailableError("memory", "checker", 1, f"injected: {why}")


class Scheduler:
    """Runs workers one request at a time, in an order drawn from `seed`, injecting `faults`.

    `counts` tallies requests by kind and faults by kind; `puts` keeps every PUT asked for, by worker (a
    checker tells from it who proposed what where); `late` the PUTs not landed yet when the run ended;
    `errors` the exceptions a worker's body let out (other than a Crash); `digest` the run's fingerprint.
    """

    def __init__(self, seed: int, faults: Faults, memory: MemoryBackend | None = None) -> None:
        self.rng = random.Random(f"schedule-{seed}")
        self.faults = faults
        self.memory = memory or MemoryBackend()
        self.counts: Counter[str] = Counter()
        self.puts: list[tuple[int, str, bytes]] = []
        self.late: list[tuple[str, bytes]] = []
        self.errors: dict[int, BaseException] = {}
        self._trace = hashlib.sha256()
        self._cond = threading.Condition()
        self._pending: dict[int, _Call] = {}
        self._live: set[int] = set()
        self._dead: set[int] = set()

    @property
    def digest(self) -> str:
        return self._trace.hexdigest()[:16]

    def backend(self, worker: int) -> Backend:
        return Scheduled(self, worker)

    def request(self, worker: int, op: str, args: tuple) -> Any:
        with self._cond:
            if worker in self._dead:
                raise Crash
            call = _Call(worker, op, args)
            self._pending[worker] = call
            self._cond.notify_all()
            self._cond.wait_for(lambda: call.done)
        if call.error is not None:
            raise call.error
        return call.result

    def run(self, bodies: Sequence[Callable[[Backend], None]]) -> None:
        """Run each body in a worker thread of its own (worker i gets backend(i)) until every one ends."""
        threads = [threading.Thread(target=self._work, args=(i, body), daemon=True) for i, body in enumerate(bodies)]
        with self._cond:
            self._live.update(range(len(bodies)))
        for thread in threads:
            thread.start()
        with self._cond:
            while True:
                if not self._cond.wait_for(lambda: self._live <= set(self._pending), timeout=HANG_GUARD_S):
                    raise RuntimeError(f"workers {sorted(self._live - set(self._pending))} blocked outside a request")
                if not self._live:
                    break
                self._step()
        for thread in threads:
            thread.join()

    def land_late(self, count: int | None = None) -> None:
        """Land `count` of the late PUTs still in flight (all by default), in an order drawn from the seed."""
        for _ in range(len(self.late) if count is None else min(count, len(self.late))):
            key, data = self.late.pop(self.rng.randrange(len(self.late)))
            self.memory.put(key, data)
            self.counts["late PUTs landed"] += 1

    def _work(self, worker: int, body: Callable[[Backend], None]) -> None:
        try:
            body(self.backend(worker))
        except Crash:
            pass
        except BaseException as exc:  # reported by the checker as a violation, with its seed
            self.errors[worker] = exc
        finally:
            with self._cond:
                self._live.discard(worker)
                self._pending.pop(worker, None)
                self._cond.notify_all()

    def _step(self) -> None:
        if self.late and self.rng.random() < self.faults.land:
            self.land_late(1)
        worker = self.rng.choice(sorted(self._pending))
        call = self._pending.pop(worker)
        self._trace.update(f"{worker} {call.op} {call.args[0]}\n".encode())
        if self._execute(call):
            call.done = True
            self._cond.notify_all()
        else:
            self._pending[worker] = call  # a slow LIST that began: it ends at a later step

    def _execute(self, call: _Call) -> bool:
        """Run (or fault) one request; False for a slow LIST that only began."""
        op, faults, draw = call.op, self.faults, self.rng.random()
        if call.began is not None:  # a slow LIST ends: what was there when it began, and any of what landed since
            now = self.memory.list(*call.args)
            call.result = sorted(call.began | {k for k in now if k not in call.began and self.rng.random() < 0.5})
            return True
        self.counts[f"{op} requests"] += 1
        if draw < faults.crash:
            self._dead.add(call.worker)
            self.counts["crashes"] += 1
            if op == "put":
                self.puts.append((call.worker, *call.args))
                if self.rng.random() < 0.5:  # killed after its PUT applied, before it heard the answer
                    self.memory.put(*call.args)
            call.error = Crash()
            return True
        draw -= faults.crash
        if op == "put":
            self.puts.append((call.worker, *call.args))
            if draw < faults.lost_answer:
                self.memory.put(*call.args)
                self.counts["lost answers"] += 1
                call.error = unavailable("the PUT applied, its answer lost")
            elif draw < faults.lost_answer + faults.late_put:
                self.late.append(call.args)
                self.counts["late PUTs"] += 1
                call.error = unavailable("the PUT timed out (it lands later)")
            else:
                self.memory.put(*call.args)
            return True
        if op in ("get", "list", "list_dirs") and draw < faults.failed_read:
            self.counts[f"failed {op}s"] += 1
            call.error = unavailable(f"the {op.upper()} failed")
            return True
        if op == "list" and draw < faults.failed_read + faults.slow_list:
            self.counts["slow lists"] += 1
            call.began = frozenset(self.memory.list(*call.args))
            return False
        try:
            call.result = getattr(self.memory, op)(*call.args)
        except ObjectNotFound as exc:
            call.error = exc
        return True


class _Time:
    """The protocol's clock: sleeps are no-ops (here waiting is the scheduler's choice), time moves by a tick
    a reading, so nothing depends on the machine's speed."""

    def __init__(self) -> None:
        self._ns = 1_800_000_000 * 10**9

    def sleep(self, _seconds: float) -> None:
        return None

    def time_ns(self) -> int:
        self._ns += 1000
        return self._ns

    def monotonic(self) -> float:
        return self.time_ns() / 1e9


class _Uuid:
    """uuid4 from the seed: Paxos tokens (and so ballot order between equal rounds) replay with the run."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """The store's time, random and uuid modules, as consensus, log and entries see them, replaced by ones drawn
    from `seed` for the duration (restored after; the protocol's logic is untouched)."""
    rng = random.Random(f"protocol-{seed}")
    clock = _Time()
    patches = [(consensus, "time", clock), (consensus, "random", rng), (consensus, "uuid", _Uuid(rng)),
               (log, "time", clock), (log, "random", rng), (entries, "time", clock)]  # fmt: skip
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, value in patches:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
