"""The log entries' field table: every field's column type and allowed values, and each kind's fields.

One table serves both sides (docs/STORE.md, "Entry kinds"): a writer checks an entry against it before
proposing it, so nothing that cannot be read back is ever agreed (an agreed value never changes: one that
failed only on reading would break every later read of the job); a reader checks each entry it fetches, and
each row of a snapshot, so one planted or written by a buggy writer is reported by key and skipped, never a raw
error. It checks what Arrow and the JSON encoding need, not only the type: text that is valid UTF-8, numbers
that fit their column (an integer too large for a float is refused, not an OverflowError). A reader is as
lenient as every earlier writer of the format was (text of any length; lone surrogates shown escaped, text.py):
a limit tightened later applies to new writes only, so an upgrade never changes what a job's history says.
The row schema snapshots are written in (entries.ROW_SCHEMA) is built from this table, so the two cannot
disagree.
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
import pyarrow.compute as pc

from zeus_kfp.job import MAX_ATTEMPTS, JobSpec, TrialStatus
from zeus_kfp.settings import INT64_MAX
from zeus_kfp.store.gating import GateRequest
from zeus_kfp.store.keys import MAX_ATTEMPT, RECURRENCE_ID_PATTERN
from zeus_kfp.store.text import MAX_TEXT, escaped, is_utf8
from zeus_kfp.trials import trial_columns

# The store format this code reads and writes; an entry says its own in `format` (absent: 1). Format 2: a gated begin
# whose `spec` differs from the job's spec in force (gating.py: it may replace it), which a format-1 reader, blind
# to `spec`, would read as a recurrence of the old spec.
FORMAT = 2
BEGIN_SPEC_FORMAT = 2


@dataclass(frozen=True)
class Field:
    """One column: its Arrow type, the least and greatest value (numbers), the values allowed (strings),
    and the sentence an error names as allowed."""

    name: str
    type: pa.DataType
    low: float | int = -math.inf
    high: float | int = math.inf
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
            return f"UTF-8 text of at most {MAX_TEXT:,} characters"
        what = "an integer" if self.type == pa.int64() else "a finite number"
        if self.low > -math.inf and self.high < math.inf:
            return f"{what} from {_number(self.low)} to {_number(self.high)}"
        return f"{what} >= {_number(self.low)}" if self.low > -math.inf else what

    def checked(self, value: Any, reading: bool = False) -> Any:
        """`value` as its column holds it (numpy and Python numbers alike), or ValueError saying why not.
        `reading`: as a reader takes a stored value (text of any length, lone surrogates escaped: text.py)."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError("required")
        if self.type == pa.bool_():
            if isinstance(value, bool):
                return value
        elif self.type == pa.string():
            if isinstance(value, str) and (reading or (len(value) <= MAX_TEXT and is_utf8(value))):
                value = escaped(value) if reading else value
                if self.choices and value not in self.choices:
                    raise ValueError("not allowed")
                if self.pattern is not None and not self.pattern.fullmatch(value):
                    raise ValueError("not allowed")
                return value
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if self.low <= int(value) <= self.high and (self.type == pa.int64() or _fits_a_float(int(value))):
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


