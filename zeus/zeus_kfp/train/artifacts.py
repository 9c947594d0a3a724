"""The file-backed metric manager: what a trial leaves in its log directory, and how it is read back.

Why files: the script and the train step are different processes (possibly different
containers sharing a volume), so the handover is a directory with fixed names:

    result.json      the TrialResult (plus per-epoch metrics), written once when the trial ends
    profile.parquet  the power profile the trial measured (PowerProfile.to_parquet: PROFILE_SCHEMA's columns,
                     the `simulated` flag on every row)
    model.pt         the trained model, when the script saves one

and the other way, in the trial's work directory beside the log dir, the stored profile to train at
(reuse_profile.parquet, ZEUS_PROFILE_PATH). Both profiles are the same Parquet the KFP artifacts and a cluster
trial's handoff carry: the training child is zeus_kfp's own code (ZeusDataLoader; a plain script never reads or
writes a profile, the runner profiles it from outside), so no plain-text shape is needed for a script.

Each file is written whole (zeus_kfp.files.replace_file), so a reader never sees half a result or profile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zeus_kfp.files import replace_file
from zeus_kfp.job import Pricing, TrialResult
from zeus_kfp.profiles import PowerProfile

RESULT_FILE = "result.json"
PROFILE_FILE = "profile.parquet"
REUSE_PROFILE_FILE = "reuse_profile.parquet"  # in the work dir (the log dir's parent) or a pod's
MODEL_FILE = "model.pt"


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file and a rename: a reader sees the old file or the new one."""
    replace_file(path, text.encode())


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
    profile.to_parquet(path)
    return path


def read_profile(log_dir: str | Path) -> PowerProfile:
    """The trial's profile, empty when it wrote none."""
    path = Path(log_dir) / PROFILE_FILE
    return PowerProfile.read_parquet(path) if path.exists() else PowerProfile.empty()


def model_path(log_dir: str | Path) -> Path | None:
    path = Path(log_dir) / MODEL_FILE
    return path if path.exists() else None
