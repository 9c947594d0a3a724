"""A plain training script for the stand-in NVML node (zeus_kfp.simulate.nvml_standin), printing as real tools do.

Its "training" is work on the node (every figure simulated: the fitted H200's curve); its "accuracy" after
epoch e is `1 - 0.5 ** (e / halving)`, so it reaches 0.9 after 3.3 x `--halving` epochs. What it prints, and
where, is the part that is not stand-in: `--style` picks how a real tool would print the same training:

- katib: `step=N loss=L` every `--every` steps, `epoch=E step=N accuracy=A` after each evaluation (stdout);
- keras: Keras `model.fit(verbose=2)`: `Epoch E/N` on a line of its own, then
  `195/195 - 2s - loss: 0.41 - accuracy: 0.88 - val_loss: 0.38 - val_accuracy: 0.90` (stdout; metric val_accuracy);
- logging: Python `logging` with its default handler, to stderr: `INFO:train:step=N loss=L` and
  `INFO:train:epoch=E val_acc=A` (metric val_acc);
- huggingface: the Trainer's dict lines, `{'loss': 0.69, 'learning_rate': 4.5e-05, 'epoch': 0.32}` every
  `--every` steps and `{'eval_loss': 0.5, 'eval_accuracy': 0.8, 'eval_runtime': 1.2, 'epoch': 1.0}` (stdout;
  metric eval_accuracy);
- loop: a hand-rolled loop's one line per epoch, `Epoch 1: train_loss=1.000 val_acc=0.4500` (stdout; metric
  val_acc).

`--startup-s` idles the GPU before training (imports, loading a dataset); `--slow-first-eval-s` idles it before
the first evaluation (compiling or autotuning the evaluation), inside the first epoch, after the progress lines.

    python -m zeus_kfp.simulate.standin_train --batch-size 256 --style keras
"""

from __future__ import annotations

import argparse
import logging
import sys

from zeus_kfp.simulate.nvml_standin import Node

STYLES = ("katib", "keras", "logging", "huggingface", "loop")
METRIC = {"katib": "accuracy", "keras": "val_accuracy", "logging": "val_acc", "huggingface": "eval_accuracy",
          "loop": "val_acc"}  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--style", choices=STYLES, default="katib")
    parser.add_argument("--halving", type=float, default=1.5, help="epochs per halving of the error")
    parser.add_argument("--epoch-samples", type=int, default=50_000)
    parser.add_argument("--eval-samples", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=10, help="steps between progress lines")
    parser.add_argument("--startup-s", type=float, default=0.0)
    parser.add_argument("--slow-first-eval-s", type=float, default=0.0)
    return parser.parse_args(argv)


class Printer:
    """How one tool prints the same training (the module docstring)."""

    def __init__(self, node: Node, style: str, epochs: int) -> None:
        self.node, self.style, self.epochs = node, style, epochs
        self.log = logging.getLogger("train")
        if style == "logging":
            logging.basicConfig(level=logging.INFO)  # the default handler: stderr, `LEVEL:name:message`

    def say(self, line: str) -> None:
        self.node.report(line, sys.stderr if self.style == "logging" else None)

    def epoch_begins(self, epoch: int) -> None:
        if self.style == "keras":
            self.say(f"Epoch {epoch}/{self.epochs}")

    def progress(self, step: int, epoch_done: float, loss: float) -> None:
        if self.style == "katib":
            self.say(f"step={step} loss={loss:.4f}")
        elif self.style == "logging":
            self.say(f"INFO:train:step={step} loss={loss:.4f}")
        elif self.style == "huggingface":
            self.say(f"{{'loss': {loss:.4f}, 'learning_rate': 4.5e-05, 'epoch': {epoch_done:.2f}}}")

    def evaluated(self, epoch: int, step: int, steps: int, accuracy: float) -> None:
        loss = 1.0 - accuracy
        if self.style == "katib":
            self.say(f"epoch={epoch} step={step} accuracy={accuracy:.4f}")
        elif self.style == "keras":
            self.say(f"{steps}/{steps} - 2s - loss: {loss:.4f} - accuracy: {accuracy:.4f} - val_loss: {loss:.4f} "
                     f"- val_accuracy: {accuracy:.4f}")  # fmt: skip
        elif self.style == "logging":
            self.say(f"INFO:train:epoch={epoch} val_acc={accuracy:.4f}")
        elif self.style == "huggingface":
            self.say(f"{{'eval_loss': {loss:.4f}, 'eval_accuracy': {accuracy:.4f}, 'eval_runtime': 0.4, "
                     f"'epoch': {float(epoch):.1f}}}")  # fmt: skip
        else:
            self.say(f"Epoch {epoch}: train_loss={loss:.3f} val_acc={accuracy:.4f}")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    node = Node.from_env()
    node.idle(args.startup_s)
    printer = Printer(node, args.style, args.epochs)
    steps = max(1, args.epoch_samples // args.batch_size)
    step = 0
    for epoch in range(1, args.epochs + 1):
        printer.epoch_begins(epoch)
        for i in range(steps):
            node.train(args.batch_size)
            step += 1
            if step % args.every == 0:
                printer.progress(step, epoch - 1 + (i + 1) / steps, 1.0 / (1.0 + step / steps))
        if epoch == 1:
            node.idle(args.slow_first_eval_s)
        node.evaluate(args.eval_samples)
        printer.evaluated(epoch, step, steps, 1.0 - 0.5 ** (epoch / args.halving))
    node.publish()


if __name__ == "__main__":
    main()
