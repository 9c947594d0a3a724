"""One place that turns an exception into what a person sees: one line on stderr and an exit code.

Why central: every command fails the same way, no command has to remember to catch, and no
ordinary mistake ends in a traceback. The codes:

- 2 (BAD_INPUT): what the user typed or pointed at is not allowed. The message names the option
  or field and what is allowed (zeus_kfp.errors.FieldError and the project's ValueErrors say so).
- 1 (FAILED): the environment or a run failed (a file system, the store, a pipeline step); the
  message says what failed and where.
- 128 + the signal (130 for SIGINT, 143 for SIGTERM): interrupted.

Anything else is a bug or a case nobody foresaw: one line naming the exception, and "run with
--debug for the traceback" (the global `zeus-kfp --debug` re-raises instead).
"""

from __future__ import annotations

import re
import signal

BAD_INPUT = 2
FAILED = 1
DEBUG_HINT = "run with --debug for the traceback"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def one_line(text: str) -> str:
    """`text` on one line: ANSI codes dropped, its non-empty lines joined with ' | '."""
    lines = [line.strip() for line in _ANSI.sub("", str(text)).splitlines()]
    return " | ".join(line for line in lines if line)


def interrupted_code(signum: int) -> int:
    """The shell's exit status for a process ended by `signum` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)


def _os_message(err: OSError) -> str:
    """'Permission denied: /path' rather than "[Errno 13] Permission denied: '/path'"."""
    if err.strerror and err.filename is not None:
        target = f"{err.filename} -> {err.filename2}" if err.filename2 is not None else str(err.filename)
        return f"{err.strerror}: {target}"
    return str(err) or type(err).__name__


def _is_runtime_failure(err: BaseException) -> bool:
    """Errors the project raises for a failed run or environment (not bugs: those are the subclasses)."""
    return isinstance(err, RuntimeError) and not isinstance(err, (NotImplementedError, RecursionError))


def describe(err: BaseException) -> tuple[int, str]:
    """(exit code, the one line to print) for an exception that ended a command."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.store.errors import EventConflictError, StoreError, UnknownJobError

    if isinstance(err, KeyboardInterrupt):
        signum = getattr(err, "signum", signal.SIGINT)
        return interrupted_code(signum), f"interrupted by {signal.Signals(signum).name}"
    if isinstance(err, EventConflictError):  # a ValueError, but about stored data, not the input
        return FAILED, f"error: {one_line(err)}"
    if isinstance(err, (ValueError, UnknownJobError)):
        return BAD_INPUT, f"error: {one_line(err)}"
    if isinstance(err, OSError):
        return FAILED, f"error: {one_line(_os_message(err))}"
    if isinstance(err, StoreError) or _is_runtime_failure(err):
        return FAILED, f"error: {one_line(err)}"
    detail = one_line(err)
    return FAILED, f"error: unexpected {type(err).__name__}{': ' + detail if detail else ''} ({DEBUG_HINT})"
