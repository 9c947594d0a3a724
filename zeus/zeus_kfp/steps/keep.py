"""The files a trial keeps: what the script saved where it saves them, as the train step's Model artifact.

Why: a trial runs in a temporary work directory that is deleted when it ends, and people's scripts save
their model where they always do (`checkpoints/model.pt`, `./outputs/best.pt`), not in `{log_dir}/model.pt`;
every copy was deleted with the trial. `keep` names them: comma-separated globs relative to the
trial's work directory (`checkpoints/*.pt,outputs/best.pt`; `**` for any depth). What they match becomes the
Model artifact: one file as that file, several as a directory that keeps their relative paths. And a
trial that kept no model names the files its script wrote that are about to go, so the next run can keep
them.

Where: on the train step's machine (a local or torchrun trial). A cluster trial's pods (launcher trainjob or
pytorchjob) hand back through the store only its result, its power profile and rank 0's `{log_dir}/model.pt`;
their work directories are theirs and go with them, so `keep` with a cluster launcher is refused (`for_launcher`),
naming what to do instead, rather than accepted and matching nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from zeus_kfp.errors import FieldError

KEEP_ALLOWED = "comma-separated globs relative to the trial's work directory, e.g. 'checkpoints/*.pt,outputs/best.pt'"
DELETED_NOTE = "deleted-files.txt"  # in the trial's log: what the script wrote and the trial did not keep
SHOWN = 8  # files named at most


def keep_globs(keep: str) -> list[str]:
    """The globs of `keep`, or FieldError naming `keep`: each relative, inside the work directory."""
    globs = [part.strip() for part in (keep or "").split(",") if part.strip()]
    for glob in globs:
        path = PurePosixPath(glob)
        if path.is_absolute() or ".." in path.parts:
            raise FieldError("keep", keep, KEEP_ALLOWED + f" ({glob!r} is not inside it)")
    return globs


CLUSTER_KEEP_ALLOWED = (
    "no --keep with a cluster launcher ({launcher}): its pods hand back through the store only the trial's result, "
    "power profile and rank 0's {{log_dir}}/model.pt, the Model artifact (save the model there), or compile with "
    "--launcher local or torchrun, whose trials keep what the globs match"
)


def for_launcher(keep: str, launcher: str, cluster: bool) -> list[str]:
    """keep_globs(keep), refused (FieldError naming `keep`) for a cluster trial, whose pods' files never reach the
    train step."""
    globs = keep_globs(keep)
    if globs and cluster:
        raise FieldError("keep", keep, CLUSTER_KEEP_ALLOWED.format(launcher=launcher))
    return globs


def kept_files(work_dir: Path, keep: str) -> list[Path]:
    """The files under `work_dir` that `keep` matches, sorted, each once."""
    found = {path for glob in keep_globs(keep) for path in work_dir.glob(glob) if path.is_file()}
    return sorted(found)


def copy_kept(files: list[Path], work_dir: Path, target: Path) -> None:
    """One file: `target` is a copy of it; several: `target` is a directory of them at their relative paths."""
    if len(files) == 1:
        shutil.copyfile(files[0], target)
        return
    for path in files:
        into = target / path.relative_to(work_dir)
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, into)


def left_behind(work_dir: Path, kept: list[Path], ours: set[str]) -> list[str]:
    """The files the script wrote under `work_dir` that go with it: not kept, not the runner's own (`ours`:
    top-level names the runner made)."""
    out = []
    for path in sorted(work_dir.rglob("*")):
        relative = path.relative_to(work_dir)
        if path.is_file() and relative.parts[0] not in ours and path not in kept:
            out.append(relative.as_posix())
    return out


def deleted_note(files: list[str]) -> str:
    """What the trial's log and the run say of them."""
    shown = ", ".join(files[:SHOWN]) + (f" and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
    return f"the script wrote {shown}, deleted with the trial's work directory; keep them with --keep '<glob>'"
