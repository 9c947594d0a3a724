"""Helpers for the tests marked `envs`: the environments users already have, which `make test` builds beside .venv:

- .venv-lowest: every dependency at the floor setup.cfg declares (constraints-lowest.txt), zeus-kfp editable;
- .venv-beside-zeus: zeus-kfp's wheel and ml-energy's zeus==0.16.0, both installed non-editable, as in an image.

`pytest` alone deselects these tests (pyproject.toml); `make test-envs` builds both environments and runs them.
`make test` builds them in the background while the rest of the suite runs, telling these tests where the build
says it has ended (ZEUS_TEST_ENVS_STATUS: its exit status, once it has one); each waits for that, so they run
as soon as the build is done and beside whatever of the suite is left. A missing environment fails the test with
the command that builds it, a failed build with the end of its output: it is never skipped.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATUS_ENV, LOG_ENV = "ZEUS_TEST_ENVS_STATUS", "ZEUS_TEST_ENVS_LOG"
BUILD_WAIT_S = 3600.0  # a guard against a hung build only: at load 25 a fresh build takes many minutes


def wait_for_build() -> None:
    """Wait until `make test`'s background build of the environments has ended (no build running: at once);
    fail with the end of its output if it failed."""
    status = os.environ.get(STATUS_ENV)
    if not status:
        return
    deadline = time.monotonic() + BUILD_WAIT_S
    while not (Path(status).exists() and Path(status).read_text().strip()):
        if time.monotonic() > deadline:
            pytest.fail(f"the environments' build did not end within {BUILD_WAIT_S:.0f} s ({status} is empty)")
        time.sleep(1.0)
    code = Path(status).read_text().strip()
    if code != "0":
        log = Path(os.environ.get(LOG_ENV, ""))
        tail = "\n".join(log.read_text().splitlines()[-40:]) if log.is_file() else "(no log)"
        pytest.fail(f"building the environments failed (exit status {code}); the end of {log}:\n{tail}")


def built_venv(name: str) -> Path:
    wait_for_build()
    venv = ROOT / name
    if not (venv / ".installed").exists():
        pytest.fail(f"{venv} is not built: `make test-envs` builds it and runs these tests")
    return venv


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would give a CLI: no variable of this test process's venv or of
    the tests' S3 server, and PYTHONSAFEPATH so that no working directory shadows an installed package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_", "VIRTUAL_ENV", "PYTHON", "PYTEST_"))}
    return env | {"PYTHONSAFEPATH": "1", "NO_COLOR": "1", "COLUMNS": "160"} | extra


def run(command: list[str | Path], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run `command`; its output comes back in the assertion message when it fails."""
    proc = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=clean_env(**extra), capture_output=True, text=True, timeout=900
    )
    return proc
