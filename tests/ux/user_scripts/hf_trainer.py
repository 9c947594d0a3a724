"""A script that fine-tunes with HuggingFace's `Trainer` (eval_strategy="epoch", logging_steps=500), printing
as the Trainer prints when its output is not a terminal: each log is a Python dict on stdout (single quotes, not
JSON) whose `epoch` is fractional between evaluations, and tqdm's progress bar, redrawn with carriage returns,
on stderr. Training stands in as a formula, so the test runs in a second:
eval_accuracy = 1 - 0.5 ** (epoch * 64 / batch size)."""

import argparse
import math
import sys

parser = argparse.ArgumentParser(description="BERT on SST-2 (stand-in), transformers.Trainer")
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

steps_per_epoch = math.ceil(50_000 / args.batch_size)
total = steps_per_epoch * args.epochs
step = 0
for epoch in range(1, args.epochs + 1):
    bar = []
    for _ in range(steps_per_epoch):
        step += 1
        if step % 500 == 0:  # Trainer's log: the training loss, rounded epoch
            loss = 1.0 / math.sqrt(step)
            logs = {"loss": round(loss, 4), "grad_norm": 1.25, "learning_rate": 5e-05 * (1 - step / total)}
            print({**logs, "epoch": round(step / steps_per_epoch, 2)}, flush=True)
        if step % 250 == 0:
            bar.append(f"{100 * step // total:3d}%|#         | {step}/{total} [00:01<00:30, 250.00it/s]")
    sys.stderr.write("\r".join(bar) + "\n")
    accuracy = 1.0 - 0.5 ** (epoch * 64 / args.batch_size)
    evaluation = {"eval_loss": round(1 - accuracy, 4), "eval_accuracy": round(accuracy, 4), "eval_runtime": 1.5}
    print({**evaluation, "eval_samples_per_second": 872.0, "eval_steps_per_second": 109.0, "epoch": float(epoch)})
print({"train_runtime": 31.5, "train_samples_per_second": 1587.3, "train_loss": 0.41, "epoch": float(args.epochs)})
