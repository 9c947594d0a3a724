"""The job log's entries: each kind's bytes (canonical JSON) and rows (one Arrow table).

The kinds and their fields are docs/STORE.md, "Entry kinds"; the field table itself is fields.py, which every
entry passes before it is proposed (`checked`) and after it is read (`decode`). Why canonical JSON (sorted
keys, no spaces, no NaN): two writers of one agreed entry write the same bytes. Why one row schema (ROW_SCHEMA,
the one snapshots are written in): the settled view (frames.py) is computed over one Arrow table. `at` is the
writer's clock, for people: slots order everything.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from typing import Any

import pyarrow as pa

from zeus_kfp.job import TrialResult
from zeus_kfp.store import fields as fields_table
from zeus_kfp.store.errors import CorruptObjectError, StoreFormatError, StoreInputError
from zeus_kfp.trials import trial_columns

KINDS = fields_table.KINDS
# A dispatched entry holds the decision and where it runs, a finished entry the TrialResult: under the names
# of zeus_kfp.trials.Trial's fields, so the settled log reads straight into trials (frames.py).
DECISION_FIELDS = tuple(trial_columns("batch_size", "cost_threshold", "stage", "decision_reason", "kfp_run_id"))
RESULT_FIELDS = tuple(f.name for f in fields(TrialResult))
PROFILE_FIELDS = fields_table.PROFILE_ROW_FIELDS
# A gated begin's request (gating.GateRequest's fields): what its outcome is decided from, with the log before
# its slot (frames.py).
GATE_FIELDS = fields_table.GATE_FIELDS
ROW_SCHEMA = pa.schema([(f.name, f.type) for f in fields_table.FIELDS])  # the field table's, in its order
COLUMNS = tuple(ROW_SCHEMA.names)
FORMAT_1_COLUMNS = COLUMNS.index("drift_threshold") + 1  # the row schema before the begin's spec and reads
SAID_APART = ("at", "format")  # when and by which format an entry was written: not what it says


def now_us() -> int:
    return time.time_ns() // 1000


def checked(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as it will be stored, checked against the field table before anyone proposes it: a value that
    could not be read back (beyond its column's range, NaN, a string for a number) is refused here, naming the
    field, and nothing is stored. Numpy numbers become Python's."""
    try:
        return fields_table.check(entry)
    except fields_table.EntryFieldError as exc:
        raise StoreInputError(exc.field, fields_table.printable(exc.value), exc.allowed) from None


def encode(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def decode(key: str, data: bytes) -> dict[str, Any]:
    """An entry from its bytes, checked against the field table: CorruptObjectError naming the key and the field
    if it is not one (the reader reports and skips it); StoreFormatError for an entry of a newer store format,
    which no reader skips (leaving it out would change the job's history)."""
    try:
        entry = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptObjectError(key, f"not JSON ({str(exc)[:80]})") from None
    except RecursionError:  # nested deeper than the decoder goes: no entry nests beyond a profile's rows
        raise CorruptObjectError(key, "not a log entry (JSON nested too deep)") from None
    if isinstance(entry, dict):
        written = entry.get("format", 1)
        if isinstance(written, int) and not isinstance(written, bool) and written > fields_table.FORMAT:
            raise StoreFormatError(key, written, fields_table.FORMAT)
    try:
        return fields_table.check(entry, reading=True)
    except fields_table.EntryFieldError as exc:
        raise CorruptObjectError(key, f"not a valid log entry: {exc}") from None


def differences(stored: dict[str, Any], given: dict[str, Any]) -> str:
    """What differs between a stored entry and a new one, for the error a person reads."""
    changed = sorted(k for k in set(stored) | set(given) if k not in SAID_APART and stored.get(k) != given.get(k))
    return "; ".join(f"{k}: {stored.get(k)!r} -> {given.get(k)!r}" for k in changed)


def rows(slot: int, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The entry as rows of ROW_SCHEMA (a profile: one per power limit; anything else: one)."""
    base = {k: v for k, v in entry.items() if k in COLUMNS} | {"slot": slot}
    if entry["kind"] != "profile":
        return [base]
    return [base | {k: row.get(k) for k in PROFILE_FIELDS} for row in entry.get("rows", [])]


def table(found: list[dict[str, Any]]) -> pa.Table:
    """Rows as one table of ROW_SCHEMA (missing fields are nulls)."""
    return pa.Table.from_pylist(found, schema=ROW_SCHEMA)


def checked_table(key: str, arrow: pa.Table) -> pa.Table:
    """A snapshot's table, if it is in ROW_SCHEMA (the same columns and types), or in an earlier row schema of
    the store's formats (ROW_SCHEMA's first columns, at least format 1's: the later ones read null, as its
    entries had none of them), its text valid UTF-8 and every row one the field table allows (a snapshot is
    trusted no more than the entries it stands for)."""
    schema = arrow.schema.remove_metadata()
    earlier = FORMAT_1_COLUMNS <= len(schema) < len(ROW_SCHEMA) and all(
        schema.field(i) == ROW_SCHEMA.field(i) for i in range(len(schema))
    )
    if earlier:
        for name in ROW_SCHEMA.names[len(schema) :]:
            arrow = arrow.append_column(ROW_SCHEMA.field(name), pa.nulls(arrow.num_rows, ROW_SCHEMA.field(name).type))
        arrow = arrow.replace_schema_metadata(None)
    elif schema != ROW_SCHEMA:
        raise CorruptObjectError(key, "not in the log's row schema")
    try:
        arrow.validate(full=True)  # Parquet may hold text that is not UTF-8: Arrow checks it only here
        fields_table.check_rows(arrow)
    except pa.ArrowInvalid as exc:
        raise CorruptObjectError(key, f"holds a value Arrow refuses ({str(exc)[:80]})") from None
    except fields_table.EntryFieldError as exc:
        raise CorruptObjectError(key, f"holds a row the field table refuses: {exc}") from None
    return arrow
