"""Schemas of the store's tables, and the one place objects are encoded and checked.

Two encodings, one per kind of object:
- **Snapshots and bulk imports** (tables people and tools read, up to 10,000s of rows) are Parquet.
  The table name, schema version and a checksum of the content are in the Parquet metadata. The
  checksum is over the decoded columns in a canonical form (values, null masks, string bytes), not
  over the file bytes: Parquet's footer (types, offsets, metadata) is half of a small object, and a
  garble there can decode to different values while the data pages are intact. Hashing what the
  reader actually got catches both.
- **Small tables** (a trial's record, a job's spec, a phase: one row each, written and read on every
  step) are an Arrow IPC stream, framed (framing.py): the CRC-32 of the exact bytes is checked
  before Arrow parses anything, so no garble reaches the parser, and reading one row costs about a
  twentieth of a Parquet read (benchmarks/RESULTS.md, "Small records, folds as bytes, names objects"). Their
  keys keep the `.parquet` suffix of store layout 2: a record's key is the arbiter of its trial
  (streams.py), so renaming it would let a writer of the older version win the same trial again.
  Objects written before this encoding (Parquet) are still read.

A reader refuses a newer schema version (rows it does not understand must not be half-read) and
reports any object that does not decode to exactly what was written (not Parquet or not framed,
wrong columns, garbled bytes, a checksum that does not match), by key and reason, instead of failing
deep inside pyarrow or pandas. Small JSON records (number claims aside) carry a checksum the same way
(`encode_json` / `decode_json`).
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from zeus.profiles import PROFILE_SCHEMA
from zeus.store import framing
from zeus.store.errors import CorruptObjectError

T = TypeVar("T")

SCHEMA_VERSION = 2  # 2: every object carries META_CHECKSUM (version 1 objects are read without one)
META_TABLE = b"zeus.table"
META_VERSION = b"zeus.schema_version"
META_CHECKSUM = b"zeus.checksum"
# A snapshot's `_event` column alone, checksummed on its own: a cursor read whose snapshot is unchanged
# needs only its names (which listed hints it holds), and can check them without decoding every column.
META_NAMES_CHECKSUM = b"zeus.names_checksum"
ROW_GROUP_ROWS = 4096  # snapshots in several row groups: a reader can slice without one huge group
ARROW_KIND = b"arrow"  # the framing kind of a small table (see the module doc)
EVENT_COLUMN = "_event"  # in snapshots: the name of the event object each row came from

TS = pa.timestamp("us", tz="UTC")
# Columns added after a table's first version: objects written before them read back with nulls.
ADDED_COLUMNS = frozenset({("finished", "source")})


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
        *((name, pa.type_for_alias(kind)) for name, kind in PROFILE_SCHEMA),
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


class NewerSchemaError(CorruptObjectError):
    """Written by a newer zeus-kfp. Refused, not skipped: skipping would silently drop its rows."""


def snapshot_schema(table: str) -> pa.Schema:
    return SCHEMAS[table].append(pa.field(EVENT_COLUMN, pa.string()))


class _Crc:
    """CRC-32 over a stream of buffers (zlib: several times faster than a cryptographic hash, see
    benchmarks/RESULTS.md): a checksum against accidental damage, which is all a store's objects need
    (not a signature)."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes | memoryview) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"crc32:{self.value:08x}"


