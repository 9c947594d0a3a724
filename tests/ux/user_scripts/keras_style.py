"""A plain script as Keras users write them: argparse, `logging` for its own messages, and one line per epoch
the way Keras's model.fit prints it, `Epoch 3/10 - loss: 0.4100 - val_acc: 0.9120` (no name=value pair).

`--mode-file` names a file that says how this run goes, as a night's run might: `ok`; `crash` (a CUDA error
in the second epoch, after the first was reported); `sigterm` (the node is drained in the second epoch: the
process gets SIGTERM); `hang` (it prints three epochs, then waits forever on a stuck data loader)."""

import argparse
import logging
import os
import signal
import time

parser = argparse.ArgumentParser(description="CIFAR-10 (stand-in), Keras style")
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--mode-file", default="")
args = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")
mode = "ok"
if args.mode_file:
    with open(args.mode_file) as f:
        mode = f.read().strip()
log.info("loading CIFAR-10, batch size %d, mode %s", args.batch_size, mode)

for epoch in range(1, args.epochs + 1):
    if mode == "crash" and epoch == 2:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if mode == "sigterm" and epoch == 2:
        os.kill(os.getpid(), signal.SIGTERM)
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)  # stands in for training and evaluation
    print(f"Epoch {epoch}/{args.epochs} - loss: {1.0 - accuracy:.4f} - val_acc: {accuracy:.4f}", flush=True)
    if mode == "hang" and epoch == 3:
        log.info("waiting for the data loader")
        time.sleep(3600)
