"""What a local run shows of its steps while they run (pipelines.local): each step started, typed, from the events
the steps tell (zeus_kfp.steps.step_events); the train step's decision from the store; and the lines no store
holds, read with the StepLine their step prints.
"""

import contextlib
import io
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from zeus_kfp.job import Decision
from zeus_kfp.pipelines.dag import attempt_task_name
from zeus_kfp.steps.step_events import STARTED, EventReader, StepEvent
from zeus_kfp.steps.step_lines import LOST_TRIAL, MODEL, NO_MODEL, RECURRENCE, TRIAL_LOG
from zeus_kfp.summaries import TrialFiles

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class StepWatcher(io.TextIOBase):
    """A recurrence's progress: each step its run starts becomes one `on_step` call ("preprocess",
    "attempt 1: bandit", "attempt 1: train (batch size 32, exploration)", ...), and a failed one is named.

    Which step starts and ends comes typed from the steps themselves: each tells its start and end to `events`,
    a file this runner owns (zeus_kfp.steps.step_events), read as it grows, not from kfp.local's log wording.
    What a train step is about to run comes typed from the store: `dispatched(attempt)` is the decision its
    bandit step recorded (None: none recorded). What no store holds (the recurrence's number before any
    trial, where a trial's files went, the lost trials a bandit recorded) is read from the lines the steps
    print (kfp.local's output passes through here on its way to the log), each a
    zeus_kfp.steps.step_lines.StepLine shared with the step that prints it.

    The events are read before each line of output (a step tells its start before it prints), and by `follow`
    while the steps run, so a silent step shows when it starts; a lock keeps the two in order."""

    def __init__(
        self,
        log: TextIO,
        on_step: Callable[[str, int | None], None] | None,
        dispatched: Callable[[int], Decision | None] | None = None,
        events: Path | None = None,
    ) -> None:
        self.log, self.on_step, self.dispatched = log, on_step, dispatched
        self.events = EventReader(events) if events is not None else None
        self._lock = threading.RLock()  # re-entrant: an on_step that prints comes back through write()
        self._pending = ""
        self._attempt: int | None = None  # the attempt of the step running now, if it is an attempt's
        self.recurrence: int | None = None  # the recurrence's number in the job, once preprocess says it
        self.files: dict[int, dict[str, str]] = {}  # attempt -> where its log and model went

    def write(self, text: str) -> int:
        with self._lock:
            self.log.write(text)
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self.read_events()
                self._line(ANSI.sub("", line).strip())
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def read_events(self) -> None:
        """Each step started since the last read becomes an `on_step` call."""
        if self.events is None:
            return
        with self._lock:
            for event in self.events.read_new():
                if event.state == STARTED:
                    self._attempt = event.attempt
                    if self.on_step is not None:
                        self.on_step(self._describe(event), self.recurrence)

    @contextlib.contextmanager
    def follow(self, every_s: float = 0.2) -> Iterator[None]:
        """Reads the events every `every_s` seconds while the block runs (a step may print nothing for long),
        and once more after it."""
        done = threading.Event()

        def poll() -> None:
            while not done.wait(every_s):
                self.read_events()

        poller = threading.Thread(target=poll, name="zeus-kfp step events", daemon=True)
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join()
            self.read_events()

    def failed_task(self) -> str | None:
        """The task of the step that failed (its name in the pipeline), if one said so or started and never
        ended (killed)."""
        failed = self.events.failed() if self.events is not None else None
        return None if failed is None else _task_name(failed)

    def failed_error(self) -> str:
        """The error the failed step raised, as it told it ("" when it could not: killed)."""
        failed = self.events.failed() if self.events is not None else None
        return "" if failed is None else failed.error

    def _line(self, line: str) -> None:
        recurrence = RECURRENCE.read(line)
        if recurrence is not None:
            self.recurrence = int(recurrence.split()[0])
        for kind, said in (("log", TRIAL_LOG.read(line)), ("model", MODEL.read(line))):
            if said is not None and self._attempt is not None:
                self.files.setdefault(self._attempt, {})[kind] = "" if said.startswith(NO_MODEL) else said
        lost = LOST_TRIAL.read(line)
        if lost is not None and self.on_step is not None:
            self.on_step(lost, self.recurrence)

    def trial_files(self) -> tuple[TrialFiles, ...]:
        return tuple(TrialFiles(attempt, **where) for attempt, where in sorted(self.files.items()))

    def _describe(self, event: StepEvent) -> str:
        if event.attempt is None:
            return event.step
        decision = self.dispatched(event.attempt) if event.step == "train" and self.dispatched is not None else None
        detail = f" (batch size {decision.batch_size}, {decision.stage})" if decision is not None else ""
        return f"attempt {event.attempt}: {event.step}{detail}"


def _task_name(event: StepEvent) -> str:
    """The pipeline task a step's event comes from (pipelines.dag names an attempt's tasks after it)."""
    return event.step if event.attempt is None else attempt_task_name(event.attempt, event.step)


def error_lines(log_text: str) -> str:
    """The lines of a step's log that say why it failed (the last traceback's final line(s), as Python writes
    them), when the step could not say so itself."""
    lines = [ANSI.sub("", ln).strip() for ln in log_text.splitlines()]
    picked = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Mismatch\w*)\b.*:", ln)]
    return "\n".join(picked[-3:] or lines[-5:])
