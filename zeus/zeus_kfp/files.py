"""Replacing a file whole: what a process hands another through a shared directory (a trial's result.json and
power profile, the live threshold, a rank's record, the KFP artifacts of a profile).

Why a temporary file and a rename: the reader may look while the writer is killed mid-write (a trial stopped
by SIGKILL, a retried step), and then sees the old file or the whole new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` (its folder made if missing) through a temporary file beside it and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
