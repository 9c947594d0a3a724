"""The job log's entries: what each kind holds, its bytes (canonical JSON) and its rows (one table).

A slot of the log holds one entry (log.py). Kinds:
- `begin`: a run asks to open a recurrence (recurrence_id). A plain begin always opens one; a gated one
  (the recurrence gate, zeus/steps/gate.py) carries its request (GATE_FIELDS) and opens one or not by a
  rule of the log before its slot (frames.py, `gate_outcomes`). A recurrence's number is its rank among
  the first begins that opened one.
- `end`: a recurrence ended without a trial to say so (a local run's failed step or interruption).
- `dispatched`: a trial was handed out (recurrence_id, attempt, the decision, kfp_run_id).
- `finished`: its result (TrialResult's fields).
- `profile`: its power profile (`rows`, zeus_kfp.profiles' columns).
- `noop`: a slot a reader closed after its proposer went quiet (log.py, holes).
- `snapshot`: compaction wrote a snapshot of slots 1..upto (so a reader can tell one went missing).

Entries are canonical JSON (sorted keys, no spaces, no NaN), so two writers of one agreed entry write
the same bytes. `at` is microseconds since the epoch by the writer's clock: for people, never used to
order anything (slots order everything). Every entry becomes rows of ROW_SCHEMA, the schema snapshots
are written in, so the settled view (frames.py) is computed over one Arrow table.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from typing import Any

import pyarrow as pa

from zeus_kfp.job import TrialResult
from zeus_kfp.store.errors import CorruptObjectError
from zeus_kfp.store.gating import GateRequest
from zeus_kfp.trials import trial_columns

KINDS = ("begin", "dispatched", "finished", "profile", "noop", "snapshot", "end")
TRIAL_KINDS = ("dispatched", "finished", "profile")  # about one (recurrence_id, attempt)
# A dispatched entry holds the decision and where it runs, a finished entry the TrialResult: under the names
# of zeus_kfp.trials.Trial's fields, so the settled log reads straight into trials (frames.py).
DECISION_FIELDS = tuple(trial_columns("batch_size", "cost_threshold", "stage", "decision_reason", "kfp_run_id"))
RESULT_FIELDS = tuple(f.name for f in fields(TrialResult))
PROFILE_FIELDS = ("phase", "power_limit_w", "average_power_w", "throughput", "simulated")
# A gated begin's request (gating.GateRequest's fields): what its outcome is decided from, with the log before
# its slot (frames.py).
GATE_FIELDS = tuple(f.name for f in fields(GateRequest))

ROW_SCHEMA = pa.schema(
    [
        ("slot", pa.int64()),
        ("kind", pa.string()),
        ("recurrence_id", pa.string()),
        ("attempt", pa.int64()),
        ("at", pa.int64()),
        ("batch_size", pa.int64()),
        ("cost_threshold", pa.float64()),
        ("stage", pa.string()),
        ("decision_reason", pa.string()),
        ("kfp_run_id", pa.string()),
        ("status", pa.string()),
        ("time_s", pa.float64()),
        ("energy_j", pa.float64()),
        ("num_epochs", pa.int64()),
        ("cost", pa.float64()),
        ("power_limit_w", pa.float64()),
        ("metric", pa.float64()),
        ("simulated", pa.bool_()),
        ("reason", pa.string()),
        ("source", pa.string()),
        ("phase", pa.string()),
        ("average_power_w", pa.float64()),
        ("throughput", pa.float64()),
        ("snapshot", pa.string()),
        ("upto", pa.int64()),
        # a gated begin's request (GATE_FIELDS); null in every other entry, and in a plain begin
        ("period_s", pa.float64()),
        ("max_running", pa.int64()),
        ("max_attempts", pa.int64()),
        ("timeout_s", pa.float64()),
        ("forced", pa.bool_()),
        ("drift_detector", pa.string()),
        ("drift_stat", pa.float64()),
        ("drift_threshold", pa.float64()),
    ]
)
COLUMNS = tuple(ROW_SCHEMA.names)


def now_us() -> int:
    return time.time_ns() // 1000


def encode(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def decode(key: str, data: bytes) -> dict[str, Any]:
    """An entry from its bytes; CorruptObjectError naming the key if it is not one."""
    try:
        entry = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptObjectError(key, f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
        raise CorruptObjectError(
            key, f"not a log entry (kind {entry.get('kind') if isinstance(entry, dict) else None!r})"
        )
    return entry


def same_event(stored: dict[str, Any], given: dict[str, Any]) -> bool:
    """Whether two entries say the same thing (when they were written aside)."""
    return {k: v for k, v in stored.items() if k != "at"} == {k: v for k, v in given.items() if k != "at"}


def differences(stored: dict[str, Any], given: dict[str, Any]) -> str:
    """What differs between a stored entry and a new one, for the error a person reads."""
    changed = sorted(k for k in set(stored) | set(given) if k != "at" and stored.get(k) != given.get(k))
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
    """A snapshot's table, if it is in ROW_SCHEMA (the same columns and types) and sorted by slot. A snapshot
    written before the gate's columns were added lacks them: they are nulls there, as in the entries it holds."""
    schema = arrow.schema.remove_metadata()
    if schema != ROW_SCHEMA and [f for f in ROW_SCHEMA if f.name not in GATE_FIELDS] == list(schema):
        for name in GATE_FIELDS:
            arrow = arrow.append_column(ROW_SCHEMA.field(name), pa.nulls(arrow.num_rows, ROW_SCHEMA.field(name).type))
        schema = arrow.schema.remove_metadata()
    if schema != ROW_SCHEMA:
        raise CorruptObjectError(key, "not in the log's row schema")
    return arrow
