"""The example job shipped in examples/: its spec, its command lines, and its dataset step.

Why here: the pipeline, the CLI and the tests all need "the example" and must agree with the
scripts on batch sizes, target and epochs; this is the single place that says what they are.
The numbers were measured with examples/train_plain.py on CPU (seed 0): at target 0.85
accuracy within 10 epochs, batch sizes 16-256 reach it (1, 1, 2, 3, 6 epochs) and 512 and
1024 do not, so the retry loop and the bandit have something to learn.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from zeus_kfp.job import JobSpec

EXAMPLES_DIR_ENV = "ZEUS_KFP_EXAMPLES_DIR"
REPO_EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE_KINDS = ("zeus", "plain")
EXAMPLE_MAX_POWER_W = 250.0  # the simulated V100's maximum limit


def example_spec(job_id: str = "example") -> JobSpec:
    return JobSpec(
        job_id=job_id,
        batch_sizes=(16, 32, 64, 128, 256, 512, 1024),
        default_batch_size=128,
        target_metric=0.85,
        max_epochs=10,
        metric_name="accuracy",
        higher_is_better=True,
        max_power_w=EXAMPLE_MAX_POWER_W,
    )


def examples_dir() -> Path:
    """Where the example scripts are: $ZEUS_KFP_EXAMPLES_DIR (the component image sets it to
    /opt/zeus-kfp/examples), else the repository's examples/ beside this package (a source checkout)."""
    override = os.environ.get(EXAMPLES_DIR_ENV)
    return Path(override) if override else REPO_EXAMPLES_DIR


def _script(name: str) -> Path:
    path = examples_dir() / name
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: the example scripts live in the repository's examples/ folder; "
            f"set {EXAMPLES_DIR_ENV} to the folder that holds them"
        )
    return path


def example_command(kind: str = "zeus") -> list[str]:
    """The command that runs the example: "zeus" (ZeusDataLoader) or "plain" (prints accuracy=...)."""
    if kind == "zeus":
        return [sys.executable, str(_script("train_zeus.py"))]
    if kind == "plain":
        return [
            sys.executable,
            str(_script("train_plain.py")),
            "--batch-size",
            "{batch_size}",
            "--epochs",
            str(example_spec().max_epochs),
            "--data-dir",
            "{data_dir}",
            "--out-dir",
            "{log_dir}",
        ]
    raise ValueError(f"invalid kind={kind!r}: allowed {', '.join(EXAMPLE_KINDS)}")


def make_dataset(out_dir: str) -> None:
    """Write the example's dataset (examples/preprocess.py, deterministic, no download) to out_dir."""
    spec = importlib.util.spec_from_file_location("zeus_example_preprocess", _script("preprocess.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    module.make_dataset(out_dir)
