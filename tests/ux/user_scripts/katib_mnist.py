"""A Katib trial script as Katib's examples write one: argparse hyperparameters, metrics logged to a file
(Katib's default path, /var/log/katib/metrics.log) through `logging` with an RFC 3339 timestamp."""

import argparse
import logging
import os


def accuracy_after(epoch: int, batch_size: int) -> float:
    """Stands in for training and evaluation (so the test runs in a second): larger batches learn slower per epoch."""
    return 1.0 - 0.5 ** (epoch * 64 / batch_size)


parser = argparse.ArgumentParser(description="MNIST (stand-in) for Katib")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--log-path", type=str, default="/var/log/katib/metrics.log")
args = parser.parse_args()

os.makedirs(os.path.dirname(args.log_path), exist_ok=True)
logging.basicConfig(
    format="%(asctime)s %(levelname)-8s %(message)s",
    datefmt="%Y-%m-%dT%H:%M:%SZ",
    level=logging.INFO,
    filename=args.log_path,
)
for epoch in range(1, args.epochs + 1):
    logging.info("epoch=%d val_acc=%.4f", epoch, accuracy_after(epoch, args.batch_size))
