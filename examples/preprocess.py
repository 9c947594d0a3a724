"""The example job's dataset: deterministic and synthetic, so nothing is downloaded at run time.

Eight classes of points in 32 dimensions: Gaussian clusters pushed through a fixed random
tanh layer (so a linear model is not enough) with 5% of labels flipped (so accuracy tops out
near 0.89 and the target takes real training). Same seed, same bytes, on every machine.

    python examples/preprocess.py OUT_DIR      # writes OUT_DIR/dataset.npz
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATASET_FILE = "dataset.npz"
NUM_CLASSES = 8
DIM = 32
NUM_TRAIN = 16384
NUM_EVAL = 2048


def generate(seed: int = 0) -> dict[str, np.ndarray]:
    """The dataset as arrays: train_x, train_y, eval_x, eval_y."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(NUM_CLASSES, DIM))
    mixing = rng.normal(size=(DIM, DIM)) / np.sqrt(DIM)

    def split(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, NUM_CLASSES, n)
        x = np.tanh((centers[y] + 1.4 * rng.normal(size=(n, DIM))) @ mixing)
        flipped = rng.random(n) < 0.05
        y = np.where(flipped, rng.integers(0, NUM_CLASSES, n), y)
        return x.astype(np.float32), y.astype(np.int64)

    train_x, train_y = split(NUM_TRAIN)
    eval_x, eval_y = split(NUM_EVAL)
    return {"train_x": train_x, "train_y": train_y, "eval_x": eval_x, "eval_y": eval_y}


def make_dataset(out_dir: str) -> None:
    """Write the example dataset to out_dir/dataset.npz (the pipeline's preprocess step calls this)."""
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / DATASET_FILE, **generate())


def load_dataset(data_dir: str | None) -> dict[str, np.ndarray]:
    """Read the dataset from data_dir, or generate it in memory when no directory is given."""
    if not data_dir:
        return generate()
    path = Path(data_dir) / DATASET_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: run examples/preprocess.py {data_dir} first")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/preprocess.py OUT_DIR")
    make_dataset(sys.argv[1])
