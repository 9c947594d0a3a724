"""The file-backed metric manager: what a trial leaves in its log directory, and how it is read back.

Why files: the script and the train step are different processes (possibly different
containers sharing a volume), so the handover is a directory with fixed names:

    result.json    the TrialResult (plus per-epoch metrics), written once when the trial ends
    profile.csv    the power profile table (contract columns, `simulated` flag on every row)
    model.pt       the trained model, when the script saves one

`result.json` is written atomically (temp file + rename) so a reader never sees half a result.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from zeus_kfp.job import Pricing, TrialResult
from zeus_kfp.profiles import PowerProfile

RESULT_FILE = "result.json"
PROFILE_FILE = "profile.csv"
MODEL_FILE = "model.pt"


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file and a rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_result(log_dir: str | Path, result: TrialResult, **extra: Any) -> Path:
    path = Path(log_dir) / RESULT_FILE
    atomic_write_text(path, json.dumps({**result.to_dict(), **extra}, indent=2, default=str))
    return path


def read_result_json(log_dir: str | Path) -> dict[str, Any] | None:
    path = Path(log_dir) / RESULT_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text())


def result_from_json(spec: Pricing, data: dict[str, Any]) -> TrialResult:
    """Rebuild a TrialResult under `spec`'s cost function (the job's, not whatever the script assumed)."""
    return TrialResult.build(
        spec,
        batch_size=int(data["batch_size"]),
        status=data["status"],
        time_s=float(data["time_s"]),
        energy_j=float(data["energy_j"]),
        num_epochs=int(data["num_epochs"]),
        power_limit_w=data.get("power_limit_w"),
        metric=data.get("metric"),
        simulated=bool(data.get("simulated", False)),
        reason=str(data.get("reason", "")),
        source=str(data.get("source", "")),
    )


def write_profile(log_dir: str | Path, profile: PowerProfile) -> Path:
    path = Path(log_dir) / PROFILE_FILE
    atomic_write_text(path, profile.to_csv())
    return path


def read_profile(log_dir: str | Path) -> PowerProfile:
    """The trial's profile, empty when it wrote none."""
    path = Path(log_dir) / PROFILE_FILE
    return PowerProfile.from_csv(path) if path.exists() else PowerProfile.empty()


def model_path(log_dir: str | Path) -> Path | None:
    path = Path(log_dir) / MODEL_FILE
    return path if path.exists() else None
