"""The log entries' field table: every field's column type and allowed values, and each kind's fields.

One table serves both sides (docs/STORE.md, "Entry kinds"): a writer checks an entry against it before
proposing it, so nothing that cannot be read back is ever agreed (an agreed value never changes: one that
failed only on reading would break every later read of the job); a reader checks each entry it fetches, so
one planted or written by a buggy writer is reported by key and skipped, never a raw error. The row schema
snapshots are written in (entries.ROW_SCHEMA) is built from this table, so the two cannot disagree.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

import pyarrow as pa

from zeus_kfp.job import MAX_ATTEMPTS, JobSpec, TrialStatus
from zeus_kfp.settings import INT64_MAX
from zeus_kfp.store.gating import GateRequest
from zeus_kfp.store.keys import MAX_ATTEMPT, RECURRENCE_ID_PATTERN
from zeus_kfp.trials import trial_columns

# The store format this code reads and writes; an entry says its own in `format` (absent: 1). Format 2: a gated begin
# whose `spec` differs from the job's spec in force (gating.py: it may replace it), which a format-1 reader, blind
# to `spec`, would read as a recurrence of the old spec.
FORMAT = 2
BEGIN_SPEC_FORMAT = 2
MAX_TEXT = 10_000  # characters of a free-text field (reasons, stages): a person's sentence, not a file


@dataclass(frozen=True)
class Field:
    """One column: its Arrow type, the least and greatest value (numbers), the values allowed (strings),
    and the sentence an error names as allowed."""

    name: str
    type: pa.DataType
    low: float = -math.inf
    high: float = math.inf
    choices: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    nullable: bool = True

    @property
    def allowed(self) -> str:
        return self._values() + (", or null" if self.nullable else "")

    def _values(self) -> str:
        if self.type == pa.bool_():
            return "true or false"
        if self.type == pa.string():
            if self.choices:
                return f"one of {', '.join(self.choices)}"
            if self.pattern is not None:
                return f"text matching {self.pattern.pattern}"
            return f"text of at most {MAX_TEXT:,} characters"
        what = "an integer" if self.type == pa.int64() else "a finite number"
        if self.low > -math.inf and self.high < math.inf:
            return f"{what} from {self.low:g} to {self.high:.0f}"
        return f"{what} >= {self.low:g}" if self.low > -math.inf else what

    def checked(self, value: Any) -> Any:
        """`value` as its column holds it (numpy and Python numbers alike), or ValueError saying why not."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError("required")
        if self.type == pa.bool_():
            if isinstance(value, bool):
                return value
        elif self.type == pa.string():
            if isinstance(value, str) and len(value) <= MAX_TEXT:
                if self.choices and value not in self.choices:
                    raise ValueError("not allowed")
                if self.pattern is not None and not self.pattern.fullmatch(value):
                    raise ValueError("not allowed")
                return value
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if self.low <= int(value) <= self.high:
                return int(value) if self.type == pa.int64() else float(value)
        elif (
            self.type == pa.float64()
            and isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and self.low <= float(value) <= self.high
        ):
            return float(value)
        raise ValueError("not allowed")


def _int(name: str, low: float = 0, high: float = INT64_MAX, nullable: bool = True) -> Field:
    return Field(name, pa.int64(), low, high, nullable=nullable)


def _float(name: str, low: float = 0.0, nullable: bool = True) -> Field:
    return Field(name, pa.float64(), low, nullable=nullable)


def _text(name: str, **kwargs: Any) -> Field:
    return Field(name, pa.string(), **kwargs)


