"""The file collector: observations from a text or JSON-lines file, tailed while it grows.

Why a tail that survives rotation: a long job's metrics log is often rotated (Python's
RotatingFileHandler, logrotate's default "create" mode): the file is renamed away and a new one
takes its name. The tail keeps its handle on the file it has open, so after a rename it first
reads what was appended to the old file (through the handle: the old name no longer matters),
then opens the new file from its start. Only complete lines are parsed; a partial last line
waits for its newline (or for the rotation or the script's exit, which end the file). A file cut
short in place (logrotate "copytruncate") is read again from its start when it is found shorter
than what was already read.

Formats, as Katib's fileSystemPath.format: "text" lines go through the filters (Katib's pattern
by default); "json" lines are JSON objects. Katib's JSON line is understood in both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from zeus.train.collectors.base import CollectorError
from zeus.train.collectors.observation import Observation, json_observations, text_observations


class FileTail:
    """The complete lines appended to `path` since the last call, across renames and truncation."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = False  # the file existed at some point
        self._handle: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None
        self._partial = b""

    def read_lines(self, final: bool = False) -> list[str]:
        """New complete lines; `final` also returns a last line that has no newline."""
        lines: list[str] = []
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            stat = None
        current = (stat.st_dev, stat.st_ino) if stat is not None else None
        if self._handle is not None and current != self._identity:  # renamed away or removed: finish it
            lines += self._drain(end_of_file=True)
            self._handle.close()
            self._handle = None
        if self._handle is not None and stat is not None and stat.st_size < self._handle.tell():
            self._handle.seek(0)  # truncated in place: the file starts over
            self._partial = b""
        if self._handle is None and stat is not None:
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115  (kept open across calls on purpose)
            except FileNotFoundError:  # renamed between stat and open: next call
                return lines
            opened = os.fstat(self._handle.fileno())
            self._identity, self.opened = (opened.st_dev, opened.st_ino), True
        if self._handle is not None:
            lines += self._drain(end_of_file=final)
        return lines

    def _drain(self, end_of_file: bool) -> list[str]:
        assert self._handle is not None
        data = self._partial + self._handle.read()
        parts = data.split(b"\n")
        self._partial = parts.pop()
        if end_of_file and self._partial:
            parts.append(self._partial)
            self._partial = b""
        return [raw.decode("utf-8", errors="replace").rstrip("\r") for raw in parts]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class FileCollector:
    kind = "file"

    def __init__(self, path: Path, file_format: str, patterns: Sequence[re.Pattern[str]]) -> None:
        self.path = path
        self.file_format = file_format
        self.patterns = list(patterns)
        self.source = f"{path}, {file_format}"
        self._tail = FileTail(path)

    def _parse(self, lines: list[str]) -> list[Observation]:
        out: list[Observation] = []
        for line in lines:
            if self.file_format == "json":
                out += json_observations(line.strip()) or []
            else:
                out += text_observations(line, self.patterns)
        return out

    def poll(self) -> list[Observation]:
        try:
            return self._parse(self._tail.read_lines())
        except OSError as exc:  # e.g. permission denied: say which file
            raise CollectorError(self.kind, self.source, f"cannot read it: {exc}") from None

    def finish(self) -> list[Observation]:
        try:
            found = self._parse(self._tail.read_lines(final=True))
        except OSError as exc:
            raise CollectorError(self.kind, self.source, f"cannot read it: {exc}") from None
        finally:
            self._tail.close()
        if not self._tail.opened:
            raise CollectorError(
                self.kind, self.source, "the file was never created (is the path the one the script writes?)"
            )
        return found
