"""One value per register, agreed with nothing but PUT, GET and LIST: Disk Paxos on an object store.

The proposer's steps, the safety argument and what the object store must guarantee are docs/STORE.md,
"Registers" and "What the object store must guarantee". Why not `If-None-Match`: SeaweedFS (Kubeflow 1.11)
checks then writes without a lock, MinIO 2019 (Kubeflow 1.10) ignores it, and a Kubernetes Lease would not be
there for `zeus-kfp run` on a laptop nor in kfp.local. Disk Paxos (Gafni and Lamport, 2003) needs none: each
process writes only blocks of its own and reads everyone's. Why a proposer that lost waits instead of
outbidding: two proposers outbidding each other for ever is Paxos's one failure to progress.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass

from zeus_kfp.store import keys
from zeus_kfp.store.backend import Backend, ObjectNotFound
from zeus_kfp.store.errors import CorruptObjectError, StoreError

MAX_ROUNDS = 40
BACKOFF_S = 0.002  # the least pause after losing a round (else about a round's time); doubles up to BACKOFF_MAX_S
BACKOFF_MAX_S = 0.5
WAITS_PER_ROUND = 8  # listenings for a moving top ballot before outbidding it anyway


@dataclass(frozen=True, order=True)
class Block:
    round: int
    token: str
    phase: int
    key: str = ""
    checksum: str = ""


@dataclass(frozen=True)
class Register:
    """What one LIST of a register folder shows."""

    blocks: tuple[Block, ...]
    values: tuple[str, ...]  # keys of decided values (one, or none)

    @property
    def top(self) -> tuple[int, str]:
        return max(((b.round, b.token) for b in self.blocks), default=(0, ""))

    def above(self, ballot: tuple[int, str]) -> bool:
        return self.top > ballot

    def accepted(self) -> Block | None:
        """The phase-2 block of the highest ballot: the value a new proposer must carry on."""
        return max((b for b in self.blocks if b.phase == 2), default=None)


def parse(directory: str, listed: list[str]) -> Register:
    """The register in `directory` from the keys a listing returned (foreign keys are ignored)."""
    blocks, values = [], []
    for key in listed:
        name = key[len(directory) :]
        if "/" in name:
            continue
        parts = name.split(".")
        if parts[0] == "v" and len(parts) == 3 and parts[2] == "json" and keys.is_crc(parts[1]):
            values.append(key)
        elif parts[0] == "b" and len(parts) >= 4 and parts[1].isdigit():
            if parts[3] == "1" and len(parts) == 4:
                blocks.append(Block(int(parts[1]), parts[2], 1, key))
            elif parts[3] == "2" and len(parts) == 6 and parts[5] == "json" and keys.is_crc(parts[4]):
                blocks.append(Block(int(parts[1]), parts[2], 2, key, parts[4]))
    return Register(tuple(blocks), tuple(values))


def _read(backend: Backend, directory: str) -> Register:
    return parse(directory, backend.list(directory))


def value_checksum(key: str) -> str:
    """The checksum a decided value's key (`v.{crc}.json`) names."""
    return key.rsplit(".", 2)[-2]


def checked(key: str, data: bytes) -> bytes:
    """A value's bytes (`v.{crc}.json`), checked against the checksum its key names."""
    return keys.verified(key, data, value_checksum(key))


def decided(backend: Backend, key: str) -> bytes:
    """A decided value's bytes, fetched and checked."""
    return checked(key, backend.get(key))


def copy_of_value(backend: Backend, register: Register) -> bytes | None:
    """The decided value's bytes from its other copy: a phase-2 block with the checksum the `v.*` key names
    (a proposer PUTs its phase-2 block before the value it decided), for a `v.*` gone when fetched or damaged;
    None if no copy can be read either."""
    checksum = value_checksum(register.values[0])
    for block in sorted((b for b in register.blocks if b.phase == 2 and b.checksum == checksum), reverse=True):
        try:
            return keys.verified(block.key, backend.get(block.key), block.checksum)
        except (ObjectNotFound, CorruptObjectError):
            continue
    return None


