"""A compute-bound plain script for a real GPU: a small residual CNN on CIFAR-shaped synthetic data, bf16 autocast.

What benchmarks/gpu_sweep.py sweeps on a lent GPU and runs through `zeus-kfp run`: it knows nothing of Zeus and
prints Katib-style lines, `step=N loss=L` every --every steps and `epoch=E step=N accuracy=A` after each epoch's
evaluation. The data are random tensors (no download: the device machine reaches nothing), so the model cannot
learn them; the accuracy it prints follows a fixed schedule, `1 - 0.5 ** (epoch / halving)`, which makes trials
reach the target at a known epoch while the GPU does real work of a ResNet-sized model.

    python examples/train_gpu_plain.py --batch-size 256 [--epochs 30] [--every 10] [--halving 1.5]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


def block(channels: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(channels, channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(channels, channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
    )


class Net(nn.Module):
    """A ResNet-like stack (about 5 M parameters): enough compute per sample to draw a GPU's power."""

    def __init__(self, width: int = 128, blocks: int = 4) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.ModuleList(block(width) for _ in range(blocks))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for b in self.blocks:
            x = torch.relu(x + b(x))
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--halving", type=float, default=1.5)
    parser.add_argument("--epoch-samples", type=int, default=50_000)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = Net().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    x = torch.randn(args.batch_size, 3, 32, 32, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (args.batch_size,), device=device)
    steps, step = max(1, args.epoch_samples // args.batch_size), 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        for _ in range(steps):
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % args.every == 0:
                print(f"step={step} loss={loss.item():.4f}", flush=True)  # .item() waits for the GPU: paced
        model.eval()
        with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
            model(x).argmax(dim=1).sum().item()
        print(f"epoch={epoch} step={step} accuracy={1.0 - 0.5 ** (epoch / args.halving):.4f}", flush=True)


if __name__ == "__main__":
    main()
