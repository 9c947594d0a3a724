"""The state store: Parquet tables in a local directory or a MinIO/S3 bucket.

The only module that knows object keys and Parquet schemas. Append-only, one object per
event, safe under overlapping recurrences; see store.py for the API and streams.py for why
compaction is safe while others append.
"""

from zeus.store.errors import (
    CorruptObjectError,
    EventConflictError,
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
from zeus.store.schemas import SCHEMA_VERSION, NewerSchemaError
from zeus.store.store import Store, open_store

__all__ = [
    "SCHEMA_VERSION",
    "CorruptObjectError",
    "EventConflictError",
    "JobSpecMismatchError",
    "NewerSchemaError",
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
