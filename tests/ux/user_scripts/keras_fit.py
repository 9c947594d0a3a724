"""A script that trains with Keras's `model.fit(..., verbose=2)`, printing as Keras 3 prints: the epoch on a
line of its own, then one line of the epoch's metrics (steps, time, time per step, then each metric). TensorFlow's
start-up notes go to stderr, as TensorFlow writes them. Training stands in as a formula, so the test runs in a
second: val_accuracy = 1 - 0.5 ** (epoch * 64 / batch size); the training accuracy runs one halving ahead."""

import argparse
import math
import sys

parser = argparse.ArgumentParser(description="CIFAR-10 (stand-in), model.fit(verbose=2)")
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

print(
    "2026-12-07 10:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    file=sys.stderr,
    flush=True,
)
steps = math.ceil(50_000 / args.batch_size)
for epoch in range(1, args.epochs + 1):
    print(f"Epoch {epoch}/{args.epochs}", flush=True)  # keras.utils.io_utils.print_msg flushes
    val_accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size + 1)
    print(
        f"{steps}/{steps} - 5s - 6ms/step - accuracy: {accuracy:.4f} - loss: {1 - accuracy:.4f} - "
        f"val_accuracy: {val_accuracy:.4f} - val_loss: {1 - val_accuracy:.4f}",
        flush=True,
    )
