"""A plain script's metric that is not coming: found after two epochs of output, not after the whole trial.

Why: a wrong metric name or a pattern that does not match its lines used to be found when the script
ended, every epoch of the trial spent (79 s for 12 epochs in a user's trial), and the error
named neither what the script did report nor the lines that held the metric. Here the trial fails as soon
as the output shows two epochs without the job's metric, with what was seen and a pattern to try.

"Two epochs of output": two different epochs, read from the collected observations' counters or from
the lines the script prints (stdout and stderr) that name an epoch (`epoch 3`, `Epoch 3/10`, `epoch=3`,
`'epoch': 0.32`; the rules of zeus_kfp.train.collectors.counters). A fractional epoch counts as the epoch
it is part of (0.32 and 1.0 are the first; 1.32 is the second), so HuggingFace Trainer's loss lines within
an epoch do not count as epochs. A script whose output shows no epoch number at all (a TensorBoard-only
script, say) is judged when it ends, with the same message.
"""

from __future__ import annotations

import re
from collections import Counter

from zeus_kfp.train.collectors import Observation
from zeus_kfp.train.collectors.counters import EPOCH, counter_kind, epoch_index, line_counters

NUMBER_AFTER = r"\W{1,4}(?P<value>[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)"
EPOCHS_BEFORE_FAILING = 2
KEEP_LINES = 3  # the lines that mention the metric, shown in the error


class MetricWatch:
    """What the script has shown so far, and whether its metric is surely missing."""

    def __init__(self, metric_name: str, source: str) -> None:
        self.metric_name, self.source = metric_name, source
        self.names: Counter[str] = Counter()  # the metric names the collector read, and how often
        self.epochs: set[int] = set()
        self.mentions: list[str] = []  # printed lines that hold the metric's name
        self.seen_metric = False

    def on_line(self, line: str) -> None:
        """A line of the script's stdout or stderr, as the script printed it."""
        epoch = line_counters(line).get(EPOCH)
        if epoch is not None:
            self.epochs.add(epoch_index(epoch))
        if self.metric_name in line and len(self.mentions) < KEEP_LINES:
            self.mentions.append(line.strip()[:200])

    def on_observation(self, observation: Observation) -> None:
        if observation.metric == self.metric_name:
            self.seen_metric = True
        self.names[observation.metric] += 1
        if observation.epoch is not None:
            self.epochs.add(epoch_index(observation.epoch))

    def missing(self) -> str | None:
        """The failure reason once two epochs of output came without the metric; None until then."""
        if self.seen_metric or len(self.epochs) < EPOCHS_BEFORE_FAILING:
            return None
        return self.reason(f"in its first {EPOCHS_BEFORE_FAILING} epochs of output")

    def reason(self, when: str = "") -> str:
        """Why the metric counts as not reported: what was seen instead, and a pattern to try."""
        parts = [f"{self.source}: the script never reported {self.metric_name!r}" + (f" {when}" if when else "")]
        others = [name for name, _ in self.names.most_common(8) if counter_kind(name) is None]
        parts.append(f"metrics it did report: {', '.join(others)}" if others else "no metric was read from it")
        if self.mentions:
            parts.append("lines that mention it: " + " | ".join(self.mentions))
            parts.append(f"try --metric-pattern '{suggest_pattern(self.mentions[0], self.metric_name)}'")
        return "; ".join(parts)


def suggest_pattern(line: str, metric_name: str) -> str:
    """A named-group pattern (zeus_kfp.train.metrics) that reads `metric_name` from a line like `line`. No
    counter group: the counters a line names are read whatever the pattern (zeus_kfp.train.collectors.counters)."""
    return f"(?P<name>{re.escape(metric_name)}){NUMBER_AFTER}"
