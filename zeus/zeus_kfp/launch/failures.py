"""Which rank failed first, and the failed trial it leaves: the torchrun wrapper's verdict.

Why: when one rank of a data-parallel job dies, the others fail right after it (their collectives
lose a peer, or torchrun stops them with SIGTERM), so a job usually ends with every rank failed.
The trial's reason must be the rank that started it, not the first in the list. Each rank's own
record (zeus_kfp.train.distributed) and torchrun's exit codes together tell them apart:

- *secondary*: a rank whose error says a peer went away, or that was stopped by SIGTERM (torchrun
  stops the survivors that way) while another rank failed for its own reasons;
- *primary*: everything else (an exception of its own, a kill by another signal, a crash).

The first primary is the root cause: ranks that died without a record (a signal left them no time)
first, then by the time their record was written, then by rank. Without a primary, the first
secondary is reported. Deterministic for a given set of records and exit codes.
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass
from typing import Any

from zeus_kfp.job import Pricing, TrialResult, TrialStatus
from zeus_kfp.train.artifacts import result_from_json
from zeus_kfp.train.distributed import looks_like_peer_loss, signal_name
from zeus_kfp.train.process import OOM_MARKERS

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class RankFailure:
    """How one rank ended badly."""

    rank: int
    error: str
    secondary: bool
    recorded_at: float | None = None  # None: the rank left no record (killed by a signal)

    def sort_key(self) -> tuple[bool, float, int]:
        return (self.recorded_at is not None, self.recorded_at or 0.0, self.rank)


def _exit_error(exitcode: int) -> str:
    if exitcode < 0:
        return f"killed by signal {-exitcode} ({signal_name(-exitcode)})"
    return f"exited with code {exitcode}"


def _stopped(exitcode: int | None, record: dict[str, Any] | None) -> bool:
    """Stopped by SIGTERM/SIGINT: what torchrun does to the survivors once a rank has failed."""
    if record is not None and record.get("signal") in STOP_SIGNALS:
        return True
    return exitcode is not None and (-exitcode in STOP_SIGNALS or exitcode - 128 in STOP_SIGNALS)


def rank_failures(
    exits: dict[int, int], records: dict[int, dict[str, Any]], stderr_tails: dict[int, str] | None = None
) -> list[RankFailure]:
    """Every failed rank: those torchrun saw exit non-zero (`exits`, rank -> exit code) and those whose
    record says failed. `stderr_tails` (rank -> last stderr lines) names the error of a rank without one."""
    tails = stderr_tails or {}
    failed = set(exits) | {rank for rank, rec in records.items() if rec.get("status") in ("failed", "oom")}
    out = []
    for rank in sorted(failed):
        record, exitcode = records.get(rank), exits.get(rank)
        error = (record or {}).get("error") or ""
        if not error and exitcode is not None and exitcode < 0:
            error = _exit_error(exitcode)
        if not error:
            last = [line for line in tails.get(rank, "").splitlines() if line.strip()]
            error = last[-1].strip() if last else (record or {}).get("reason") or _exit_error(exitcode or 1)
        peer = (
            bool((record or {}).get("peer_lost"))
            or looks_like_peer_loss(error)
            or looks_like_peer_loss(tails.get(rank, ""))
        )
        secondary = peer or _stopped(exitcode, record)
        out.append(RankFailure(rank, error, secondary, record.get("recorded_at") if record else None))
    return out


def root_cause(failures: list[RankFailure]) -> RankFailure | None:
    """The rank that failed first for its own reasons (see the module docstring)."""
    if not failures:
        return None
    primaries = [f for f in failures if not f.secondary]
    return min(primaries or failures, key=RankFailure.sort_key)


def failed_status(error: str) -> TrialStatus:
    """oom when the failing rank ran out of (GPU) memory by its own words, else failed. A rank killed by SIGKILL
    stays failed: inside a job the kernel's OOM killer and a kill cannot be told apart."""
    return TrialStatus.OOM if any(marker in error for marker in OOM_MARKERS) else TrialStatus.FAILED


def failed_result(
    spec: Pricing,
    batch_size: int,
    cause: RankFailure,
    records: dict[int, dict[str, Any]],
    leader: dict[str, Any] | None,
    world_size: int,
) -> TrialResult:
    """The failed trial: rank 0's figures when it finished the trial in lockstep (they cover every rank),
    else each rank's own figures added up (energy) and the slowest rank's time."""
    reason = f"rank {cause.rank} failed: {cause.error}"
    status = failed_status(cause.error)
    if leader is not None and leader.get("status") not in ("failed", "oom"):
        finished = result_from_json(spec, leader | {"batch_size": batch_size})  # its figures and so its cost
        reason += f" (after the trial ended {leader['status']})"
        return dataclasses.replace(finished, status=status, reason=reason)
    missing = sorted(set(range(world_size)) - set(records))
    if missing:
        reason += f"; energy and time count ranks {sorted(records)} only (ranks {missing} left no record)"
    first = records.get(0) or (records[min(records)] if records else {})
    return TrialResult.build(
        spec,
        batch_size=batch_size,
        status=status,
        time_s=max((float(r.get("time_s") or 0.0) for r in records.values()), default=0.0),
        energy_j=sum(float(r.get("energy_j") or 0.0) for r in records.values()),
        num_epochs=max((int(r.get("epochs") or 0) for r in records.values()), default=0),
        power_limit_w=first.get("power_limit_w"),
        metric=first.get("metric"),
        simulated=any(bool(r.get("simulated")) for r in records.values()),
        reason=reason,
        source=str(first.get("source", "not measured: no rank reported")),
    )
