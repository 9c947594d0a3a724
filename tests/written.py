"""Loads a written-out source (pipelines/sources.py) from a file, as Python loads the checked-in ones: the tests
that declare one more setting or request field see the text `make sources` would write for it, imported from
tmp_path, without touching the repository's files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_written(text: str, where: Path, name: str) -> ModuleType:
    """The module `text` is, written to `where`/`name`.py and imported under `name` (so inspect.getsource, which
    kfp reads, finds the file)."""
    path = where / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
