"""One collected metric value, and how text and JSON lines turn into them.

An observation is Katib's metric log entry: (metric, value, epoch, step, time). `epoch` and
`step` are the script's own progress counters where it reports them; they drive the external
power profiler (zeus_kfp.train.progress) and are never guessed: a number is a counter only where it
is named as one (zeus_kfp.train.collectors.counters has the names and the rules). `time` is the
producer's timestamp where the source carries one (an event's wall_time, a JSON line's "timestamp"),
else the moment the collector read it (UNIX seconds).

Where a line's counters come from, first that applies, each counter on its own:
1. the metric pattern's own: a pair it reads named as a counter (Katib's `epoch=3`, `global_step=100`)
   or a named group `(?P<epoch>...)` / `(?P<step>...)`; in a JSON line, a key named as one;
2. the line's text, outside the pattern: `Epoch 1: train_loss=1.000 val_acc=0.4500` read with
   `(val_acc)=([0-9.]+)` is val_acc at epoch 1; so are `step=200 loss=...`, `epoch 3 | ...`,
   `[epoch 3, step 1200]`, Python logging's `INFO:train:epoch 2 val_acc=0.81` and HuggingFace
   Trainer's `{'eval_accuracy': 0.8, 'epoch': 1.0}`;
3. the last one an earlier line of the same source named (`LineReader`): Keras's `model.fit(verbose=2)`
   prints `Epoch 3/10` on a line of its own and the metrics on the next, which are at epoch 3. The
   stdOut collector reads stdout and stderr as one source, the lines in the order they arrived.
A line that names a counter but holds no metric the pattern reads is still progress: its counters are
observations of their own, named "epoch" and "step" (`Epoch 3/10` is ("epoch", 3) at epoch 3), unless
they repeat the counters already in force (a line that says nothing new).

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

import itertools
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from zeus_kfp.train.collectors.counters import EPOCH, STEP, line_counters, pair_counters
from zeus_kfp.train.metrics import MAX_LINE_CHARS, finite_number, parse_line

KATIB_RECORD_KEYS = ("metric", "value")
TIMESTAMP_KEY = "timestamp"  # Katib's JSON-file collector reads the time from this key
_FRACTION = re.compile(r"(\.\d{6})\d+")  # RFC 3339 nanoseconds; datetime keeps microseconds
# Go's time.RFC3339Nano, which Katib's text parser tries on a line's first space-separated field.
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


_REPORTS = itertools.count(1)  # each make_observations call's number (Observation.report)


@dataclass(frozen=True)
class Observation:
    """One metric value and where in training the script was when it reported it.

    `step` is a whole number. `epoch` is an int where the script reports whole epochs, and a float where
    it reports a fraction (HuggingFace's Trainer: `'epoch': 0.32`, a third through the first epoch; its
    `'epoch': 1.0` is the int 1): progress through the epochs, not an epoch's index. `report` numbers what the
    script reported together (a line, a record, a scrape: one `make_observations` call), so a line that ends with
    the job's metric is read as one report whatever counters it names first (zeus_kfp.train.progress); a time
    cannot tell them apart, a timestamp of whole seconds being shared by many lines.
    """

    metric: str
    value: float
    epoch: int | float | None = None
    step: int | None = None
    time: float | None = None
    report: int = field(default=0, compare=False)

    def key(self) -> tuple[str, float, int | float | None, int | None]:
        """Everything but the time: what a test compares with what the producer emitted."""
        return (self.metric, self.value, self.epoch, self.step)


def make_observations(
    pairs: Iterable[tuple[str, float]],
    *,
    epoch: int | float | None = None,
    step: int | None = None,
    at: float | None = None,
) -> list[Observation]:
    """Observations of (name, value) pairs reported together (one line, one scrape, one record).

    A pair named as a counter (`epoch`, `step`, `global_step`, ... in any case; counters.py) is itself an
    observation and also sets that counter for the whole group, so `epoch=3 accuracy=0.9` gives accuracy at
    epoch 3.
    """
    pairs = list(pairs)
    own = pair_counters(pairs)
    epoch, step = own.get(EPOCH, epoch), own.get(STEP, step)  # type: ignore[assignment]
    when = time.time() if at is None else at
    report = next(_REPORTS)
    return [Observation(name, value, epoch, step, when, report) for name, value in pairs]


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
    own = pair_counters((str(name), raw) for name, raw in record.items())
    epoch, step = own.get(EPOCH), own.get(STEP)
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


class LineReader:
    """One source's lines, in order, as observations; the counters a line names carry to the lines after it
    that name none (rule 3 of the module docstring)."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.patterns = list(patterns)
        self.epoch: int | float | None = None
        self.step: int | None = None

    def read(self, line: str) -> list[Observation]:
        """Observations of one line: a JSON object line as JSON, anything else through the patterns."""
        found = json_observations(line.strip()) if line.lstrip().startswith("{") else None
        return self.carry(found if found is not None else self._text(line))

    def carry(self, found: list[Observation]) -> list[Observation]:
        """One line's observations with the counters in force where the line names none."""
        carried = [replace(o, epoch=_or(o.epoch, self.epoch), step=_or(o.step, self.step)) for o in found]
        if carried:
            self.epoch, self.step = carried[-1].epoch, carried[-1].step
        return carried

    def _text(self, line: str) -> list[Observation]:
        pairs = list(parse_line(line, self.patterns))
        named = line_counters(line)
        if not pairs:  # progress alone, unless it repeats the counters in force
            unchanged = named.get(EPOCH, self.epoch) == self.epoch and named.get(STEP, self.step) == self.step
            pairs = [] if unchanged else [(kind, float(value)) for kind, value in named.items()]
        own = {**named, **pair_counters(pairs)}  # the pattern's own counters first
        return make_observations(pairs, epoch=own.get(EPOCH), step=own.get(STEP), at=line_timestamp(line))  # type: ignore[arg-type]


def _or(own: object, carried: object):
    return own if own is not None else carried


def text_observations(line: str, patterns: Sequence[re.Pattern[str]]) -> list[Observation]:
    """Observations of one line of text output on its own (no earlier line to carry counters from)."""
    return LineReader(patterns).read(line)
