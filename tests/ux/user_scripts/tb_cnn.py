"""A small CNN trained on synthetic data, written the way PyTorch's tutorials write one: argparse, a DataLoader,
TensorBoard's SummaryWriter (the training loss every step, the validation accuracy every epoch), the best model
so far saved after every epoch that improved on it, atomically (as Lightning's atomic_save does): a run stopped
while saving keeps its last whole checkpoint."""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser(description="tiny CNN")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--logdir", default="runs")
parser.add_argument("--model-dir", default=".")
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
images = torch.randn(512, 1, 8, 8)
labels = (images[:, 0, 2:6, 2:6].mean(dim=(1, 2)) > 0).long()  # is the centre brighter than average?
train = DataLoader(TensorDataset(images[:384], labels[:384]), batch_size=args.batch_size, shuffle=True)
val = DataLoader(TensorDataset(images[384:], labels[384:]), batch_size=128)

model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
writer = SummaryWriter(args.logdir)

step, best = 0, 0.0
for epoch in range(1, args.epochs + 1):
    model.train()
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        writer.add_scalar("loss", loss.item(), step)
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(dim=1) == y).sum().item() for x, y in val)
    accuracy = correct / 128
    if accuracy > best:
        best = accuracy
        path = os.path.join(args.model_dir, "model.pt")
        torch.save(model.state_dict(), path + ".tmp")
        os.replace(path + ".tmp", path)
    writer.add_scalar("accuracy", accuracy, step)
    writer.flush()
    print(f"epoch {epoch}: accuracy={accuracy:.4f}", flush=True)
writer.close()
