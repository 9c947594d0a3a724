"""A hand-rolled training loop's own report: one line per epoch, `Epoch 1: train_loss=1.000 val_acc=0.4500`, with
`print`. Training stands in as a formula, so the test runs in a second: val_acc = 1 - 0.5 ** (epoch * 64 / batch
size)."""

import argparse

parser = argparse.ArgumentParser(description="MLP (stand-in), hand-rolled loop")
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

for epoch in range(1, args.epochs + 1):
    val_acc = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)
    print(f"Epoch {epoch}: train_loss={1.0 / epoch:.3f} val_acc={val_acc:.4f}")
