"""The example job as a plain script: knows nothing of Zeus, prints Katib-style `name=value` lines.

It prints `step=N` every --log-every steps and `epoch=E step=N accuracy=A` after each epoch's
evaluation. The runner (zeus_kfp.train.run_trial with zeus_aware=False) collects those lines (Katib's
stdout collector), profiles power limits from outside on the step counter, measures energy, and
stops the script when the target is reached, the cost passes the threshold or max epochs pass.

    python examples/train_plain.py --batch-size 128 [--epochs 10] [--data-dir D] [--out-dir D] [--log-every 10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from task import build, datasets, pick_device, train_step
from torch.utils.data import DataLoader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--log-every", type=int, default=10, help="print step=N every this many steps")
    args = parser.parse_args()

    device = pick_device()
    train_set, eval_set = datasets(args.data_dir)
    torch.manual_seed(0)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(eval_set, batch_size=1024)
    model, opt = build(device)
    step = 0
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            train_step(model, opt, x.to(device), y.to(device))
            step += 1
            if step % args.log_every == 0:
                print(f"step={step}", flush=True)
        model.eval()
        with torch.no_grad():
            correct = sum((model(x.to(device)).argmax(1) == y.to(device)).sum().item() for x, y in eval_loader)
        if args.out_dir:
            Path(args.out_dir).mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), Path(args.out_dir) / "model.pt")
        print(f"epoch={epoch + 1} step={step} accuracy={correct / len(eval_set):.4f}", flush=True)


if __name__ == "__main__":
    main()
