"""Stopping cleanly on SIGINT and SIGTERM: the signal becomes an exception, and our children stop first.

Why: Python dies at once on SIGTERM, and a Ctrl-C surfaces as KeyboardInterrupt wherever it
lands; neither records what was in flight, and both leave the processes we started running (a
training script runs in its own session, so a Ctrl-C in the terminal never reaches it).
`interruptible()` turns either signal into `Interrupted`, raised once: a KeyboardInterrupt, so
`except Exception` lets it through and a subprocess wait gives up at once. Further signals are
ignored until the block ends, so the cleanup that follows (`stop_children()`, then recording the
interrupted trial) is not itself cut short by a second Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator, Sequence

import psutil

CHILD_GRACE_S = 10.0  # how long children get to exit on SIGTERM before SIGKILL


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived inside an `interruptible()` block; `processes` were this process's descendants
    then (`stop_children` stops them even once a parent between has died and left them to init)."""

    def __init__(self, signum: int, processes: Sequence[psutil.Process] = ()) -> None:
        self.signum = int(signum)
        self.processes = list(processes)
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


@contextlib.contextmanager
def interruptible(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM), forward: bool = False) -> Iterator[None]:
    """Inside the block, the first of `signals` raises Interrupted and later ones are ignored; the
    previous handlers come back when the block ends. Outside the main thread it does nothing
    (Python delivers signals to the main thread only).

    `forward`: the signal is passed on to every process this one started (SIGTERM), before Interrupted is raised.
    Why: a signal sent to this process alone (`kill PID`, `timeout`, a container's PID 1) reaches none of its
    children, and a library that waits for a child when an exception leaves its block (kfp.local's
    `with Popen(...)`) would then wait for ever; told at once, the children end and the wait ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in signals}

    def handler(signum: int, frame: object) -> None:
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        descendants = psutil.Process().children(recursive=True)
        if forward:
            for child in descendants:
                with contextlib.suppress(psutil.Error):
                    child.send_signal(signal.SIGTERM)
        raise Interrupted(signum, descendants)

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def stop_children(grace_s: float = CHILD_GRACE_S, also: Sequence[psutil.Process] = ()) -> int:
    """SIGTERM every process this one started, directly or not, and `also` (Interrupted.processes: descendants
    whose parent has died since, as a shell between does, are no longer found by their parent links); SIGKILL
    those still alive after `grace_s`. Returns how many there were. (psutil follows parent links, so a child
    that started its own session, as the training script does, is found too. A zombie counts as stopped: only
    its parent, maybe already gone, can reap it.) Why wait for them: a step that is stopping records what it
    was doing (zeus_kfp.steps.train), and what the caller records next must come after it."""
    found = psutil.Process().children(recursive=True)
    children = found + [p for p in also if p not in found]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = _running(children)
        for child in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(sig)
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = _running(alive)
        if not alive:
            break
    return len(children)


def _running(procs: list) -> list:
    """The processes of `procs` still running (direct children that exited are reaped on the way)."""
    _, alive = psutil.wait_procs(procs, timeout=0)
    running = []
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
    return running
