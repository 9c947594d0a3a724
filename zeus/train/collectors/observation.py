"""One collected metric value, and how text and JSON lines turn into them.

An observation is Katib's metric log entry: (metric, value, epoch, step, time). `epoch` and
`step` are the script's own progress counters where it reports them; they drive the external
power profiler (zeus_kfp.train.progress) and are never guessed. `time` is the producer's timestamp
where the source carries one (an event's wall_time, a JSON line's "timestamp"), else the moment
the collector read it (UNIX seconds).

Katib's JSON line `{"metric": "accuracy", "value": 0.93, "epoch": 3, "step": 1200}` is understood
wherever a line is read (stdout, a text file, a JSON file), and so is Katib's flat JSON-file
record `{"accuracy": "0.93", "epoch": 3, "timestamp": "2021-12-02T14:27:51Z"}` (values may be
numbers or numeric strings, as Katib's own JSON collector reads them). Any other line goes
through the text filters (Katib's `name=value` pattern by default); a text line that begins with
an RFC 3339 timestamp and a space (`2021-12-02T14:27:51Z accuracy=0.9`) is observed at that time,
as Katib's text parser reads it.

Why defensive: the script is arbitrary user code. Its output may be binary, enormous, or contain
text that looks like numbers; nothing it prints may raise here, and a value that is not a finite
float is skipped.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from zeus_kfp.train.metrics import MAX_LINE_CHARS, finite_number, parse_line

PROGRESS_NAMES = ("epoch", "step")
KATIB_RECORD_KEYS = ("metric", "value")
TIMESTAMP_KEY = "timestamp"  # Katib's JSON-file collector reads the time from this key
_FRACTION = re.compile(r"(\.\d{6})\d+")  # RFC 3339 nanoseconds; datetime keeps microseconds
# Go's time.RFC3339Nano, which Katib's text parser tries on a line's first space-separated field.
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


@dataclass(frozen=True)
class Observation:
    """One metric value and where in training the script was when it reported it."""

    metric: str
    value: float
    epoch: int | None = None
    step: int | None = None
    time: float | None = None

    def key(self) -> tuple[str, float, int | None, int | None]:
        """Everything but the time: what a test compares with what the producer emitted."""
        return (self.metric, self.value, self.epoch, self.step)


def progress_value(value: object) -> int | None:
    """An epoch or step counter as an int (3.0 -> 3); None when it is not a whole number >= 0."""
    number = finite_number(value)
    if number is None or number < 0 or not float(number).is_integer():
        return None
    return int(number)


def make_observations(
    pairs: Iterable[tuple[str, float]],
    *,
    epoch: int | None = None,
    step: int | None = None,
    at: float | None = None,
) -> list[Observation]:
    """Observations of (name, value) pairs reported together (one line, one scrape, one record).

    A pair named "epoch" or "step" (in any case: `Epoch 3` as Keras prints it) is itself an observation and
    also sets that counter for the whole group, so `epoch=3 accuracy=0.9` gives accuracy at epoch 3.
    """
    pairs = list(pairs)
    for name, value in pairs:
        counter = name.lower()
        if counter == "epoch" and progress_value(value) is not None:
            epoch = progress_value(value)
        elif counter == "step" and progress_value(value) is not None:
            step = progress_value(value)
    when = time.time() if at is None else at
    return [Observation(name, value, epoch, step, when) for name, value in pairs]


def _timestamp(raw: object) -> float | None:
    """Katib's JSON timestamps: UNIX seconds, or an RFC 3339 string."""
    number = finite_number(raw) if not isinstance(raw, str) else None
    if number is not None:
        return number
    if not isinstance(raw, str):
        return None
    text = _FRACTION.sub(r"\1", raw.strip())
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def json_observations(line: str) -> list[Observation] | None:
    """Observations of one JSON-object line, or None when the line is not a JSON object."""
    try:
        record = json.loads(line[:MAX_LINE_CHARS])
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    at = _timestamp(record.get(TIMESTAMP_KEY))
    epoch, step = progress_value(record.get("epoch")), progress_value(record.get("step"))
    if all(key in record for key in KATIB_RECORD_KEYS):  # Katib's {"metric", "value", "epoch", "step"}
        value = finite_number(record["value"])
        if not isinstance(record["metric"], str) or value is None:
            return []
        return make_observations([(record["metric"], value)], epoch=epoch, step=step, at=at)
    pairs = []
    for name, raw in record.items():
        value = finite_number(raw) if name != TIMESTAMP_KEY else None
        if value is not None:
            pairs.append((str(name), value))
    return make_observations(pairs, epoch=epoch, step=step, at=at)


def line_timestamp(line: str) -> float | None:
    """The time a text line's leading RFC 3339 field says (Katib: the line's first space-separated field)."""
    first, space, _ = line.partition(" ")
    return _timestamp(first.upper()) if space and RFC3339.fullmatch(first) else None


def text_observations(line: str, patterns: Sequence[re.Pattern[str]]) -> list[Observation]:
    """Observations of one line of text output: a JSON object line as JSON, anything else through `patterns`."""
    if line.lstrip().startswith("{"):
        found = json_observations(line.strip())
        if found is not None:
            return found
    return make_observations(parse_line(line, patterns), at=line_timestamp(line))
