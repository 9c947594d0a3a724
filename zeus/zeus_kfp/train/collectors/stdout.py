"""The stdOut collector: observations from the lines a script prints, and the rank-0 rule.

Both streams, as Katib's StdOut collector and `kubectl logs` see a container's output: Python's
`logging` writes to stderr by default, tqdm's bars and many launchers too. Lines arrive on the process
pumps' threads (zeus_kfp.train.process), one at a time, stdout's and stderr's interleaved in the order
they arrived, and are parsed there as one source (a counter named on either stream carries to the
lines after it; zeus_kfp.train.collectors.observation); the runner takes the observations on its own
thread through `poll`.

Distributed trials (zeus_kfp.launch): only rank 0's observations count, as with Katib,
whose collector is injected into the master pod only. Launchers interleave every rank's output
on one stdout; torchrun's `--tee 3` marks each line with `[<role><local rank>]:`. `master_line`
keeps unmarked lines (a single-process trial, or a launcher that shows only rank 0, e.g.
torchrun `--local-ranks-filter 0`) and rank 0's marked lines (mark removed), and drops the rest.
The runner runs on the master node, so its local rank 0 is global rank 0.
"""

from __future__ import annotations

import queue
import re
from collections.abc import Sequence

from zeus_kfp.train.collectors.collector import OwnSource
from zeus_kfp.train.collectors.observation import LineReader, Observation

STDOUT_SOURCE = "the script's stdout and stderr"
RANK_MARK = re.compile(r"^\[(?P<role>[A-Za-z_][\w-]*?)?(?P<rank>\d+)\]:")
MASTER_RANK = 0


def master_line(line: str, rank: int = MASTER_RANK) -> str | None:
    """`line` without its launcher rank mark if it is `rank`'s (or unmarked); None for another rank's."""
    mark = RANK_MARK.match(line)
    if mark is None:
        return line
    return line[mark.end() :] if int(mark.group("rank")) == rank else None


class StdoutCollector(OwnSource):
    kind = "stdOut"
    source = STDOUT_SOURCE

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.patterns = list(patterns)
        self._reader = LineReader(self.patterns)
        self._queue: queue.SimpleQueue[Observation] = queue.SimpleQueue()

    def feed(self, line: str) -> None:
        """One line of the script's stdout or stderr, in arrival order (called from an output pump's thread,
        one line at a time: zeus_kfp.train.process.CapturedProcess serializes its callback)."""
        kept = master_line(line)
        if kept is not None:
            for observation in self._reader.read(kept):
                self._queue.put(observation)

    def poll(self) -> list[Observation]:
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def finish(self) -> list[Observation]:
        return self.poll()
