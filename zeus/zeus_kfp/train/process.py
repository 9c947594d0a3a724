"""A child process whose output is captured line by line and which can be stopped politely.

Why its own module: the runner's policy (when to stop, what status) should not be tangled
with pipes, threads and signals. Output goes to files in full (for people) and to bounded
tails (for results), each stream to its own; the lines of both streams are handed to one callback
for metric parsing (a script's metrics are wherever it prints them: Python's `logging` writes to
stderr), one line at a time, in the order the pumps read them. The child gets its own process group
so SIGTERM/SIGKILL reach its children too (a shell wrapper, DataLoader workers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

TAIL_LINES = 40

OOM_MARKERS = (
    "CUDA out of memory",
    "OutOfMemoryError",
    "out of memory",
    "MemoryError",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "can't allocate memory",
)


def looks_like_oom(text: str, returncode: int | None, killed_by_us: bool) -> bool:
    """GPU or host out-of-memory: torch/CUDA OOM text, or a SIGKILL we did not send (the kernel OOM killer)."""
    if any(marker in text for marker in OOM_MARKERS):
        return True
    return not killed_by_us and returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)


class CapturedProcess:
    """Popen with stdout/stderr pumped by threads into log files, tails, and an optional line callback.

    `on_line` gets every line of stdout and of stderr (without its newline), never two at once: the two
    pumps take turns under one lock, so a stateful parser sees one stream of lines in arrival order.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        self.stdout_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.killed_by_us = False
        self._on_line = on_line
        self._line_lock = threading.Lock()
        self._proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._threads = [
            threading.Thread(
                target=self._pump, args=(self._proc.stdout, cwd / "stdout.log", self.stdout_tail), daemon=True
            ),
            threading.Thread(
                target=self._pump, args=(self._proc.stderr, cwd / "stderr.log", self.stderr_tail), daemon=True
            ),
        ]
        for t in self._threads:
            t.start()

    def _pump(self, stream, log_path: Path, tail: deque[str]) -> None:
        with log_path.open("wb") as log:
            for raw in stream:  # bytes lines; undecodable bytes are replaced, never raised
                log.write(raw)
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                tail.append(line[:1000])
                if self._on_line is not None:
                    try:
                        with self._line_lock:
                            self._on_line(line)
                    except Exception as exc:  # a parser bug must not stop the pump (the child would block)
                        tail.append(f"[zeus: metric parser error: {exc!r}]")
        stream.close()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._proc.wait(timeout)

    def join_output(self, timeout: float = 5.0) -> None:
        for t in self._threads:
            t.join(timeout)

    def stop(self, grace_s: float = 5.0) -> int:
        """SIGTERM the process group, SIGKILL it if still alive after `grace_s`; returns the exit code."""
        if self._proc.poll() is None:
            self.killed_by_us = True
            self._signal(signal.SIGTERM)
            try:
                return self._proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
        return self._proc.wait()

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def tail_text(self, max_chars: int = 4000) -> str:
        parts = []
        if self.stdout_tail:
            parts.append("--- stdout (tail) ---\n" + "\n".join(self.stdout_tail))
        if self.stderr_tail:
            parts.append("--- stderr (tail) ---\n" + "\n".join(self.stderr_tail))
        return "\n".join(parts)[-max_chars:]

    def stderr_text(self, max_chars: int = 2000) -> str:
        return "\n".join(self.stderr_tail)[-max_chars:]
