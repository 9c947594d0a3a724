"""The object-key layout, in one place. Every key the store reads or writes is built here.

Keys are relative to the store's root (a directory or `s3://bucket/prefix`). Identifiers are
validated before they become key segments, so no job or recurrence id can leave its prefix
(no '/', no '..', no '.': '.' separates fields inside a file name).

    catalog/specs/{job}.parquet                         jobs table: the spec, owner, created_at (first wins)
    catalog/phases/{job}.{ns}.{phase}.{rand}.parquet    phase events (latest wins)
    jobs/{job}/seq/{recurrence|trial}/{n // 1000}/{n}   number claims (never deleted)
    jobs/{job}/recurrence-ids/{rid}                     recurrence id -> number (first wins, JSON)
    jobs/{job}/imported/manifest                        what bulk import stored (JSON; once per job)
    jobs/{job}/imported/{stream}.parquet                the imported rows (never deleted: snapshots are caches)
    jobs/{job}/records/{stream}/{rid}.{attempt}.parquet the trial's event in that stream (first wins, never deleted)
    jobs/{job}/events/{stream}/{rid}.{attempt}          an empty hint: "this record may be newer than the snapshot"
    jobs/{job}/snapshots/{stream}/{g}.{token}.parquet   compacted records (generation g, written by one compactor)
    jobs/{job}/marks/{stream}/{g // 1000}/{g}           the commit of generation g: which snapshot, rows, checksum
    jobs/{job}/compacting/{stream}/{g}                  a compactor's lease on committing generation g (advisory)
    jobs/{job}/handoff/{rid}.{attempt}/{run}/{file}     files a cluster trial's pods hand to the train step
    jobs/{job}/tensorboard/{name}                       TensorBoard event files, one per recurrence (first wins)
    jobs/{job}/tally/{n}.{token}.json                   the policy's kept fold over n trials (a cache, JSON)

Every key above except the phase events is written with an exclusive create (`put_new`):
"first wins" means a second, different write is refused and reported, never applied.
Records, claims and marks are never deleted, so an exclusive create on them decides once and
for all; hints and old snapshots are what compaction deletes (see streams.py). Tallies are a
cache (zeus.store.tallies): the newest is read, older ones are deleted by whoever writes a newer.
Leases only spare work (zeus.store.leases): their holder deletes them.
"""

from __future__ import annotations

import re

from zeus.job import JOB_ID_ALLOWED, JOB_ID_PATTERN
from zeus.store.errors import StoreInputError

RECURRENCE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")  # used with fullmatch: no "$" newline
RECURRENCE_ID_ALLOWED = "1-128 letters, digits, '_' or '-', starting with a letter or digit (a KFP run id)"
MAX_ATTEMPT = 9999
STREAMS = ("dispatched", "finished", "profiles", "bandit")
SEQ_WIDTH = 12


def check_job_id(job_id: object) -> str:
    if not isinstance(job_id, str) or not JOB_ID_PATTERN.fullmatch(job_id):
        raise StoreInputError("job_id", job_id, JOB_ID_ALLOWED)
    return job_id


def check_recurrence_id(recurrence_id: object) -> str:
    if not isinstance(recurrence_id, str) or not RECURRENCE_ID_PATTERN.fullmatch(recurrence_id):
        raise StoreInputError("recurrence_id", recurrence_id, RECURRENCE_ID_ALLOWED)
    return recurrence_id


def check_attempt(attempt: object) -> int:
    if not isinstance(attempt, int) or isinstance(attempt, bool) or not 1 <= attempt <= MAX_ATTEMPT:
        raise StoreInputError("attempt", attempt, f"an integer from 1 to {MAX_ATTEMPT}")
    return attempt


SPECS_DIR = "catalog/specs/"
PHASES_DIR = "catalog/phases/"
JOBS_DIR = "jobs/"


def job_dir(job_id: str) -> str:
    """Everything of one job but its catalog entries."""
    return f"{JOBS_DIR}{check_job_id(job_id)}/"


def spec_key(job_id: str) -> str:
    return f"{SPECS_DIR}{check_job_id(job_id)}.parquet"


def phase_key(job_id: str, at_ns: int, phase: str, rand: str) -> str:
    return f"{PHASES_DIR}{check_job_id(job_id)}.{at_ns:020d}.{phase}.{rand}.parquet"


def parse_phase_key(key: str) -> tuple[str, int, str] | None:
    """(job_id, at_ns, phase) from a phase key, or None for a foreign object."""
    parts = key[len(PHASES_DIR) :].split(".")
    if len(parts) != 5 or parts[-1] != "parquet" or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]


def job_id_of_spec_key(key: str) -> str | None:
    parts = key[len(SPECS_DIR) :].split(".")
    return parts[0] if len(parts) == 2 and parts[-1] == "parquet" else None


def seq_dir(job_id: str, kind: str) -> str:
    return f"{job_dir(job_id)}seq/{kind}/"


SEQ_BUCKET = 1000  # claims per folder: the top claim is found with two small listings, not one of every claim


def numbered_key(directory: str, number: int) -> str:
    """A numbered key (claims, marks), in folders of SEQ_BUCKET: listing order is number order."""
    return f"{directory}{number // SEQ_BUCKET:09d}/{number:0{SEQ_WIDTH}d}"


def seq_key(job_id: str, kind: str, number: int) -> str:
    return numbered_key(seq_dir(job_id, kind), number)


def seq_number(key: str) -> int | None:
    tail = key.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


def recurrence_index_key(job_id: str, recurrence_id: str) -> str:
    return f"{job_dir(job_id)}recurrence-ids/{check_recurrence_id(recurrence_id)}"


