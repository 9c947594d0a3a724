"""The example job, Zeus-aware: ZeusDataLoader profiles power limits and stops the trial itself.

Run by zeus_kfp.train.run_trial, which sets the ZEUS_* environment (batch size, target, max
epochs, log dir, ...). The model is saved to $ZEUS_LOG_DIR/model.pt when the trial ends.

Under torchrun (launcher torchrun, trainjob or pytorchjob) the same script trains data-parallel:
it joins the process group, wraps the model in DistributedDataParallel and all-reduces the
accuracy, so every rank reports the global figure; ZeusDataLoader shards the data and keeps the
ranks' power limits in lockstep (zeus_kfp.train.distributed).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from task import build, datasets, pick_device, train_step
from torch.nn.parallel import DistributedDataParallel

from zeus_kfp.train.dataloader import ZeusDataLoader


def join_process_group(device: torch.device) -> torch.device:
    """Under torchrun: one GPU per rank (NCCL), or gloo on CPU. Returns this rank's device."""
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def main() -> None:
    device = pick_device()
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        device = join_process_group(device)
    train_set, eval_set = datasets(os.environ.get("ZEUS_DATA_DIR"))
    torch.manual_seed(0)
    train_loader = ZeusDataLoader(train_set, shuffle=True)
    eval_loader = ZeusDataLoader(eval_set, split="eval", trial=train_loader.trial, batch_size=1024)
    model, opt = build(device)
    net = (
        DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if distributed
        else model
    )
    for epoch in train_loader.epochs():
        net.train()
        for x, y in train_loader:
            train_step(net, opt, x.to(device), y.to(device))
        net.eval()
        counts = torch.zeros(2, device=device)
        with torch.no_grad():
            for x, y in eval_loader:
                counts[0] += (net(x.to(device)).argmax(1) == y.to(device)).sum()
                counts[1] += len(y)
        if distributed:
            dist.all_reduce(counts)  # every rank's shard: the global accuracy on every rank
        accuracy = float(counts[0] / counts[1])
        if not distributed or dist.get_rank() == 0:
            print(f"epoch={epoch + 1} accuracy={accuracy:.4f}", flush=True)
        train_loader.report_metric(accuracy)
    train_loader.save_model(model)


if __name__ == "__main__":
    main()
