"""The live early-stop threshold: a file the trial reads at every epoch end, which the train step keeps up to
date with the job's early stop (the policy's rule on the history as the store holds it now).

Why a file, written for the script and read by it (docs/DESIGN.md, "The live threshold"):
- the training child must not read the store (zeus/zeus_kfp/train imports no store: a GPU pod needs no store
  credentials, and the user's script is any process, started from any command line);
- a store that is slow, unreachable or failing must never stall or stop a training loop: the step's
  reader thread (zeus_kfp.steps.threshold_feed) absorbs that, and all the script ever does is read a small
  local file, which it cannot wait on;
- it is the same kind of hand-over as result.json and profile.parquet. Where the script shares the step's file
  system (launcher local, torchrun) the step writes the file into the trial's work directory; a cluster
  trial's pods (TrainJob, PyTorchJob) get it from a ConfigMap the step patches and the kubelet projects into
  a directory mounted in every pod (zeus_kfp.launch.threshold_sink), within its sync period (about a minute).

A missing, unreadable or malformed file means "nothing newer": the trial keeps its dispatched threshold.
The file can only lower the dispatched threshold (`zeus_kfp.job.live_threshold`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from zeus_kfp.job import live_threshold
from zeus_kfp.train.artifacts import atomic_write_text

LIVE_THRESHOLD_FILE = "live_threshold.json"  # in the trial's work directory, or the key of a cluster trial's ConfigMap


def threshold_json(threshold: float) -> str:
    """The file's content for the job's early stop `threshold` (the one format, whichever way it travels)."""
    return json.dumps({"threshold": float(threshold)})


def write_live_threshold(path: str | Path, threshold: float) -> None:
    """Write the job's early stop (`threshold`) atomically: a reader sees the old file or the
    new one, never half of one."""
    atomic_write_text(Path(path), threshold_json(threshold))


def read_live_threshold(path: str | Path | None) -> float | None:
    """The threshold in the file at `path`, or None when there is no usable one (no path, no file yet, not
    JSON, not a positive finite number)."""
    if not path:
        return None
    try:
        value = json.loads(Path(path).read_text())["threshold"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def current_threshold(dispatched: float | None, path: str | Path | None) -> float | None:
    """The threshold to check now: the dispatched one, lowered by the live file when it has a lower one."""
    return live_threshold(dispatched, read_live_threshold(path))
