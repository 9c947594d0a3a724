"""A plain script as people write them: argparse, a slow start (loading a dataset), and one line of metrics per
epoch, `train_loss=... val_acc=...`, that names no step or epoch counter."""

import argparse
import os
import pickle
import time

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=".")
args = parser.parse_args()

time.sleep(1.5)  # stands in for loading the dataset: longer than an epoch of training takes here


def train_one_epoch(epoch: int) -> tuple[float, float]:
    """Stands in for your training loop and evaluation: (train loss, validation accuracy) after `epoch` epochs."""
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)
    return 1.0 - accuracy, accuracy


for epoch in range(1, args.epochs + 1):
    loss, accuracy = train_one_epoch(epoch)
    print(f"train_loss={loss:.4f} val_acc={accuracy:.4f}", flush=True)
    with open(os.path.join(args.out, "model.pt"), "wb") as f:
        pickle.dump({"epoch": epoch, "weights": [loss, accuracy]}, f)
