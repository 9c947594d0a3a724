"""Each step's start and end, told to whoever runs the pipeline on this machine: a typed event per line of a
JSON-lines file the runner owns (`zeus-kfp run`, pipelines.local), named by ZEUS_KFP_STEP_EVENTS.

Why a file of our own: the runner showed progress and named a failed step by reading kfp.local's log wording
("Executing task '...'", "finished with status FAILURE"), which an upstream release may change at will. The
steps know what they are (and an attempt's steps which attempt), so they say it, typed; kfp.local only has to
run them. A step killed outright writes no end: the runner reads a start without an end as the step that
failed. On a cluster nothing sets the variable and nothing is written.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

EVENTS_ENV = "ZEUS_KFP_STEP_EVENTS"
STARTED, FINISHED, FAILED = "started", "finished", "failed"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class StepEvent:
    """`step` (the DAG's name: gate, preprocess, bandit, train, feedback, report, gpu-power) of `attempt`
    (an attempt's steps; None for the others) `state`: started, finished or failed (with `error`)."""

    step: str
    attempt: int | None
    state: str
    error: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str) -> StepEvent:
        return cls(**json.loads(line))


def tell(event: StepEvent) -> None:
    """Appends `event` to the runner's file, if a runner asked for one (one line, written whole)."""
    path = os.environ.get(EVENTS_ENV)
    if path:
        with open(path, "a") as out:
            out.write(event.to_json() + "\n")


def reported(step: str, attempt: Callable[..., int | None] = lambda *args, **kwargs: None) -> Callable[[F], F]:
    """A step function that tells its start, and its end (finished, or failed with the error it raises).
    `attempt` picks the attempt from the step's own arguments."""

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def told(*args: Any, **kwargs: Any) -> Any:
            k = attempt(*args, **kwargs)
            tell(StepEvent(step, k, STARTED))
            try:
                result = function(*args, **kwargs)
            except BaseException as err:
                tell(StepEvent(step, k, FAILED, f"{type(err).__name__}: {err}"))
                raise
            tell(StepEvent(step, k, FINISHED))
            return result

        return told  # type: ignore[return-value]

    return wrap


class EventReader:
    """The events a run's steps have told so far, read from `path` as they come (a line cut short is left for
    the next read)."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self.events = path, 0, []

    def read_new(self) -> list[StepEvent]:
        """The events told since the last call."""
        if not self.path.is_file():
            return []
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        whole = data[: data.rfind(b"\n") + 1]
        self._offset += len(whole)
        new = [StepEvent.from_json(line) for line in whole.decode().splitlines() if line.strip()]
        self.events += new
        return new

    def failed(self) -> StepEvent | None:
        """The step that failed: the last that said so, else the last that started and never finished (killed)."""
        said = [e for e in self.events if e.state == FAILED]
        if said:
            return said[-1]
        open_steps: dict[tuple[str, int | None], StepEvent] = {}
        for e in self.events:
            if e.state == STARTED:
                open_steps[(e.step, e.attempt)] = e
            else:
                open_steps.pop((e.step, e.attempt), None)
        return list(open_steps.values())[-1] if open_steps else None
