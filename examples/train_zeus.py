"""The example job, Zeus-aware: ZeusDataLoader profiles power limits and stops the trial itself.

Run by zeus.train.run_trial, which sets the ZEUS_* environment (batch size, target, max
epochs, log dir, ...). The model is saved to $ZEUS_LOG_DIR/model.pt when the trial ends.
"""

from __future__ import annotations

import os

import torch
from task import build, datasets, pick_device, train_step

from zeus.train.dataloader import ZeusDataLoader


def main() -> None:
    device = pick_device()
    train_set, eval_set = datasets(os.environ.get("ZEUS_DATA_DIR"))
    torch.manual_seed(0)
    train_loader = ZeusDataLoader(train_set, shuffle=True)
    eval_loader = ZeusDataLoader(eval_set, split="eval", trial=train_loader.trial, batch_size=1024)
    model, opt = build(device)
    for epoch in train_loader.epochs():
        model.train()
        for x, y in train_loader:
            train_step(model, opt, x.to(device), y.to(device))
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in eval_loader:
                correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
                total += len(y)
        accuracy = correct / total
        print(f"epoch={epoch + 1} accuracy={accuracy:.4f}", flush=True)
        train_loader.report_metric(accuracy)
    train_loader.save_model(model)


if __name__ == "__main__":
    main()
