"""Katib's text filters: (name, value) pairs from a line of a plain script's output.

The collectors (zeus_kfp.train.collectors) turn these pairs, and JSON lines, into observations.

Why defensive: the script is arbitrary user code. Its output may be binary, enormous, or
contain text that looks like numbers; nothing it prints may raise here. A line yields zero or
more (name, value) pairs; anything that does not parse as a finite float is skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence

# Katib's default stdout filter: `name=value`, value a float with optional exponent.
KATIB_PATTERN = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
MAX_LINE_CHARS = 4096  # metric lines are short; a cap keeps the regex scan linear-time in practice


NAMED = ("name", "value")  # a pattern's named groups: the metric and its value...
COUNTERS = ("epoch", "step")  # ...and, optionally, the progress counter on the same line
PATTERN_ALLOWED = (
    "a regex with 2 groups (name, value), or with named groups (?P<name>...) and (?P<value>...) and "
    "optionally (?P<epoch>...) or (?P<step>...) for a progress counter the line does not name as one"
)


class MetricPatternError(ValueError):
    def __init__(self, pattern: str, why: str) -> None:
        self.field = "metric_patterns"
        self.pattern, self.why = pattern, why
        super().__init__(f"invalid metric_patterns entry {pattern!r}: {why}; allowed {PATTERN_ALLOWED}")


def compile_patterns(patterns: Sequence[str] | None) -> list[re.Pattern[str]]:
    """Katib's two-group patterns, or named groups. A counter the line names (`Epoch 3/10`, `step=200`) is read
    whatever the pattern (zeus_kfp.train.collectors.counters); a named group `(?P<epoch>...)` or `(?P<step>...)`
    makes a number the line does not name a counter: `ep(?P<epoch>\\d+) (?P<name>acc)=(?P<value>[0-9.]+)`."""
    compiled = []
    for p in patterns or [KATIB_PATTERN]:
        try:
            rx = re.compile(p)
        except re.error as exc:
            raise MetricPatternError(p, str(exc)) from None
        named = set(rx.groupindex)
        if named & {*NAMED, *COUNTERS} and not set(NAMED) <= named:
            raise MetricPatternError(p, f"it names the groups {sorted(named)} but not both 'name' and 'value'")
        if not set(NAMED) <= named and rx.groups < 2:
            raise MetricPatternError(p, f"it has {rx.groups} group(s)")
        compiled.append(rx)
    return compiled


def finite_number(raw: object) -> float | None:
    """A finite float from a number or numeric string (Katib's JSON collector reads values as strings);
    None for anything else (booleans, NaN, infinity, text)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def parse_line(line: str, patterns: Sequence[re.Pattern[str]]) -> Iterator[tuple[str, float]]:
    """(name, value) pairs found in one line of output (progress-bar carriage returns split it further). A
    named pattern's counter comes as its own pair, ("epoch", 3), as Katib's `epoch=3` would."""
    for segment in line.split("\r"):
        segment = segment[:MAX_LINE_CHARS]
        for rx in patterns:
            named = set(NAMED) <= set(rx.groupindex)
            for match in rx.finditer(segment):
                value = finite_number(match.group("value" if named else 2))
                if value is None:
                    continue
                yield match.group("name" if named else 1), value
                for counter in COUNTERS if named else ():
                    if counter in rx.groupindex and match.group(counter) is not None:
                        number = finite_number(match.group(counter))
                        if number is not None:
                            yield counter, number