def _column_digest(digest: _Crc, column: pa.ChunkedArray) -> None:
    """Feed one column in a canonical form: its null mask, then its values (nulls as zero/empty)."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if array.null_count:
        digest.update(np.asarray(array.is_valid(), dtype=np.uint8).tobytes())
    else:
        digest.update(b"no nulls")
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        filled = pc.fill_null(array, "").cast(pa.large_string())
        offsets = np.frombuffer(filled.buffers()[1], dtype=np.int64)[filled.offset : filled.offset + len(filled) + 1]
        data = filled.buffers()[2]
        digest.update((offsets - offsets[0]).tobytes() if len(offsets) else b"")
        if data is not None and len(offsets):
            digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    elif pa.types.is_boolean(kind):
        digest.update(np.asarray(pc.fill_null(array, False), dtype=np.uint8).tobytes())
    elif pa.types.is_floating(kind):
        digest.update(np.asarray(pc.fill_null(array.cast(pa.float64()), 0.0)).tobytes())
    else:  # integers and timestamps
        digest.update(np.asarray(pc.fill_null(array.cast(pa.int64()), 0)).tobytes())


def table_checksum(arrow: pa.Table) -> str:
    """A digest of the table's content (column names, rows, values), independent of chunking."""
    digest = _Crc()
    digest.update(f"{arrow.num_rows}:{','.join(arrow.column_names)}".encode())
    for column in arrow.columns:
        _column_digest(digest, column)
    return digest.hexdigest()


def names_checksum(arrow: pa.Table) -> str:
    """The checksum of the `_event` column alone, as a table of its own (see META_NAMES_CHECKSUM)."""
    return table_checksum(arrow.select([EVENT_COLUMN]))


def to_arrow(table: str, data: list[dict[str, Any]] | pa.Table, *, snapshot: bool = False) -> pa.Table:
    """Rows or a table in the stored schema of `table` (column order and types as stored)."""
    schema = snapshot_schema(table) if snapshot else SCHEMAS[table]
    if isinstance(data, pa.Table):
        return data.select(schema.names).cast(schema)
    return pa.Table.from_pylist(data, schema=schema)


