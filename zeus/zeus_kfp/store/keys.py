"""The object-key layout, in one place: every key the store reads or writes is built or parsed here.

The layout itself, with an example listing, is docs/STORE.md, "Layout". Why one module: identifiers are
validated here before they become key segments, so no job or recurrence id can leave its prefix (the local
backend's path check is only the last line of defence), and a key a parser here does not recognise is
foreign and ignored, never misread. The checksum a key carries is the CRC-32 of the object's exact bytes, so
a listing alone says what each object must hash to.
"""

from __future__ import annotations

import re
import zlib

from zeus_kfp.job import JOB_ID_ALLOWED, JOB_ID_PATTERN
from zeus_kfp.store.errors import CorruptObjectError, StoreInputError

RECURRENCE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")  # used with fullmatch: no "$" newline
RECURRENCE_ID_ALLOWED = "1-128 letters, digits, '_' or '-', starting with a letter or digit (a KFP run id)"
MAX_ATTEMPT = 9999
SLOTS_PER_FOLDER = 1000  # a log read lists the folders after its snapshot, never every slot of the job


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


# -- checksums --------------------------------------------------------------------------------------


def crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def is_crc(text: str) -> bool:
    """Whether a key's part is a checksum as crc() writes it (else the object is foreign: ignored)."""
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def verified(key: str, data: bytes, expected: str) -> bytes:
    """`data`, if it hashes to the checksum its key names; CorruptObjectError naming the key else."""
    if crc(data) != expected:
        raise CorruptObjectError(key, f"checksum {crc(data)} is not the {expected} its key names ({len(data)} bytes)")
    return data


# -- layout -----------------------------------------------------------------------------------------

JOBS_DIR = "jobs/"


def job_dir(job_id: str) -> str:
    return f"{JOBS_DIR}{check_job_id(job_id)}/"


def job_of_dir(folder: str) -> str | None:
    """The job id of a `jobs/{job}/` folder from a listing, None for a foreign folder."""
    name = folder[len(JOBS_DIR) :].rstrip("/")
    return name if JOB_ID_PATTERN.fullmatch(name) else None


def spec_dir(job_id: str) -> str:
    return f"{job_dir(job_id)}spec/"


def log_dir(job_id: str) -> str:
    return f"{job_dir(job_id)}log/"


def slot_dir(job_id: str, slot: int) -> str:
    return f"{log_dir(job_id)}{slot // SLOTS_PER_FOLDER:06d}/{slot:012d}/"


def after_slot(job_id: str, slot: int) -> str | None:
    """The `start_after` that lists only the slots after `slot` (None: every slot)."""
    return f"{slot_dir(job_id, slot)}~" if slot > 0 else None  # '~' sorts after every key in a slot


def slot_of(key: str) -> int | None:
    """The slot number of a key inside a slot folder, None for anything else."""
    parts = key.split("/")
    if len(parts) < 6 or parts[2] != "log" or len(parts[4]) != 12 or not parts[4].isdigit():
        return None
    return int(parts[4])


def snapshots_dir(job_id: str) -> str:
    return f"{job_dir(job_id)}snapshots/"


def snapshot_key(job_id: str, upto: int, checksum: str) -> str:
    return f"{snapshots_dir(job_id)}{upto:012d}.{checksum}.parquet"


def parse_snapshot_key(key: str) -> tuple[int, str] | None:
    """(upto, checksum) of a snapshot key, None for a foreign object."""
    parts = basename(key).split(".")
    if len(parts) != 3 or parts[2] != "parquet" or len(parts[0]) != 12 or not parts[0].isdigit():
        return None
    return int(parts[0]), parts[1]


PHASES = ("running", "completed")


def phases_dir(job_id: str) -> str:
    return f"{job_dir(job_id)}phases/"


def phase_key(job_id: str, at_ns: int, phase: str, rand: str) -> str:
    return f"{phases_dir(job_id)}{at_ns:020d}.{phase}.{rand}"


def phase_of_key(key: str) -> str | None:
    parts = basename(key).split(".")
    return parts[1] if len(parts) == 3 and parts[1] in PHASES and parts[0].isdigit() else None


TENSORBOARD_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
TENSORBOARD_NAME_ALLOWED = "a file name of letters, digits, '.', '_' or '-' containing 'tfevents' (an event file)"


def tensorboard_dir(job_id: str) -> str:
    """The job's TensorBoard log directory: one run, every recurrence's event file in it."""
    return f"{job_dir(job_id)}tensorboard/"


def tensorboard_key(job_id: str, name: object) -> str:
    if not isinstance(name, str) or not TENSORBOARD_NAME_PATTERN.fullmatch(name) or "tfevents" not in name:
        raise StoreInputError("tensorboard log name", name, TENSORBOARD_NAME_ALLOWED)
    return tensorboard_dir(job_id) + name


def drift_key(job_id: str, recurrence_id: str) -> str:
    """Where the summary of a recurrence's input data lies (zeus_kfp.steps.drift_detectors), which its next gate
    compares with."""
    return f"{job_dir(job_id)}drift/{check_recurrence_id(recurrence_id)}.parquet"


def basename(key: str) -> str:
    return key.rsplit("/", 1)[-1]


# A cluster trial (zeus_kfp.launch) runs in pods the train step does not share a disk with: rank 0's node
# hands result.json, profile.parquet and model.pt back through the store, and the train step hands the pods
# the stored profile to reuse. `run` names one Kubernetes job (a retried step that adopts the job keeps
# its run; one that replaces it gets a new one), so a replaced job never collides with its predecessor.
HANDOFF_FILES = ("result.json", "profile.parquet", "model.pt", "reuse_profile.parquet")
HANDOFF_RUN_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def handoff_key(job_id: str, recurrence_id: str, attempt: int, run: str, name: str) -> str:
    if not isinstance(run, str) or not HANDOFF_RUN_PATTERN.fullmatch(run):
        raise StoreInputError("run", run, "1-63 lowercase letters, digits or '-', starting with a letter or digit")
    if name not in HANDOFF_FILES:
        raise StoreInputError("name", name, f"one of {', '.join(HANDOFF_FILES)}")
    rid, n = check_recurrence_id(recurrence_id), check_attempt(attempt)
    return f"{job_dir(job_id)}handoff/{rid}.{n:04d}/{run}/{name}"
