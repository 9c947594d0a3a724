"""Parquet schemas of the store's tables, and the one place objects are encoded and checked.

Each object carries its table name and schema version in the Parquet metadata. A reader
refuses a newer version (rows it does not understand must not be half-read) and reports an
object that is not Parquet or lacks the columns, by key and reason, instead of failing deep
inside pandas.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zeus.store.errors import CorruptObjectError

SCHEMA_VERSION = 1
META_TABLE = b"zeus.table"
META_VERSION = b"zeus.schema_version"
EVENT_COLUMN = "_event"  # in snapshots: the name of the event object each row came from

TS = pa.timestamp("us", tz="UTC")
# Columns added after a table's first version: objects written before them read back with nulls.
ADDED_COLUMNS = frozenset({("finished", "source")})
# When an event was written, not what it says: ignored when deciding whether two writes are the same.
TIMESTAMP_COLUMNS = frozenset({"created_at", "started_at", "ended_at", "written_at", "at"})


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype) for name, dtype in fields])


TRIAL_KEY_FIELDS = (("job_id", pa.string()), ("recurrence_id", pa.string()), ("attempt", pa.int64()))

SCHEMAS: dict[str, pa.Schema] = {
    "jobs": _schema(("job_id", pa.string()), ("owner", pa.string()), ("created_at", TS), ("spec_json", pa.string())),
    "phases": _schema(("job_id", pa.string()), ("phase", pa.string()), ("at", TS)),
    "dispatched": _schema(
        *TRIAL_KEY_FIELDS,
        ("recurrence", pa.int64()),
        ("trial", pa.int64()),
        ("batch_size", pa.int64()),
        ("cost_threshold", pa.float64()),
        ("stage", pa.string()),
        ("decision_reason", pa.string()),
        ("kfp_run_id", pa.string()),
        ("started_at", TS),
    ),
    "finished": _schema(
        *TRIAL_KEY_FIELDS,
        ("batch_size", pa.int64()),
        ("status", pa.string()),
        ("reached", pa.bool_()),
        ("time_s", pa.float64()),
        ("energy_j", pa.float64()),
        ("cost", pa.float64()),
        ("num_epochs", pa.int64()),
        ("power_limit_w", pa.float64()),
        ("metric", pa.float64()),
        ("simulated", pa.bool_()),
        ("reason", pa.string()),
        ("ended_at", TS),
        ("source", pa.string()),
    ),
    "profiles": _schema(
        *TRIAL_KEY_FIELDS,
        ("recurrence", pa.int64()),
        ("trial", pa.int64()),
        ("batch_size", pa.int64()),
        ("phase", pa.string()),
        ("power_limit_w", pa.float64()),
        ("average_power_w", pa.float64()),
        ("throughput", pa.float64()),
        ("simulated", pa.bool_()),
    ),
    "bandit": _schema(
        *TRIAL_KEY_FIELDS,
        ("recurrence", pa.int64()),
        ("trial", pa.int64()),
        ("written_at", TS),
        ("batch_size", pa.int64()),
        ("stage", pa.string()),
        ("num_observations", pa.int64()),
        ("posterior_mean", pa.float64()),
        ("posterior_precision", pa.float64()),
        ("pruned", pa.bool_()),
        ("lowest_cost", pa.float64()),
    ),
}


def comparable_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as compared for "same event": without the timestamps of when they were written."""
    return [{k: v for k, v in row.items() if k not in TIMESTAMP_COLUMNS} for row in rows]


class NewerSchemaError(CorruptObjectError):
    """Written by a newer zeus-kfp. Refused, not skipped: skipping would silently drop its rows."""


def snapshot_schema(table: str) -> pa.Schema:
    return SCHEMAS[table].append(pa.field(EVENT_COLUMN, pa.string()))


def encode(table: str, data: list[dict[str, Any]] | pa.Table, *, snapshot: bool = False) -> bytes:
    schema = snapshot_schema(table) if snapshot else SCHEMAS[table]
    schema = schema.with_metadata({META_TABLE: table.encode(), META_VERSION: str(SCHEMA_VERSION).encode()})
    if isinstance(data, pa.Table):
        arrow = data.select(schema.names).cast(schema)
    else:
        arrow = pa.Table.from_pylist(data, schema=schema)
    sink = io.BytesIO()
    pq.write_table(arrow, sink, compression="zstd")
    return sink.getvalue()


def decode(key: str, data: bytes, table: str, *, snapshot: bool = False) -> pa.Table:
    """Parse and check one object. Raises CorruptObjectError (or NewerSchemaError) naming the key."""
    try:
        arrow = pq.ParquetFile(pa.BufferReader(data)).read()  # ~2x lighter than read_table for small objects
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptObjectError(key, f"not a Parquet file ({str(exc)[:120]})") from None
    meta = arrow.schema.metadata or {}
    found = meta.get(META_TABLE, b"").decode(errors="replace")
    if found != table:
        raise CorruptObjectError(key, f"wrong schema: table {found or '<none>'!r}, expected {table!r}")
    version_raw = meta.get(META_VERSION, b"").decode(errors="replace")
    if not version_raw.isdigit():
        raise CorruptObjectError(key, f"wrong schema: no schema version (got {version_raw!r})")
    if int(version_raw) > SCHEMA_VERSION:
        raise NewerSchemaError(
            key, f"schema version {version_raw} is newer than this zeus-kfp reads ({SCHEMA_VERSION}); upgrade zeus-kfp"
        )
    expected = snapshot_schema(table) if snapshot else SCHEMAS[table]
    for name in expected.names:
        if (table, name) in ADDED_COLUMNS and name not in arrow.column_names:
            arrow = arrow.append_column(
                pa.field(name, expected.field(name).type), pa.nulls(len(arrow), expected.field(name).type)
            )
    missing = [name for name in expected.names if name not in arrow.column_names]
    if missing:
        raise CorruptObjectError(key, f"wrong schema: missing columns {missing}")
    try:
        return arrow.select(expected.names).cast(expected)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise CorruptObjectError(key, f"wrong schema: {str(exc)[:160]}") from None
