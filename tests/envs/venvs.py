"""Helpers for the tests marked `envs`: the environments users already have, which `make test` builds beside .venv:

- .venv-lowest: every dependency at the floor setup.cfg declares (constraints-lowest.txt), zeus-kfp editable;
- .venv-beside-zeus: zeus-kfp's wheel and ml-energy's zeus==0.16.0, both installed non-editable, as in an image.

`pytest` alone deselects these tests (pyproject.toml); `make test-envs` builds both environments and runs them.
A missing environment fails the test with the command that builds it: it is never skipped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def built_venv(name: str) -> Path:
    venv = ROOT / name
    if not (venv / ".installed").exists():
        pytest.fail(f"{venv} is not built: `make test-envs` builds it and runs these tests")
    return venv


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would give a CLI: no variable of this test process's venv or of
    the tests' S3 server, and PYTHONSAFEPATH so that no working directory shadows an installed package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "VIRTUAL_ENV", "PYTHON"))}
    return env | {"PYTHONSAFEPATH": "1", "NO_COLOR": "1", "COLUMNS": "160"} | extra


def run(command: list[str | Path], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run `command`; its output comes back in the assertion message when it fails."""
    proc = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=clean_env(**extra), capture_output=True, text=True, timeout=900
    )
    return proc
