"""A script that logs TensorBoard scalars the way TF and Katib's examples do: one writer per phase, in the
subdirectories train/ and validation/ of its log directory, each with its own `accuracy`."""

import argparse
import os

from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--logdir", required=True)
args = parser.parse_args()

train = SummaryWriter(os.path.join(args.logdir, "train"))
validation = SummaryWriter(os.path.join(args.logdir, "validation"))
for epoch in range(1, 6):
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)  # stands in for training and evaluation
    train.add_scalar("accuracy", min(1.0, accuracy + 0.05), epoch)  # training accuracy runs ahead
    validation.add_scalar("accuracy", accuracy, epoch)
    train.flush()
    validation.flush()
train.close()
validation.close()
