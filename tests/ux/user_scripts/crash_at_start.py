"""A plain script whose data path is wrong: it fails before its first epoch, whatever the batch size."""

import argparse
import csv

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--data", default="data/train.csv")
args = parser.parse_args()

with open(args.data) as f:
    rows = list(csv.reader(f))
for epoch in range(1, 9):
    print(f"epoch={epoch} val_acc={1.0 - 0.5 ** (epoch * 64 / args.batch_size):.4f}", flush=True)
