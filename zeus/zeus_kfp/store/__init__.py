"""The state store: a job's events as an agreed log of small JSON objects, with Parquet snapshots.

The only module that knows object keys and encodings. It needs object-level GET, PUT and LIST under
its prefix and nothing else (backend.py), and trusts no conditional write: each log slot's entry is
agreed by Disk Paxos over plain objects (consensus.py), so overlapping recurrences get one answer per
attempt on every store Kubeflow ships. store.py has the API, log.py the protocol.
"""

from zeus_kfp.store.errors import (
    CorruptObjectError,
    DeleteRefusedError,
    EventConflictError,
    JobDeletedError,
    JobSpecMismatchError,
    ObjectProblem,
    StoreAccessError,
    StoreAnswerError,
    StoreError,
    StoreInputError,
    StoreUnavailableError,
    StoreWarning,
    UnknownJobError,
    UnknownTrialError,
)
from zeus_kfp.store.frames import JobTrials
from zeus_kfp.store.gating import GateOutcome, GateRequest
from zeus_kfp.store.store import Store, open_store

__all__ = [
    "CorruptObjectError",
    "DeleteRefusedError",
    "EventConflictError",
    "GateOutcome",
    "GateRequest",
    "JobDeletedError",
    "JobSpecMismatchError",
    "JobTrials",
    "ObjectProblem",
    "Store",
    "StoreAccessError",
    "StoreAnswerError",
    "StoreError",
    "StoreInputError",
    "StoreUnavailableError",
    "StoreWarning",
    "UnknownJobError",
    "UnknownTrialError",
    "open_store",
]
