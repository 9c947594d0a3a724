"""A plain script that saves its model where people save it: `checkpoints/model.pt` under the directory it
runs in, rewritten each epoch as a temporary file then renamed (a reader never sees half a checkpoint)."""

import argparse
import os
import pickle

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args()

os.makedirs("checkpoints", exist_ok=True)
for epoch in range(1, args.epochs + 1):
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)  # stands in for training and evaluation
    with open("checkpoints/model.pt.tmp", "wb") as f:
        pickle.dump({"epoch": epoch, "batch_size": args.batch_size, "val_acc": round(accuracy, 4)}, f)
    os.replace("checkpoints/model.pt.tmp", "checkpoints/model.pt")
    print(f"epoch={epoch} val_acc={accuracy:.4f}", flush=True)
