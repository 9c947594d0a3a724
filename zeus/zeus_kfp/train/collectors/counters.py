"""Progress counters: which numbers in what a script reports are its epoch and its step.

The external power profiler (zeus_kfp.train.progress) needs the script's progress, and a script puts it
wherever its tool prints it, seldom in the metric pattern's groups. So the counters are read from the
whole line, by name, apart from the metrics. Never guessed: a number is a counter only when it is named
as one.

Names (any case), and the counter each one is:

| name | counter |
|---|---|
| `epoch` | epoch |
| `global_step`, `step`, `iteration`, `iter` | step (where a line names several, the first in this order) |

In a line of text, a name is a word of its own (not part of `steps_per_epoch`, `epoch_time`, `3ms/step`,
`train-step`), optionally quoted, then `=`, `:` or spaces (an opening `[` allowed), then the number:
`epoch=3`, `Epoch 3/10` (Keras), `Epoch 1: ...`, `epoch 3 | ...`, `[epoch 3, step 1200]`, `Step [100/500]`,
`'epoch': 0.32` (HuggingFace Trainer's dict lines), `'epoch': '1'` (Trainer from transformers 5 prints
every value quoted), `"step": 7`. The first of each name in a line
counts; in a line redrawn with carriage returns (a progress bar), each counter is its last redraw's.

Values: a step is a whole number >= 0 (`step 3.5` is not a counter). An epoch is a number >= 0: a whole
number is an int (`'epoch': 1.0` -> 1), a fraction stays a float (`'epoch': 0.32` is a third of the way
through the first epoch, as HuggingFace's Trainer reports it). A negative number, NaN or infinity is not
a counter.

The same names are counters wherever metrics arrive as (name, value) pairs: a pattern's groups, a JSON
record's keys, a Prometheus series, a TensorBoard tag (zeus_kfp.train.collectors.observation).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from zeus_kfp.train.metrics import MAX_LINE_CHARS, finite_number

EPOCH, STEP = "epoch", "step"
COUNTER_NAMES = {"epoch": EPOCH, "global_step": STEP, "step": STEP, "iteration": STEP, "iter": STEP}
_ORDER = tuple(COUNTER_NAMES)  # where a line names several step counters, the first of these wins

_NAMES = "|".join(sorted(COUNTER_NAMES, key=len, reverse=True))
NAMED_COUNTER = re.compile(
    rf"(?<![\w./-])(?P<name>{_NAMES})['\"]?"  # the name, a word of its own
    r"(?:\s*[=:]\s*|\s+)[\['\"]?"  # `=`, `:` or spaces between name and number (a `[` or quote may open it)
    r"(?P<value>\d+(?:\.\d+)?)(?!\w|\.\d)",  # the number, not the start of a longer word or number
    re.IGNORECASE,
)


def counter_kind(name: str) -> str | None:
    """The counter (EPOCH or STEP) a name (any case) is; None for any other name."""
    return COUNTER_NAMES.get(name.lower())


def epoch_value(raw: object) -> int | float | None:
    """An epoch counter: a whole number as an int (3.0 -> 3), a fraction as a float; None if not >= 0."""
    number = finite_number(raw)
    if number is None or number < 0:
        return None
    return int(number) if float(number).is_integer() else float(number)


def step_value(raw: object) -> int | None:
    """A step counter: a whole number >= 0 as an int; None for anything else."""
    number = finite_number(raw)
    if number is None or number < 0 or not float(number).is_integer():
        return None
    return int(number)


def counter_value(kind: str, raw: object) -> int | float | None:
    return epoch_value(raw) if kind == EPOCH else step_value(raw)


def epoch_index(epoch: int | float) -> int:
    """The epoch a counter value falls in: itself when whole, else the epoch it is part of (0.32 -> 1, as
    HuggingFace's Trainer counts: 1.0 is the end of the first epoch)."""
    return math.ceil(epoch)


def pair_counters(pairs: Iterable[tuple[str, object]]) -> dict[str, int | float]:
    """The counters among (name, value) pairs, by kind; the first pair of each kind in the naming order."""
    found: dict[str, tuple[int, int | float]] = {}
    for name, raw in pairs:
        kind = counter_kind(name)
        value = counter_value(kind, raw) if kind is not None else None
        if kind is None or value is None:
            continue
        rank = _ORDER.index(name.lower())
        if kind not in found or rank < found[kind][0]:
            found[kind] = (rank, value)
    return {kind: value for kind, (_, value) in found.items()}


def line_counters(line: str) -> dict[str, int | float]:
    """The counters a line of text names (the module docstring's rules), by kind: {"epoch": 3, "step": 1200}."""
    counters: dict[str, int | float] = {}
    for segment in line.split("\r"):
        pairs = [(m.group("name"), float(m.group("value"))) for m in NAMED_COUNTER.finditer(segment[:MAX_LINE_CHARS])]
        firsts: list[tuple[str, object]] = []
        for name, value in pairs:  # the first of each name
            if all(name.lower() != seen.lower() for seen, _ in firsts):
                firsts.append((name, value))
        counters.update(pair_counters(firsts))
    return counters
