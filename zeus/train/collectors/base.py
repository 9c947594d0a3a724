"""What every collector is: something the runner polls for new observations while the script runs.

Why polling: the runner already supervises the script in a loop (stop rules, cost checks); each
collector reads what its source gained since the last call (new stdout lines, bytes appended to a
file, records appended to event files, a fresh scrape) and never blocks for long. `finish()` is
the last read after the script has exited, and the one place a source that never produced
anything is reported (a file that never appeared, an endpoint that never answered, a directory
without scalars): while the script runs, a missing source may simply not exist *yet*.
"""

from __future__ import annotations

from typing import Protocol

from zeus.train.collectors.observation import Observation


class CollectorError(RuntimeError):
    """A source could not be read; the message names the collector kind and the source."""

    def __init__(self, kind: str, source: str, why: str) -> None:
        self.kind, self.source, self.why = kind, source, why
        super().__init__(f"{kind} collector ({source}): {why}")


class Collector(Protocol):
    """A source of observations. `kind` is the spec's kind; `source` says where, for messages."""

    kind: str
    source: str

    def poll(self) -> list[Observation]:
        """Observations that appeared since the last call (possibly none); raises CollectorError."""
        ...

    def finish(self) -> list[Observation]:
        """The last observations after the script exited; raises CollectorError for a source that
        never produced anything."""
        ...