def _number(bound: float | int) -> str:
    """A bound as people read it: an integer exactly (2^63-1 is 9223372036854775807), a float short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _fits_a_float(value: int) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # beyond about 1.8e308: a float64 column cannot hold it
        return False


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
    # entries.checked_table). A profile row's GPU model (zeus_kfp.profiles; ADDED below); a gated begin's spec
    # (gating.spec_text of the JobSpec its run presents) and how its script reports (the train step's inputs of
    # those names), which the job remembers.
    _text("gpu"),
    _text("spec"),
    Field("zeus_aware", pa.bool_()),
    _text("metric_pattern"),
    _text("metrics_collector"),
    _text("keep"),
)
BY_NAME = {f.name: f for f in FIELDS}
# Profile-row fields added after a format's first writers: where an entry leaves one out, it reads as written.
ADDED = ("gpu",)
PROFILE_ROW_FIELDS = ("phase", "power_limit_w", "average_power_w", "throughput", "simulated", "gpu")
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
    text = repr(printable(value))
    return text if len(text) <= 60 else text[:57] + "..."


def printable(value: Any) -> Any:
    """`value`, or what a message shows of an integer of more digits than Python prints (its repr would raise)."""
    try:
        repr(value)
    except ValueError:  # sys.get_int_max_str_digits
        return f"an integer of {int(value).bit_length():,} bits"
    return value


def _field(name: str, value: Any, reading: bool = False) -> Any:
    try:
        return BY_NAME[name].checked(value, reading)
    except ValueError:
        raise EntryFieldError(name, value, BY_NAME[name].allowed) from None


def check(entry: Any, reading: bool = False) -> dict[str, Any]:
    """The entry with every field as its column holds it; EntryFieldError naming the first field its kind does
    not allow (a newer format's entry is not checked here: the reader refuses it first, entries.decode).
    `reading`: as a reader takes an entry already stored (Field.checked)."""
    if not isinstance(entry, dict):
        raise EntryFieldError("entry", entry, "a JSON object")
    kind = entry.get("kind")
    if kind not in KIND_FIELDS:
        raise EntryFieldError("kind", kind, f"one of {', '.join(KINDS)}")
    required, optional = KIND_FIELDS[kind]
    clean: dict[str, Any] = {"kind": kind}
    for name in ("at", "format"):
        if name in entry:
            clean[name] = _field("at", entry[name], reading) if name == "at" else _format(entry[name])
    for name in required:
        if entry.get(name) is None:
            required_value = BY_NAME[name].allowed.removesuffix(", or null")
            raise EntryFieldError(name, entry.get(name), f"{required_value} (required)")
        clean[name] = _field(name, entry[name], reading)
    for name in optional:
        if name in entry:
            clean[name] = _field(name, entry[name], reading)
    if kind == "begin" and any(name in clean for name in GATE_FIELDS):  # a gated begin carries its whole request
        for name in GATE_FIELDS:
            if clean.get(name) is None and name not in GATE_NULLABLE:
                raise EntryFieldError(name, clean.get(name), f"{BY_NAME[name].allowed} (every gated begin has one)")
        if clean.get("drift_stat") is not None and clean.get("drift_threshold") is None:  # the gate compares them
            raise EntryFieldError("drift_threshold", None, "a finite number >= 0 where a drift statistic is given")
        if clean.get("spec") is not None:  # the gate's rule compares it: it must read as a spec
            _spec(clean["spec"])
    if kind == "profile":
        clean["rows"] = _profile_rows(entry.get("rows"), reading)
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


def _profile_rows(rows: Any, reading: bool) -> list[dict[str, Any]]:
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise EntryFieldError("rows", rows, "a non-empty list of power-limit rows")
    return [
        {name: _field(name, row.get(name), reading) for name in PROFILE_ROW_FIELDS if name in row or name not in ADDED}
        for row in rows
    ]  # a field added since (ADDED) is left out where an earlier writer left it out: the entry reads as written


def check_rows(rows: pa.Table) -> None:
    """The field table over a snapshot's rows (already in the row schema, text valid UTF-8), column by column
    as Arrow computes it; EntryFieldError naming the first value refused, as `check` would have refused its entry.
    As lenient as a reader (text of any length): a snapshot holds what readers read. A column with no value
    costs nothing, and a passing one a reduction (a snapshot of 100,000 trials is read on every bandit step)."""
    kind = rows.column("kind")
    codes = pc.index_in(kind, value_set=pa.array(KINDS))  # null: no kind, or an unknown one
    _refuse_where(rows, "kind", pc.is_null(codes), f"one of {', '.join(KINDS)}")
    _refuse_where(rows, "slot", pc.is_null(rows.column("slot")), "an integer >= 1 (required)")
    for field in FIELDS:
        column = rows.column(field.name)
        if column.null_count < len(column) and (refused := _refused(field, column)) is not None:
            _refuse_where(rows, field.name, refused, field.allowed)
    present = set(pc.unique(codes).to_pylist())
    for code, (name, (required, _optional)) in enumerate(KIND_FIELDS.items()):
        if code not in present:
            continue
        of_kind = pc.equal(codes, code)
        for column in (c for c in required if rows.column(c).null_count):
            missing = pc.and_(of_kind, pc.is_null(rows.column(column)))
            _refuse_where(rows, column, missing, f"{_value(column)} (required in {name})")
    if KINDS.index("begin") in present:
        begins = rows.select(GATE_FIELDS).filter(pc.equal(codes, KINDS.index("begin")))
        gated = begins.filter(_any_valid(begins, GATE_FIELDS))
        _require(gated, tuple(n for n in GATE_FIELDS if n not in GATE_NULLABLE), "(every gated begin has one)")
        judged = gated.filter(pc.is_valid(gated.column("drift_stat")))
        _require(judged, ("drift_threshold",), "where a drift statistic is given")


def _value(name: str) -> str:
    return BY_NAME[name].allowed.removesuffix(", or null")


def _require(rows: pa.Table, names: tuple[str, ...], why: str) -> None:
    for name in names:
        if rows.column(name).null_count:
            raise EntryFieldError(name, None, f"{_value(name)} {why}")


def _refused(field: Field, column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """Where `column`'s values are outside what `field` allows (null: not judged here, but per kind); None where
    any value of its type is allowed."""
    if field.type == pa.string():
        if field.choices:  # (is_in holds false, not null, for a null)
            return pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, value_set=pa.array(field.choices))))
        if field.pattern is not None:  # on each value once (a trial's id is in each of its rows)
            values = pc.unique(column)
            refused = pc.invert(pc.match_substring_regex(values, f"^(?:{field.pattern.pattern})$"))
            return pc.is_in(column, value_set=values.filter(pc.fill_null(refused, False)))
        return None
    if field.type == pa.bool_():
        return None
    outside = pc.or_(pc.less(column, field.low), pc.greater(column, field.high))
    return pc.or_(outside, pc.invert(pc.is_finite(column))) if field.type == pa.float64() else outside


def _any_valid(rows: pa.Table, names: tuple[str, ...]) -> pa.ChunkedArray:
    found = pc.is_valid(rows.column(names[0]))
    for name in names[1:]:
        found = pc.or_(found, pc.is_valid(rows.column(name)))
    return found


def _refuse_where(rows: pa.Table, name: str, refused: pa.ChunkedArray, allowed: str) -> None:
    """EntryFieldError for the first row where `refused` holds (a null there: a null value, judged elsewhere)."""
    if not pc.any(refused).as_py():  # nulls skipped
        return
    at = pc.index(pc.fill_null(refused, False), True).as_py()
    raise EntryFieldError(name, rows.column(name)[at].as_py(), allowed)