# In the row schema's column order (snapshots are compared with it column by column).
FIELDS = (
    _int("slot", 1),
    _text("kind"),
    _text("recurrence_id", pattern=RECURRENCE_ID_PATTERN),
    _int("attempt", 1, MAX_ATTEMPT),
    _int("at"),  # microseconds since the epoch, the writer's clock: for people
    _int("batch_size", 1),
    _float("cost_threshold"),
    _text("stage"),
    _text("decision_reason"),
    _text("kfp_run_id"),
    _text("status", choices=tuple(s.value for s in TrialStatus if s.finished)),  # a result's: never "dispatched"
    _float("time_s"),
    _float("energy_j"),
    _int("num_epochs"),
    _float("cost"),
    _float("power_limit_w"),
    _float("metric", -math.inf),
    Field("simulated", pa.bool_()),
    _text("reason"),
    _text("source"),
    _text("phase"),
    _float("average_power_w"),
    _float("throughput"),
    _text("snapshot"),
    _int("upto", 1),
    # a gated begin's request (gating.GateRequest): the run settings it ran under (zeus_kfp.run_settings), the
    # job's attempts, its drift statistic; null in every other entry, and in a plain begin
    _float("period_s"),
    _int("max_running"),
    _int("max_attempts", 1, MAX_ATTEMPTS),
    _float("timeout_s"),
    Field("forced", pa.bool_()),
    _text("drift_detector"),
    _float("drift_stat", -math.inf),
    _float("drift_threshold"),
    # Added later, at the end (a snapshot written before them has the columns above, and reads with these null:
    # entries.checked_table). A gated begin's spec (gating.spec_text of the JobSpec its run presents) and how its
    # script reports (the train step's inputs of those names), which the job remembers.
    _text("spec"),
    Field("zeus_aware", pa.bool_()),
    _text("metric_pattern"),
    _text("metrics_collector"),
    _text("keep"),
)
BY_NAME = {f.name: f for f in FIELDS}
PROFILE_ROW_FIELDS = ("phase", "power_limit_w", "average_power_w", "throughput", "simulated")
GATE_FIELDS = tuple(f.name for f in dataclass_fields(GateRequest))
# null where no drift detector ran; the rest: absent in a begin written before they were
GATE_NULLABLE = ("drift_stat", "drift_threshold", "spec", "zeus_aware", "metric_pattern", "metrics_collector", "keep")
TRIAL = ("recurrence_id", "attempt")
# Each kind's fields: (required, optional). `at` and `format` may be in any entry; other fields are ignored by
# readers (a later format may add fields whose absence changes nothing) and never written.
KIND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "begin": (("recurrence_id",), GATE_FIELDS),
    "end": (("recurrence_id",), ("reason",)),
    "dispatched": (
        (*TRIAL, *trial_columns("batch_size")),
        tuple(trial_columns("cost_threshold", "stage", "decision_reason", "kfp_run_id")),
    ),
    "finished": (
        (*TRIAL, *trial_columns("batch_size", "status", "time_s", "energy_j", "num_epochs", "cost")),
        tuple(trial_columns("power_limit_w", "metric", "simulated", "reason", "source")),
    ),
    "profile": (TRIAL, ()),  # and `rows`: a non-empty list of PROFILE_ROW_FIELDS
    "noop": ((), ()),
    "snapshot": (("snapshot", "upto"), ()),
}
KINDS = tuple(KIND_FIELDS)


class EntryFieldError(ValueError):
    """An entry's field that its kind does not allow: which field, what it held, what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}={_shown(value)}: allowed {allowed}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(name: str, value: Any) -> Any:
    try:
        return BY_NAME[name].checked(value)
    except ValueError:
        raise EntryFieldError(name, value, BY_NAME[name].allowed) from None


def check(entry: Any) -> dict[str, Any]:
    """The entry with every field as its column holds it; EntryFieldError naming the first field its kind does
    not allow (a newer format's entry is not checked here: the reader refuses it first, entries.decode)."""
    if not isinstance(entry, dict):
        raise EntryFieldError("entry", entry, "a JSON object")
    kind = entry.get("kind")
    if kind not in KIND_FIELDS:
        raise EntryFieldError("kind", kind, f"one of {', '.join(KINDS)}")
    required, optional = KIND_FIELDS[kind]
    clean: dict[str, Any] = {"kind": kind}
    for name in ("at", "format"):
        if name in entry:
            clean[name] = _field("at", entry[name]) if name == "at" else _format(entry[name])
    for name in required:
        if entry.get(name) is None:
            required_value = BY_NAME[name].allowed.removesuffix(", or null")
            raise EntryFieldError(name, entry.get(name), f"{required_value} (required)")
        clean[name] = _field(name, entry[name])
    for name in optional:
        if name in entry:
            clean[name] = _field(name, entry[name])
    if kind == "begin" and any(name in clean for name in GATE_FIELDS):  # a gated begin carries its whole request
        for name in GATE_FIELDS:
            if clean.get(name) is None and name not in GATE_NULLABLE:
                raise EntryFieldError(name, clean.get(name), f"{BY_NAME[name].allowed} (every gated begin has one)")
        if clean.get("drift_stat") is not None and clean.get("drift_threshold") is None:  # the gate compares them
            raise EntryFieldError("drift_threshold", None, "a finite number >= 0 where a drift statistic is given")
        if clean.get("spec") is not None:  # the gate's rule compares it: it must read as a spec
            _spec(clean["spec"])
    if kind == "profile":
        clean["rows"] = _profile_rows(entry.get("rows"))
    return clean


def _spec(text: str) -> None:
    try:
        JobSpec.from_dict(json.loads(text))
    except (ValueError, TypeError, AttributeError) as exc:  # JSON, or JobSpec's own validation
        raise EntryFieldError("spec", text, f"a job spec as JSON ({str(exc)[:80]})") from None


def _format(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise EntryFieldError("format", value, f"an integer >= 1 (this zeus-kfp reads {FORMAT})")


def _profile_rows(rows: Any) -> list[dict[str, Any]]:
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise EntryFieldError("rows", rows, "a non-empty list of power-limit rows")
    return [{name: _field(name, row.get(name)) for name in PROFILE_ROW_FIELDS} for row in rows]
