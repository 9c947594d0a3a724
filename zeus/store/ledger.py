"""Numbers: recurrence and trial numbers that stay unique and ordered under concurrency.

A number is claimed by creating `seq/{kind}/{n}` exclusively (`put_new`): of two recurrences
that start at the same moment, one gets n and the other, refused, moves on to n+1. Claims
therefore follow the order in which they succeeded. A claim whose owner crashed before
recording it leaves a gap; numbers are unique and ordered, not dense.

Claims are never deleted: a claimer may act on a listing that is already stale, probing
upwards from an old maximum, and must then meet every claim above it (an early version
deleted claims below the compacted top and the 8-process test caught two trials sharing a
number). Claims sit in folders of 1,000, so the top is found with two small listings.

On a server that ignores If-None-Match two claimers could both "get" n: the trials stay
distinct (their event keys are unique per recurrence id and attempt) and readers order
equal numbers by (recurrence_id, attempt), so nothing is lost, only a number shared.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from zeus.store import framing, keys
from zeus.store.backend import Backend, ObjectNotFound
from zeus.store.errors import CorruptObjectError, StoreError, StoreInputError, UnknownTrialError
from zeus.store.schemas import decode_json, encode_json

MAX_CLAIM_TRIES = 10_000
RELIST_EVERY = 8


def top_number(backend: Backend, directory: str, at_least: int = 0) -> int:
    """The highest number under a folder of numbered, bucketed keys (claims, marks): two small listings,
    or one when the caller knows a number that exists (`at_least`: a claim or mark it has read), by
    listing only the keys after it."""
    if at_least > 0:
        above = (
            keys.seq_number(k) for k in backend.list(directory, start_after=keys.numbered_key(directory, at_least))
        )
        return max((n for n in above if n is not None), default=at_least)
    folders = backend.list_dirs(directory)
    for folder in reversed(folders):  # the last folder holds the top number
        numbers = [keys.seq_number(k) for k in backend.list(folder)]
        top = max((n for n in numbers if n is not None), default=0)
        if top:
            return top
    return 0


def _max_claimed(backend: Backend, job_id: str, kind: str, at_least: int = 0) -> int:
    return top_number(backend, keys.seq_dir(job_id, kind), at_least)


def _claimed_by(backend: Backend, key: str, token: str) -> bool:
    try:
        return json.loads(backend.get(key)).get("token") == token
    except (ObjectNotFound, ValueError, AttributeError):
        return False


def claim_number(backend: Backend, job_id: str, kind: str, owner: dict[str, object], claimed: int = 0) -> int:
    """The next free number of this kind for the job, claimed for `owner` (kept in the claim for people).
    `claimed`: a number the caller has seen claimed (0: none), which saves a listing."""
    # The token tells our own claim from a rival's when a create that reached the server is
    # retried after its answer was lost (the retry is refused: the key exists, and it is ours).
    token = uuid.uuid4().hex
    payload = json.dumps(owner | {"token": token}, sort_keys=True).encode()
    number = _max_claimed(backend, job_id, kind, claimed) + 1
    for tries in range(1, MAX_CLAIM_TRIES + 1):
        key = keys.seq_key(job_id, kind, number)
        if backend.put_new(key, payload) or _claimed_by(backend, key, token):
            return number
        number += 1
        if tries % RELIST_EVERY == 0:  # many racers: jump to the current top instead of probing one by one
            number = max(number, _max_claimed(backend, job_id, kind) + 1)
    raise StoreError(f"could not claim a {kind} number for job {job_id!r} in {backend.location}")


def find_recurrence(backend: Backend, job_id: str, recurrence_id: str) -> int | None:
    """The recurrence's number, None if never begun; CorruptObjectError naming the record if unreadable
    (guessing a new number would break "one number per recurrence id")."""
    key = keys.recurrence_index_key(job_id, recurrence_id)
    try:
        data = backend.get(key)
    except ObjectNotFound:
        return None
    record = decode_json(key, data)
    number = record.get("recurrence")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise CorruptObjectError(key, f"recurrence number {number!r} is not a positive integer")
    return number


MANIFEST_KIND = b"import"


@dataclass(frozen=True)
class ImportManifest:
    """What a bulk import stored (zeus.store.bulk): its content's digest, trial count, timestamp, and its
    recurrence ids, newline-separated with one in front (every new recurrence asks whether its id is
    one of them: a search of these bytes, where parsing and checking thousands of ids as JSON took
    about 1 ms)."""

    digest: str
    trials: int
    at: str
    ids: bytes

    def holds(self, recurrence_id: str) -> bool:
        return framing.has_line(self.ids, recurrence_id)


def encode_manifest(digest: str, trials: int, at: str, recurrence_ids: list[str]) -> bytes:
    lines = framing.as_lines(sorted(recurrence_ids))
    head = {"digest": digest, "trials": trials, "at": at, "ids": len(recurrence_ids)}
    return framing.frame_headed(MANIFEST_KIND, head, lines)


def read_manifest(backend: Backend, job_id: str) -> ImportManifest | None:
    """The job's import manifest, None if nothing was imported; CorruptObjectError naming it if unreadable.
    Reads both forms: framed with the ids as lines, and the JSON record of earlier versions."""
    key = keys.import_key(job_id)
    try:
        data = backend.get(key)
    except ObjectNotFound:
        return None
    if not framing.is_framed(MANIFEST_KIND, data):
        record = decode_json(key, data)
        ids = b"\n" + framing.as_lines([str(rid) for rid in record.get("recurrence_ids", [])])
        return ImportManifest(str(record.get("digest")), int(record.get("trials", 0)), str(record.get("at")), ids)
    try:
        head, ids = framing.unframe_lines(MANIFEST_KIND, data, "ids")
        return ImportManifest(str(head["digest"]), int(head["trials"]), str(head["at"]), ids)
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptObjectError(key, f"not a readable import manifest ({str(exc)[:80]})") from None


def begin_recurrence(backend: Backend, job_id: str, recurrence_id: str) -> int:
    """The recurrence's number, claimed on first call; later calls (retried steps) return the same.

    The id -> number record is an exclusive create: of two simultaneous begins of one id, the
    second finds the first's record and returns its number (its own claim stays a gap).
    """
    existing = find_recurrence(backend, job_id, recurrence_id)
    if existing is not None:
        return existing
    manifest = read_manifest(backend, job_id)
    if manifest is not None and manifest.holds(recurrence_id):
        raise StoreInputError(
            "recurrence_id", recurrence_id, "an id the job's imported history does not use (imported ones are closed)"
        )
    number = claim_number(backend, job_id, "recurrence", {"recurrence_id": recurrence_id})
    record = encode_json({"recurrence": number})
    if backend.put_new(keys.recurrence_index_key(job_id, recurrence_id), record):
        return number
    settled = find_recurrence(backend, job_id, recurrence_id)  # a racer's record, or ours if the answer was lost
    assert settled is not None  # the record that refused ours
    return settled


def recurrence_number(backend: Backend, job_id: str, recurrence_id: str) -> int:
    number = find_recurrence(backend, job_id, recurrence_id)
    if number is None:
        raise UnknownTrialError(
            f"recurrence {recurrence_id!r} of job {job_id!r} was never begun: call begin_recurrence first"
        )
    return number
