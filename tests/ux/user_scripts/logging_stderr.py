"""A hand-written PyTorch-style loop that reports through Python's `logging` with `basicConfig`'s default
format (`INFO:train:...`), which writes to stderr: the loss every 100 steps at the global step, the validation
accuracy at each epoch's end. Training stands in as a formula, so the test runs in a second:
val_acc = 1 - 0.5 ** (epoch * 64 / batch size)."""

import argparse
import logging
import math

parser = argparse.ArgumentParser(description="ResNet-18 (stand-in), logging")
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("train")
log.info("training for %d epochs at batch size %d", args.epochs, args.batch_size)
steps_per_epoch = math.ceil(50_000 / args.batch_size)
step = 0
for epoch in range(1, args.epochs + 1):
    for _ in range(steps_per_epoch):
        step += 1
        if step % 100 == 0:
            log.info("step=%d loss=%.4f", step, 1.0 / math.sqrt(step))
    log.info("epoch %d val_acc=%.4f", epoch, 1.0 - 0.5 ** (epoch * 64 / args.batch_size))
