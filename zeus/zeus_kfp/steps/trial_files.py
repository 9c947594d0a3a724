"""Where a trial's files go: its log (the train step's `trial_log` artifact) and the lines the step prints
about them and about its model, which `zeus-kfp run` reads back (pipelines.local) and the KFP UI's step log
shows.

Why kept at all: the trial runs in a temporary work directory, deleted when the step ends; without this the
script's own output, the first thing a person needs when a trial fails, would be gone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Protocol

from zeus_kfp.job import TrialResult
from zeus_kfp.steps.step_lines import MODEL, NO_MODEL, TRIAL_LOG
from zeus_kfp.train.artifacts import MODEL_FILE, RESULT_FILE
from zeus_kfp.train.runner import LOG_SUBDIR

TRIAL_OUTPUT_FILES = ("stdout.log", "stderr.log")  # what the runner writes in a trial's work directory
KEEP_MAX_BYTES = 64 * 1024 * 1024


class FileArtifact(Protocol):
    """An output file with metadata (a KFP Artifact has this shape); zeus never imports kfp."""

    path: str
    metadata: dict[str, Any]


def keep_trial_log(work_dir: Path, target: Path) -> None:
    """The trial's log into `target`: the runner's stdout.log and stderr.log, then everything in the trial's
    {log_dir} but the model (the Model artifact has it); a file over KEEP_MAX_BYTES is named in not-kept.txt
    instead (a checkpoint, say: the log is for reading, not a second model store)."""
    target.mkdir(parents=True, exist_ok=True)
    sources = [work_dir / name for name in TRIAL_OUTPUT_FILES]
    logs = work_dir / LOG_SUBDIR
    if logs.is_dir():
        model = logs / MODEL_FILE
        sources += [p for p in sorted(logs.rglob("*")) if p.is_file() and not p.is_relative_to(model)]
    skipped = []
    for path in sources:
        if not path.is_file():
            continue
        name = path.relative_to(logs) if path.is_relative_to(logs) else Path(path.name)
        if path.stat().st_size > KEEP_MAX_BYTES:
            skipped.append(f"{name} ({path.stat().st_size} bytes)")
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / name)
    if skipped:
        (target / "not-kept.txt").write_text(f"over {KEEP_MAX_BYTES} bytes, not kept:\n" + "\n".join(skipped) + "\n")


def finish_log(artifact: FileArtifact, result: TrialResult) -> None:
    """The log artifact's own summary: its result (always, also when nothing ran) and its file count."""
    target = Path(artifact.path)
    target.mkdir(parents=True, exist_ok=True)
    if not (target / RESULT_FILE).is_file():
        (target / RESULT_FILE).write_text(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    artifact.metadata["files"] = sum(1 for p in target.rglob("*") if p.is_file())
    artifact.metadata["status"] = result.status.value


def _location(artifact: FileArtifact) -> str:
    """Where an artifact is for a person: its URI on a cluster (s3://...), its path locally."""
    uri = str(getattr(artifact, "uri", "") or "")
    return uri if uri and not uri.startswith(("/", "file:")) else str(artifact.path)


def say_where(model: FileArtifact, trial_log: FileArtifact | None) -> None:
    """One line each, which `zeus-kfp run` reads back (pipelines.local) and the KFP UI's step log shows."""
    if trial_log is not None:
        print(TRIAL_LOG.say(_location(trial_log)))
    if model.metadata.get("written"):
        print(MODEL.say(_location(model)))
    else:
        print(MODEL.say(f"{NO_MODEL} (the script saved no model: save it as {{log_dir}}/model.pt to keep it)"))
