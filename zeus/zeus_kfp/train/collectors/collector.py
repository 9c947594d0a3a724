"""What every collector is: something the runner polls for new observations while the script runs.

Why polling: the runner already supervises the script in a loop (stop rules, cost checks); each
collector reads what its source gained since the last call (new stdout lines, bytes appended to a
file, records appended to event files, a fresh scrape) and never blocks for long. `finish()` is
the last read after the script has exited, and the one place a source that never produced
anything is reported (a file that never appeared, an endpoint that never answered, a directory
without scalars): while the script runs, a missing source may simply not exist *yet*.

Why `claim` and `keep`: a source is the trial's own. In Katib every trial is a fresh pod, so
/var/log/katib/metrics.log starts empty; here consecutive trials run on one machine (kfp.local) and
an absolute path outlives its trial. `claim()`, called before the script starts, makes sure only
what this trial's process writes is read (the file collector moves an earlier file aside, the
tfEvent collector skips event files that were already there); `keep()`, after the script ended,
copies what was read into the trial's log, which the train step keeps (zeus_kfp.steps.train).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from zeus_kfp.train.collectors.observation import Observation


class CollectorError(RuntimeError):
    """A source could not be read; the message names the collector kind and the source."""

    def __init__(self, kind: str, source: str, why: str) -> None:
        self.kind, self.source, self.why = kind, source, why
        super().__init__(f"{kind} collector ({source}): {why}")


class Collector(Protocol):
    """A source of observations. `kind` is the spec's kind; `source` says where, for messages."""

    kind: str
    source: str

    def claim(self, aside: Path) -> list[str]:
        """Before the script starts: make the source this trial's own (anything earlier goes to `aside`);
        returns notes for the trial's reason. Raises CollectorError when that is impossible."""
        ...

    def poll(self) -> list[Observation]:
        """Observations that appeared since the last call (possibly none); raises CollectorError."""
        ...

    def finish(self) -> list[Observation]:
        """The last observations after the script exited; raises CollectorError for a source that
        never produced anything."""
        ...

    def keep(self, log_dir: Path) -> None:
        """After the script exited: copy what was read into `log_dir` unless it is there already."""
        ...


class OwnSource:
    """A collector whose source is the script's process itself (stdout, an HTTP endpoint): it is the
    trial's by construction, and the runner keeps stdout in the log anyway."""

    def claim(self, aside: Path) -> list[str]:
        return []

    def keep(self, log_dir: Path) -> None:
        return None