def import_key(job_id: str) -> str:
    return f"{job_dir(job_id)}imported/manifest"


def import_table_key(job_id: str, stream: str) -> str:
    assert stream in STREAMS, stream
    return f"{job_dir(job_id)}imported/{stream}.parquet"


def _stream_dir(job_id: str, kind: str, stream: str) -> str:
    assert stream in STREAMS, stream
    return f"{job_dir(job_id)}{kind}/{stream}/"


def events_dir(job_id: str, stream: str) -> str:
    """Where the hints of a stream are (one empty object per record not yet known to be compacted)."""
    return _stream_dir(job_id, "events", stream)


def records_dir(job_id: str, stream: str) -> str:
    return _stream_dir(job_id, "records", stream)


def event_name(recurrence_id: str, attempt: int) -> str:
    """A trial's name within a stream: `_event` in snapshots, the hint's and the record's stem."""
    return f"{check_recurrence_id(recurrence_id)}.{check_attempt(attempt):04d}"


def parse_event_name(name: str) -> tuple[str, int] | None:
    """(recurrence_id, attempt) from an event name, or None for a foreign object."""
    rid, _, attempt = name.rpartition(".")
    if len(attempt) != 4 or not attempt.isdigit() or not RECURRENCE_ID_PATTERN.fullmatch(rid):
        return None
    return (rid, int(attempt)) if 1 <= int(attempt) <= MAX_ATTEMPT else None


def hint_key(job_id: str, stream: str, name: str) -> str:
    return f"{events_dir(job_id, stream)}{name}"


def record_key(job_id: str, stream: str, name: str) -> str:
    return f"{records_dir(job_id, stream)}{name}.parquet"


def event_key(job_id: str, stream: str, recurrence_id: str, attempt: int) -> str:
    """The key that holds a trial's event in a stream (its record)."""
    return record_key(job_id, stream, event_name(recurrence_id, attempt))


def snapshots_dir(job_id: str, stream: str) -> str:
    return _stream_dir(job_id, "snapshots", stream)


def snapshot_key(job_id: str, stream: str, generation: int, token: str) -> str:
    return f"{snapshots_dir(job_id, stream)}{generation:0{SEQ_WIDTH}d}.{token}.parquet"


def snapshot_names_key(snapshot: str) -> str:
    """The names object beside snapshot `snapshot` (snapshots.load_names): the same stem, `.names`."""
    return f"{snapshot.removesuffix('.parquet')}.names"


def snapshot_generation(key: str) -> int | None:
    """The generation of a snapshot object or of its names object (None for anything else)."""
    parts = basename(key).split(".")
    return int(parts[0]) if len(parts) == 3 and parts[2] in ("parquet", "names") and parts[0].isdigit() else None


def marks_dir(job_id: str, stream: str) -> str:
    return _stream_dir(job_id, "marks", stream)


def mark_key(job_id: str, stream: str, generation: int) -> str:
    return numbered_key(marks_dir(job_id, stream), generation)


def leases_dir(job_id: str, stream: str) -> str:
    return _stream_dir(job_id, "compacting", stream)


def lease_key(job_id: str, stream: str, generation: int) -> str:
    return f"{leases_dir(job_id, stream)}{generation:0{SEQ_WIDTH}d}"


def tally_dir(job_id: str) -> str:
    return f"{job_dir(job_id)}tally/"


def tally_key(job_id: str, covers: int, token: str) -> str:
    """A kept fold of the job's history over `covers` trials (the newest sorts last)."""
    return f"{tally_dir(job_id)}{covers:0{SEQ_WIDTH}d}.{token}.json"


TENSORBOARD_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
TENSORBOARD_NAME_ALLOWED = "a file name of letters, digits, '.', '_' or '-' containing 'tfevents' (an event file)"


def tensorboard_dir(job_id: str) -> str:
    """The job's TensorBoard log directory: one run, every recurrence's event file in it."""
    return f"{job_dir(job_id)}tensorboard/"


def tensorboard_key(job_id: str, name: object) -> str:
    if not isinstance(name, str) or not TENSORBOARD_NAME_PATTERN.fullmatch(name) or "tfevents" not in name:
        raise StoreInputError("tensorboard log name", name, TENSORBOARD_NAME_ALLOWED)
    return tensorboard_dir(job_id) + name


def basename(key: str) -> str:
    return key.rsplit("/", 1)[-1]


# A cluster trial (zeus.launch) runs in pods the train step does not share a disk with: rank 0's node
# hands result.json, profile.csv and model.pt back through the store, and the train step hands the pods
# the stored profile to reuse. `run` names one Kubernetes job (a retried step that adopts the job keeps
# its run; one that replaces it gets a new one), so a replaced job never collides with its predecessor.
HANDOFF_FILES = ("result.json", "profile.csv", "model.pt", "reuse_profile.csv")
HANDOFF_RUN_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def handoff_key(job_id: str, recurrence_id: str, attempt: int, run: str, name: str) -> str:
    if not isinstance(run, str) or not HANDOFF_RUN_PATTERN.fullmatch(run):
        raise StoreInputError("run", run, "1-63 lowercase letters, digits or '-', starting with a letter or digit")
    if name not in HANDOFF_FILES:
        raise StoreInputError("name", name, f"one of {', '.join(HANDOFF_FILES)}")
    rid, n = check_recurrence_id(recurrence_id), check_attempt(attempt)
    return f"{job_dir(job_id)}handoff/{rid}.{n:04d}/{run}/{name}"
