"""A tiny data-parallel Zeus-aware training script for the torchrun tests (gloo on CPU, seconds).

Every rank trains a linear model under DistributedDataParallel on its shard (ZeusDataLoader makes
the DistributedSampler); the accuracy is all-reduced so every rank reports the global figure.
ZEUS_TEST_KILL_RANK / ZEUS_TEST_KILL_STEP make that rank kill itself (SIGKILL) after that many of
its training steps: a rank dying mid-trial, as one does when its node or process is lost.
ZEUS_TEST_PID_DIR: each rank writes "pid pgid" there, so a test can check nothing is left running.
"""

from __future__ import annotations

import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import TensorDataset

from zeus_kfp.train.dataloader import ZeusDataLoader


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pid_dir = os.environ.get("ZEUS_TEST_PID_DIR")
    if pid_dir:
        with open(os.path.join(pid_dir, f"rank-{rank}.pid"), "w") as fh:
            fh.write(f"{os.getpid()} {os.getpgid(0)}")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, 0] > 0).long()
    train = ZeusDataLoader(TensorDataset(x, y), shuffle=True)
    evals = ZeusDataLoader(TensorDataset(x[:128], y[:128]), split="eval", trial=train.trial, batch_size=32)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    kill_rank = int(os.environ.get("ZEUS_TEST_KILL_RANK", "-1"))
    kill_step = int(os.environ.get("ZEUS_TEST_KILL_STEP", "0"))
    steps = 0
    for epoch in train.epochs():
        for xb, yb in train:
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if rank == kill_rank and steps == kill_step:
                os.kill(os.getpid(), signal.SIGKILL)
        counts = torch.zeros(2)
        with torch.no_grad():
            for xb, yb in evals:
                counts += torch.tensor([(model(xb).argmax(1) == yb).sum().item(), len(yb)])
        dist.all_reduce(counts)
        accuracy = float(counts[0] / counts[1])
        if rank == 0:
            print(f"epoch={epoch + 1} accuracy={accuracy:.4f}", flush=True)
        train.report_metric(accuracy)
    train.save_model(model.module)
    dist.destroy_process_group()  # as PyTorch's DDP tutorial ends


if __name__ == "__main__":
    main()
