"""A real HuggingFace Trainer script (transformers 5: every logged value printed quoted), to run through
`zeus-kfp run` where transformers is installed: its lines are the Trainer's own.

    pip install transformers 'accelerate>=1.1.0'
    .venv/bin/zeus-kfp run --command "{python} benchmarks/real_tools/hf_trainer.py --batch-size {batch_size} \\
        --out {work_dir}/hf" --metric-pattern "'(eval_accuracy)': '([0-9.]+)'" \\
        --spec benchmarks/real_tools/hf.json -r 1
"""

import argparse

import numpy as np
import torch
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default="hf_out")
args = parser.parse_args()
rng = np.random.default_rng(0)
features = rng.normal(size=(2048, 16)).astype("float32")
labels = (features[:, :4].sum(axis=1) > 0).astype("int64")


class Pairs(Dataset):
    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": torch.tensor(self.x[i]), "labels": torch.tensor(self.y[i])}


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.layers(x)
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


def accuracy(evaluated) -> dict[str, float]:
    return {"accuracy": float((evaluated.predictions.argmax(-1) == evaluated.label_ids).mean())}


training = TrainingArguments(
    output_dir=args.out, per_device_train_batch_size=args.batch_size, num_train_epochs=8, learning_rate=1e-2,
    eval_strategy="epoch", logging_strategy="epoch", save_strategy="no", disable_tqdm=True, report_to=[], use_cpu=True,
)  # fmt: skip
Trainer(model=Net(), args=training, train_dataset=Pairs(features[:1536], labels[:1536]),
        eval_dataset=Pairs(features[1536:], labels[1536:]), compute_metrics=accuracy).train()  # fmt: skip
