"""A plain script logging to TensorBoard as most do: `Loss/train` every 50 steps at the global step, and the
validation accuracy after each epoch, at the epoch index (`--at epoch`, as most scripts log it) or at the global
step (`--at global`). Training stands in as a formula: accuracy = 1 - 0.5 ** (epoch * 64 / batch size)."""

import argparse

from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--logdir", required=True)
parser.add_argument("--at", choices=("epoch", "global"), default="epoch")
args = parser.parse_args()

writer = SummaryWriter(args.logdir)
steps, step = -(-50_000 // args.batch_size), 0
for epoch in range(1, 9):
    for _ in range(steps):
        step += 1
        if step % 50 == 0:
            writer.add_scalar("Loss/train", 1.0 / step, step)
    accuracy = 1 - 0.5 ** (epoch * 64 / args.batch_size)
    writer.add_scalar("Accuracy/val", accuracy, epoch if args.at == "epoch" else step)
    writer.flush()
writer.close()
