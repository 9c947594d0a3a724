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
by default), a line's leading RFC 3339 timestamp is its time; "json" lines are JSON objects, and,
as in Katib (whose JSON parser returns errParseJson for the whole file), a non-empty line that is
not one fails the collection, naming the line. Katib's JSON line is understood in both.

A fresh file per trial (`claim`): Katib's file lives in the trial's own pod; here trials follow
each other on one machine, so a file already at the path when the trial starts (an earlier trial's,
or anything else) is moved into the trial's log directory as `<name>.before-trial` before the
script starts. Reading from the old file's end instead would be wrong for a script that truncates
and rewrites the file (`open(path, "w")`): the same first lines, at the same offsets, would be
skipped. Trials that may run at the same time need distinct paths ({log_dir}, or a relative path).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from zeus_kfp.train.collectors.collector import CollectorError
from zeus_kfp.train.collectors.observation import LineReader, Observation, json_observations


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


BEFORE_TRIAL_SUFFIX = ".before-trial"
COLLECTED_DIR = "collected"  # where `keep` puts a copy of a source that lives outside the trial's log


class FileCollector:
    kind = "file"

    def __init__(self, path: Path, file_format: str, patterns: Sequence[re.Pattern[str]]) -> None:
        self.path = path
        self.file_format = file_format
        self.patterns = list(patterns)
        self.source = f"{path}, {file_format}"
        self._tail = FileTail(path)
        self._reader = LineReader(self.patterns)  # counters carry from line to line (observation.py)
        self._lines_read = 0

    def claim(self, aside: Path) -> list[str]:
        """Move a file already at the path into `aside` (see the module docstring)."""
        if not os.path.lexists(self.path):
            return []
        target = aside / (self.path.name + BEFORE_TRIAL_SUFFIX)
        try:
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(self.path, target)
        except OSError as exc:
            raise CollectorError(
                self.kind, self.source, f"it exists before the trial and cannot be moved aside ({exc}): remove it"
            ) from None
        return [f"{self.path} existed before the trial: moved to {target}, so only this trial's lines are read"]

    def keep(self, log_dir: Path) -> None:
        """A copy of the file in the trial's log, unless it is written there already."""
        if not self.path.is_file() or self.path.resolve().is_relative_to(log_dir.resolve()):
            return
        (log_dir / COLLECTED_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path, log_dir / COLLECTED_DIR / self.path.name)

    def _parse(self, lines: list[str]) -> list[Observation]:
        out: list[Observation] = []
        for line in lines:
            self._lines_read += 1
            if self.file_format != "json":
                out += self._reader.read(line)
                continue
            if not line.strip():
                continue
            found = json_observations(line.strip())
            if found is None:
                shown = line.strip()[:120]
                raise CollectorError(
                    self.kind, self.source, f"line {self._lines_read} is not a JSON object: {shown!r} (format json)"
                )
            out += self._reader.carry(found)
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
