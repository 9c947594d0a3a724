"""The `zeus-kfp` console script as a real process: what a user runs, signals and pipes included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ZEUS_KFP = str(Path(sys.executable).with_name("zeus-kfp"))
DEADLINE_S = 180.0  # a guard against a hang, never a timing assumption: waits end when their condition holds


def cli_env(**extra: str) -> dict[str, str]:
    """This environment without the store/KFP/terminal settings a developer may have exported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_KFP_", "ZEUS_S3_", "KFP_"))}
    env.pop("FORCE_COLOR", None)
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path, timeout: float = DEADLINE_S, **env: str) -> subprocess.CompletedProcess[str]:
    """`zeus-kfp args...` to completion, stdout and stderr piped (so: not a terminal)."""
    return subprocess.run(
        [ZEUS_KFP, *args], cwd=cwd, env=cli_env(**env), capture_output=True, text=True, timeout=timeout, check=False
    )


def start_cli(*args: str, cwd: Path, stdout: Path, stderr: Path, **env: str) -> subprocess.Popen:
    """`zeus-kfp args...` in its own process group, as a shell starts a foreground job (Ctrl-C reaches
    the whole group), with its output in files."""
    with stdout.open("w") as out, stderr.open("w") as err:
        return subprocess.Popen(
            [ZEUS_KFP, *args], cwd=cwd, env=cli_env(), stdout=out, stderr=err, text=True, start_new_session=True
        )


def wait_for(condition: Callable[[], object], what: str, deadline_s: float = DEADLINE_S) -> object:
    """Poll until `condition()` is truthy; fail naming `what` if the deadline passes first."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")