def _value_of(backend: Backend, register: Register) -> bytes | None:
    if not register.values:
        return None
    if len({keys.basename(k) for k in register.values}) > 1:
        raise CorruptObjectError(register.values[0], f"the register holds {len(register.values)} different values")
    try:
        return decided(backend, register.values[0])
    except (ObjectNotFound, CorruptObjectError) as exc:
        copy = copy_of_value(backend, register)
        if copy is None:
            reason = exc.reason if isinstance(exc, CorruptObjectError) else "listed, then gone when fetched"
            raise CorruptObjectError(register.values[0], f"{reason}, and no copy of it can be read") from None
        return copy


def _accepted_value(backend: Backend, block: Block) -> bytes:
    return keys.verified(block.key, backend.get(block.key), block.checksum)


def _wait_for_progress(backend: Backend, directory: str, register: Register, round_s: float, tries: int) -> Register:
    """After losing a round to a higher ballot: let its proposer finish instead of outbidding it (two
    proposers that outbid each other forever is Paxos's one failure to progress). Listen while the top
    ballot keeps moving or a value appears; start a new round only once it has stood still for a pause
    of about one round (its proposer may be dead), jittered and growing with the rounds lost."""
    for _ in range(WAITS_PER_ROUND):
        time.sleep(random.uniform(0.5, 1.5) * min(max(round_s, BACKOFF_S) * 2**tries, BACKOFF_MAX_S))
        now = _read(backend, directory)
        if now.values or now.top == register.top:
            return now
        register = now
    return register


def propose(
    backend: Backend, directory: str, value: bytes | None, *, yield_to_others: bool = False, fresh: bool = False
) -> bytes | None:
    """The register's value: `value` if this call got it decided, else the value decided before or meanwhile.

    `value=None` only learns: it completes what others began and returns None if no one ever proposed.
    `yield_to_others`: return None as soon as another proposer shows (an appender then tries the next slot).
    `fresh`: the caller just listed the register empty, so its first round needs no listing of its own
    (safety never rests on that listing: a proposer found after phase 1 is handled as any other).
    """
    token = uuid.uuid4().hex[:16]
    register = Register((), ()) if fresh else _read(backend, directory)
    for tries in range(MAX_ROUNDS):
        found = _value_of(backend, register)
        if found is not None:
            return found
        if yield_to_others and register.blocks:
            return None
        if value is None and not register.blocks:
            return None
        ballot = (register.top[0] + 1, token)
        started = time.monotonic()
        outcome = _round(backend, directory, ballot, value)
        if isinstance(outcome, bytes) or outcome is None:
            return outcome
        if yield_to_others and not outcome.values:
            return None
        register = _wait_for_progress(backend, directory, outcome, time.monotonic() - started, tries)
    raise StoreError(f"no agreement on {directory} in {backend.location} after {MAX_ROUNDS} rounds (too many writers?)")


def _round(backend: Backend, directory: str, ballot: tuple[int, str], value: bytes | None) -> bytes | Register | None:
    """One ballot: the decided value, None (learning, and nothing was ever accepted), or the register
    as last listed when a higher ballot showed (the caller backs off or yields)."""
    round_, token = ballot
    backend.put(f"{directory}b.{round_:06d}.{token}.1", b"")
    register = _read(backend, directory)
    if register.values or register.above(ballot):
        return register
    accepted = register.accepted()
    try:
        chosen = _accepted_value(backend, accepted) if accepted is not None else value
    except ObjectNotFound:  # deleted behind the store's back: the listing is stale, list again
        return _read(backend, directory)
    if chosen is None:
        return None
    checksum = keys.crc(chosen)
    backend.put(f"{directory}b.{round_:06d}.{token}.2.{checksum}.json", chosen)
    register = _read(backend, directory)
    if register.values or register.above(ballot):
        return register
    backend.put(f"{directory}v.{checksum}.json", chosen)
    return chosen


def value_key(directory: str, data: bytes) -> str:
    """Where a decided value with these bytes lies (what error messages name it by)."""
    return f"{directory}v.{keys.crc(data)}.json"
