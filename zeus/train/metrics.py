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


class MetricPatternError(ValueError):
    def __init__(self, pattern: str, why: str) -> None:
        self.field = "metric_patterns"
        self.pattern, self.why = pattern, why
        super().__init__(
            f"invalid metric_patterns entry {pattern!r}: {why}; allowed a regex with 2 groups (name, value)"
        )


def compile_patterns(patterns: Sequence[str] | None) -> list[re.Pattern[str]]:
    compiled = []
    for p in patterns or [KATIB_PATTERN]:
        try:
            rx = re.compile(p)
        except re.error as exc:
            raise MetricPatternError(p, str(exc)) from None
        if rx.groups < 2:
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
    """(name, value) pairs found in one line of output (progress-bar carriage returns split it further)."""
    for segment in line.split("\r"):
        segment = segment[:MAX_LINE_CHARS]
        for rx in patterns:
            for match in rx.finditer(segment):
                value = finite_number(match.group(2))
                if value is not None:
                    yield match.group(1), value
