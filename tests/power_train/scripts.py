"""Producer scripts for the collector tests: a dedented body written to a file, run with this Python."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def write_script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]
