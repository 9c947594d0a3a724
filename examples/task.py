"""The example model and its training/eval steps, shared by the Zeus-aware and the plain script.

A small MLP trained with plain SGD at a fixed learning rate: a larger batch makes fewer
updates per epoch, so it needs more epochs to reach the target and the largest sizes miss it
within max_epochs, while the smallest make many slow steps. That trade-off is what the
batch-size bandit has to learn.
"""

from __future__ import annotations

import os

import torch
from preprocess import DIM, NUM_CLASSES, load_dataset
from torch import nn
from torch.utils.data import TensorDataset

LEARNING_RATE = 0.05


def datasets(data_dir: str | None) -> tuple[TensorDataset, TensorDataset]:
    data = load_dataset(data_dir)
    train = TensorDataset(torch.from_numpy(data["train_x"]), torch.from_numpy(data["train_y"]))
    evals = TensorDataset(torch.from_numpy(data["eval_x"]), torch.from_numpy(data["eval_y"]))
    return train, evals


def build(device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The MLP. ZEUS_EXAMPLE_HIDDEN (width, default 64) and ZEUS_EXAMPLE_DEPTH (extra hidden layers,
    default 0) make it compute-bound on a real GPU, where the tiny default is bound by kernel launches
    and draws the same power at every limit; the defaults are what the example job's numbers assume."""
    torch.manual_seed(0)
    hidden = int(os.environ.get("ZEUS_EXAMPLE_HIDDEN", "64"))
    depth = int(os.environ.get("ZEUS_EXAMPLE_DEPTH", "0"))
    layers: list[nn.Module] = [nn.Linear(DIM, hidden), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(hidden, hidden), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(hidden, NUM_CLASSES)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    torch.set_num_threads(1)  # tiny model: one thread is fastest and steadiest on a shared CPU
    return torch.device("cpu")
