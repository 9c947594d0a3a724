"""Metric collectors for plain scripts, in the spirit of Katib's: stdout patterns and JSON-lines files.

Why defensive: the script is arbitrary user code. Its output may be binary, enormous, or
contain text that looks like numbers; nothing it prints may raise here. A line yields zero or
more (name, value) pairs; anything that does not parse as a finite float is skipped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

# Katib's default stdout filter: `name=value`, value a float with optional exponent.
KATIB_PATTERN = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
MAX_LINE_CHARS = 4096  # metric lines are short; a cap keeps the regex scan linear-time in practice


class MetricPatternError(ValueError):
    def __init__(self, pattern: str, why: str) -> None:
        self.field = "metric_patterns"
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


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def parse_line(line: str, patterns: Sequence[re.Pattern[str]]) -> Iterator[tuple[str, float]]:
    """(name, value) pairs found in one line of output (progress-bar carriage returns split it further)."""
    for segment in line.split("\r"):
        segment = segment[:MAX_LINE_CHARS]
        for rx in patterns:
            for match in rx.finditer(segment):
                value = _number(match.group(2))
                if value is not None:
                    yield match.group(1), value


def parse_json_line(line: str) -> Iterator[tuple[str, float]]:
    """(name, value) pairs of one JSON-lines record: a flat object of numbers (others ignored)."""
    try:
        record = json.loads(line[:MAX_LINE_CHARS])
    except (ValueError, RecursionError):
        return
    if not isinstance(record, dict):
        return
    for name, raw in record.items():
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            value = _number(raw)  # type: ignore[arg-type]
            if value is not None:
                yield str(name), value


class JsonLinesTail:
    """Reads the complete lines appended to a JSON-lines metrics file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[tuple[str, float]]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            out.extend(parse_json_line(raw.decode("utf-8", errors="replace")))
        return out