def encode(table: str, data: list[dict[str, Any]] | pa.Table, *, snapshot: bool = False) -> bytes:
    """A snapshot as Parquet, any other table as framed Arrow IPC (see the module doc)."""
    arrow = to_arrow(table, data, snapshot=snapshot)
    meta = {META_TABLE: table.encode(), META_VERSION: str(SCHEMA_VERSION).encode()}
    if not snapshot:
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, arrow.schema.with_metadata(meta)) as writer:
            writer.write_table(arrow)
        return framing.frame(ARROW_KIND, sink.getvalue().to_pybytes())
    meta[META_CHECKSUM] = table_checksum(arrow).encode()
    meta[META_NAMES_CHECKSUM] = names_checksum(arrow).encode()
    sink = io.BytesIO()
    pq.write_table(arrow.replace_schema_metadata(meta), sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue()


def decode(key: str, data: bytes, table: str, *, snapshot: bool = False) -> pa.Table:
    """Parse and check one object, in either encoding. Raises CorruptObjectError (or NewerSchemaError)
    naming the key.

    Whatever garbled bytes make pyarrow raise (ArrowInvalid, ArrowNotImplementedError, an
    OSError, a UnicodeDecodeError from metadata, ...) becomes a CorruptObjectError naming the key:
    a reader skips and reports it instead of crashing."""
    if framing.is_framed(ARROW_KIND, data):
        return _readable(key, lambda: _decode_framed(key, data, table, snapshot))
    return _readable(key, lambda: _decode(key, data, table, snapshot))


def _readable(key: str, read: Callable[[], T]) -> T:
    """`read()`, with whatever else than a CorruptObjectError it raises turned into one naming the key."""
    try:
        return read()
    except CorruptObjectError:
        raise
    except Exception as exc:
        raise CorruptObjectError(key, f"not readable ({type(exc).__name__}: {str(exc)[:120]})") from None


def _check_meta(key: str, meta: dict[bytes, bytes], table: str) -> int:
    """The object's schema version, once its metadata says it holds `table` in a version this reads."""
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
    return int(version_raw)


def _decode(key: str, data: bytes, table: str, snapshot: bool) -> pa.Table:
    try:
        # ParquetFile.read is lighter than read_table for small objects, and one thread: a pool costs more
        # than it saves here (benchmarks/RESULTS.md, "Figures behind choices in the code")
        arrow = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptObjectError(key, f"not a Parquet file ({str(exc)[:120]})") from None
    meta = arrow.schema.metadata or {}
    version = _check_meta(key, meta, table)
    arrow = _as_stored(key, arrow, table, snapshot)
    stored_sum = meta.get(META_CHECKSUM)
    if stored_sum is None and version >= 2:
        raise CorruptObjectError(key, "no checksum (a version 2 object always has one)")
    if stored_sum is not None and stored_sum.decode(errors="replace") != table_checksum(arrow):
        raise CorruptObjectError(key, "checksum mismatch: the content is not what was written")
    return arrow.replace_schema_metadata({META_CHECKSUM: stored_sum} if stored_sum is not None else None)


def _decode_framed(key: str, data: bytes, table: str, snapshot: bool) -> pa.Table:
    """A small table `encode` framed: its bytes checked first (framing.unframe), then parsed."""
    try:
        body = framing.unframe(ARROW_KIND, data)
    except ValueError as exc:
        raise CorruptObjectError(key, str(exc)) from None
    arrow = ipc.open_stream(pa.BufferReader(body)).read_all()
    _check_meta(key, arrow.schema.metadata or {}, table)
    return _as_stored(key, arrow, table, snapshot).replace_schema_metadata(None)


def _as_stored(key: str, arrow: pa.Table, table: str, snapshot: bool) -> pa.Table:
    """The table in the schema this version reads: columns added since it was written filled with nulls,
    in the stored order and types; CorruptObjectError when columns are missing or do not convert."""
    expected = snapshot_schema(table) if snapshot else SCHEMAS[table]
    if arrow.schema.equals(expected, check_metadata=False):  # this version's own: ~0.2 ms of a 0.24 ms decode saved
        return arrow
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


def decode_names(key: str, data: bytes, table: str) -> tuple[pa.Array, str] | None:
    """A snapshot's `_event` column alone, checked against its own checksum, and the snapshot's whole-table
    checksum as stored (unverified: the caller compares it with the mark that committed the object).
    None for a snapshot written without a names checksum (read it whole). CorruptObjectError as `decode`."""
    return _readable(key, lambda: _decode_names(key, data, table))


def _decode_names(key: str, data: bytes, table: str) -> tuple[pa.Array, str] | None:
    parquet = pq.ParquetFile(pa.BufferReader(data))
    meta = parquet.schema_arrow.metadata or {}
    _check_meta(key, meta, table)
    stored, whole = meta.get(META_NAMES_CHECKSUM), meta.get(META_CHECKSUM)
    if stored is None or whole is None:
        return None
    arrow = parquet.read(columns=[EVENT_COLUMN], use_threads=False).cast(pa.schema([(EVENT_COLUMN, pa.string())]))
    if stored.decode(errors="replace") != names_checksum(arrow):
        raise CorruptObjectError(key, "checksum mismatch: the snapshot's names are not what was written")
    return arrow.column(EVENT_COLUMN).combine_chunks(), whole.decode(errors="replace")


def verified_checksum(arrow: pa.Table) -> str | None:
    """The checksum `decode` verified for this table (None for an old object without one)."""
    value = (arrow.schema.metadata or {}).get(META_CHECKSUM)
    return value.decode() if value is not None else None


def encode_json(record: dict[str, Any]) -> bytes:
    """A small JSON record with a checksum of its fields, for the store's non-tabular objects."""
    body = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return json.dumps({"record": record, "sum": hashlib.blake2b(body.encode(), digest_size=16).hexdigest()}).encode()


def decode_json(key: str, data: bytes) -> dict[str, Any]:
    """The record `encode_json` wrote; CorruptObjectError naming the key for anything else."""
    try:
        outer = json.loads(data)
        record = outer["record"]
        body = json.dumps(record, sort_keys=True, separators=(",", ":"))
        if not isinstance(record, dict) or hashlib.blake2b(body.encode(), digest_size=16).hexdigest() != outer["sum"]:
            raise ValueError("checksum mismatch")
        return record
    except Exception as exc:
        reason = f"not a readable zeus-kfp record ({type(exc).__name__}: {str(exc)[:80]})"
        raise CorruptObjectError(key, reason) from None
