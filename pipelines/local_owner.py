"""Which local run holds a recurrence: a claim file beside the recurrence's artifacts, so that a run killed
outright frees its slot of the job's cap at the next local run on the same machine, not a day later.

Why: the recurrence gate counts a recurrence as running until a trial ends it, an `end` entry says it
ended, or nothing of it was heard for the dispatch timeout (zeus_kfp.store.gating). A local run that fails or
is interrupted writes its `end` (zeus_kfp.steps.abandoned.fail_unfinished); one killed by SIGKILL (the OOM
killer, `kill -9`, a closed terminal's process group) writes nothing, so with the default cap of one
recurrence the job's next `zeus-kfp run` would be skipped, "no free slot", for `dispatch_timeout_s`
(a day by default). The killed run's own machine can tell it is dead: its claim names the process (host,
pid and the process's start time, so a reused pid is not taken for it).

What this does not cover, by design: a run on another machine (its liveness cannot be read from here; the
dispatch timeout still frees it) and a pipeline run on a cluster (its pods are KFP's to retry). The gate's
rule is untouched: what frees the slot is an ordinary `end` entry in the log, so every reader agrees.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from zeus_kfp.steps.abandoned import fail_unfinished
from zeus_kfp.store import Store
from zeus_kfp.train.artifacts import atomic_write_text

log = logging.getLogger(__name__)

OWNER_FILE = "owner.json"  # in runs_dir/<job_id>/<recurrence_id>/, while its run drives it


@dataclass(frozen=True)
class Owner:
    """A process on a host: `started` is its start time (psutil's create_time), so a pid the system handed
    to another process since is not taken for it; `group` its process group when it leads one (a shell
    starts each command line as its own group), else None."""

    host: str
    pid: int
    started: float
    group: int | None = None

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        group = pid if os.getpgid(0) == pid else None
        return cls(socket.gethostname(), pid, psutil.Process().create_time(), group)

    def is_dead(self) -> bool:
        """True only when this run is known gone: on this host, no process with its pid and start time, and,
        when it led a process group, no process left in that group. A step it started (kfp.local's step
        subprocesses are in its group) may outlive a `kill -9` of the driver alone and still be training:
        the slot is its until it ends. A claim from another host is never dead from here."""
        if self.host != socket.gethostname():
            return False
        try:
            process = psutil.Process(self.pid)
            if process.create_time() == self.started and process.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
        except psutil.Error:  # no permission to look at it: it exists
            return False
        return self.group is None or not _group_alive(self.group)


def _group_alive(group: int) -> bool:
    """Whether a process of `group` still runs (a zombie, dead and waiting to be reaped, does not)."""
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, PermissionError):
            continue
    return False


def read_owner(path: Path) -> Owner | None:
    """The claim in `path`, or None for a missing or unreadable one (never a reason to fail a run)."""
    try:
        data = json.loads(path.read_text())
        group = data.get("group")
        return Owner(str(data["host"]), int(data["pid"]), float(data["started"]), None if group is None else int(group))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def claim(run_dir: Path) -> Iterator[Owner]:
    """Hold `run_dir`'s recurrence for this process while the block runs; the claim goes when the block
    ends in any way this process lives through (done, failed, interrupted)."""
    owner = Owner.this_process()
    path = run_dir / OWNER_FILE
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(asdict(owner)))
    try:
        yield owner
    finally:
        path.unlink(missing_ok=True)


def reclaim_killed(store: Store, job_id: str, job_runs_dir: Path) -> list[str]:
    """End every recurrence of `job_id` under `job_runs_dir` whose run was killed on this host: its unfinished
    trials are recorded failed and the recurrence ended (it frees its slot), with the reason naming the dead
    process. Returns the recurrence ids ended. Two runs doing this at once end it twice, harmlessly: the
    first result of a trial stands, and an `end` after an `end` changes nothing."""
    ended = []
    for path in sorted(job_runs_dir.glob(f"*/{OWNER_FILE}")):
        owner = read_owner(path)
        if owner is None or not owner.is_dead():
            continue
        recurrence_id = path.parent.name
        reason = f"its local run (pid {owner.pid} on {owner.host}) was killed"
        fail_unfinished(store, job_id, recurrence_id, reason)
        path.unlink(missing_ok=True)
        log.warning("recurrence %s of job %s: %s; recorded as ended", recurrence_id, job_id, reason)
        ended.append(recurrence_id)
    return ended
