"""Zeus across the ranks of a torch.distributed job: lockstep profiling, rank 0 decides, failures named.

Why: a data-parallel trial runs one process per GPU (torchrun), and every rank takes the same
steps. Each rank's ZeusTrial drives its own GPU, but every decision the profiler and the trial
take (close a window, stop early, which limit is cheapest, whether the target was reached) must
come out the same on every rank, or the ranks would leave their collectives at different steps
and hang. So the decisions are taken on *global* figures:

- `RankMonitor` wraps the rank's own EnergyMonitor: windows open and close on the rank's GPU, and
  every reading is reduced over all ranks (energy summed over every GPU of every rank, time the
  slowest rank's: data-parallel ranks wait for each other). The profiler and the trial read only
  the monitor, so they profile in lockstep: each window runs at one limit on every GPU at once.
- Throughput counts global samples (`global_samples`: every rank handles an equal batch, as
  DistributedSampler guarantees by padding).
- Rank 0's chosen limit and rank 0's metric are broadcast (`leader_float`, `leader_list`): rank 0
  decides, the others follow. Only rank 0 writes result.json, profile.parquet and the model (as Katib
  collects metrics from the master only).
- Every rank writes a small *rank record* (ranks/rank-NNNNN.json in the log dir): its own energy,
  time, windows and final limit, and on failure its error. The torchrun wrapper (zeus_kfp.launch.torchrun)
  reads them to name the rank that failed first and to add up a failed trial's energy.

After a failure no more collectives are attempted (`abandon`): the peer may be gone, and a
collective would hang or raise. Zeus's own collectives run on a separate gloo group, so they
never interleave with the user's (NCCL) collectives and work on CPU tensors.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from zeus_kfp.errors import FieldError
from zeus_kfp.power.gpu import GPU, GPUError, PowerConstraints
from zeus_kfp.power.monitor import EnergyMonitor, Measurement
from zeus_kfp.train.artifacts import atomic_write_text

log = logging.getLogger(__name__)

RANKS_SUBDIR = "ranks"
COLLECTIVE_TIMEOUT_ENV = "ZEUS_DIST_TIMEOUT_S"
DEFAULT_COLLECTIVE_TIMEOUT_S = 600.0
# What a rank's error says when it failed only because a peer went away (gloo, NCCL, our own collectives).
PEER_LOSS_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker",
    "NCCL communicator was aborted",
    "a peer rank left",
    "Broken pipe",
)


class RankEnvError(FieldError):
    """A torchrun variable (RANK, WORLD_SIZE, ...) is malformed."""


@dataclass(frozen=True)
class RankInfo:
    """Where this process sits in the job, from the variables torchrun sets for each worker."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RankInfo:
        env = os.environ if environ is None else environ
        names = {"rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK"}
        values = {"local_world_size": env.get("LOCAL_WORLD_SIZE", env.get("WORLD_SIZE", "1"))}
        values.update({field: env.get(name, "1" if field == "world_size" else "0") for field, name in names.items()})
        parsed = {}
        for field, raw in values.items():
            try:
                parsed[field] = int(raw)
            except ValueError:
                raise RankEnvError(field.upper(), raw, "an integer (torchrun sets it)") from None
        info = cls(**parsed)
        if info.world_size < 1 or not 0 <= info.rank < info.world_size:
            raise RankEnvError("RANK", info.rank, f"0 to WORLD_SIZE-1 (WORLD_SIZE={info.world_size})")
        return info

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


class Ranks:
    """A trial of one process: every reduction is the identity. `TorchRanks` is the distributed one."""

    def __init__(self, info: RankInfo | None = None) -> None:
        self.info = info or RankInfo()
        self.error = ""  # the uncaught exception that ended this rank, once seen
        self.peer_lost = False  # this rank failed because another one went away
        self.own: dict[str, Measurement] = {}  # this rank's own latest reading per window (RankMonitor fills it)

    @property
    def is_leader(self) -> bool:
        return self.info.is_leader

    def rank_gpu(self, gpu: GPU) -> GPU:
        return gpu

    def monitor(self, local: EnergyMonitor) -> EnergyMonitor:
        return local

    def global_samples(self, samples: int) -> int:
        return samples

    def leader_float(self, value: float) -> float:
        return value

    def leader_list(self, values: list[float]) -> list[float]:
        return values

    def abandon(self) -> None:
        """A rank is failing: stop reducing (single process: nothing to stop)."""

    def install(self) -> None:
        """Hook this rank's failures (single process: the runner sees them directly)."""

    def record(self, log_dir: str | os.PathLike[str], **fields: Any) -> None:
        """Write this rank's record (single process: result.json says it all)."""


class TorchRanks(Ranks):
    """One rank of a torch.distributed job (WORLD_SIZE > 1), talking to the others over its own gloo group."""

    def __init__(self, info: RankInfo, timeout_s: float | None = None) -> None:
        super().__init__(info)
        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        if not dist.is_initialized():  # the script has not joined the job yet: join it the standard way (env://)
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            log.info("zeus: initializing torch.distributed (%s) for rank %d of %d", backend, info.rank, info.world_size)
            dist.init_process_group(backend)
        if dist.get_world_size() != info.world_size:
            raise RankEnvError("WORLD_SIZE", info.world_size, f"the process group's size {dist.get_world_size()}")
        timeout = timeout_s or float(os.environ.get(COLLECTIVE_TIMEOUT_ENV, DEFAULT_COLLECTIVE_TIMEOUT_S))
        self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout))
        self.abandoned = False
        atexit.register(self.close)
        self.readings: list[dict[str, Any]] = []  # this rank's own profiling windows, for its record
        self._record_path: Path | None = None
        self._record: dict[str, Any] = {}

    # -- devices and monitors -------------------------------------------------------------------
    def rank_gpu(self, gpu: GPU) -> GPU:
        """This rank's own device: the one at LOCAL_RANK when the process sees the node's GPUs."""
        count = gpu.device_count()
        if count == 1:
            return gpu
        if self.info.local_rank >= count:
            raise GPUError(f"local rank {self.info.local_rank} has no GPU: this process sees {count}")
        return DeviceView(gpu, self.info.local_rank)

    def monitor(self, local: EnergyMonitor) -> EnergyMonitor:
        return RankMonitor(local, self)  # type: ignore[return-value]  (same interface, see RankMonitor)

    def global_samples(self, samples: int) -> int:
        return samples * self.info.world_size

    # -- collectives -----------------------------------------------------------------------------
    def _collective(self, what: str, call):
        try:
            return call()
        except Exception as exc:
            self.abandon()
            self.peer_lost = True
            raise RuntimeError(f"zeus: a peer rank left the job during {what} ({exc})") from exc

    def sum_measurement(self, m: Measurement) -> Measurement:
        """`m` over every rank: energy per GPU of every rank (so sums cover them all), time the slowest rank's."""
        if self.abandoned:
            return m
        mine = (m.time_s, [m.energy_j[i] for i in sorted(m.energy_j)], m.simulated)
        rows: list[Any] = [None] * self.info.world_size
        self._collective(f"window {m.name}", lambda: self._dist.all_gather_object(rows, mine, group=self.group))
        energy = {}
        for _time_s, energies, _sim in rows:
            for value in energies:
                energy[len(energy)] = float(value)
        return Measurement(m.name, max(r[0] for r in rows), energy, any(r[2] for r in rows))

    def max_float(self, value: float) -> float:
        if self.abandoned:
            return value
        tensor = self._torch.tensor([float(value)], dtype=self._torch.float64)
        op = self._dist.ReduceOp.MAX
        self._collective("a window check", lambda: self._dist.all_reduce(tensor, op=op, group=self.group))
        return float(tensor.item())

    def _broadcast(self, value: Any, what: str) -> Any:
        if self.abandoned:
            return value
        box = [value]
        self._collective(what, lambda: self._dist.broadcast_object_list(box, src=0, group=self.group))
        return box[0]

    def leader_float(self, value: float) -> float:
        return self._broadcast(value, "the power-limit choice")

    def leader_list(self, values: list[float]) -> list[float]:
        return list(self._broadcast(list(values), "the metric"))

    def abandon(self) -> None:
        self.abandoned = True

    def close(self) -> None:
        """Destroy this rank's gloo group at exit, while the interpreter is whole. A gloo group left to the
        interpreter's teardown can abort the process after the trial has ended (SIGABRT, "terminate called without
        an active exception": its worker threads still hold tensors, pytorch/pytorch#190489), which the runner
        must count as the rank failing. No collective runs after this (abandoned)."""
        self.abandon()
        group, self.group = self.group, None
        if group is None or not self._dist.is_initialized():
            return
        with contextlib.suppress(RuntimeError, ValueError):  # the script destroyed every group already
            self._dist.destroy_process_group(group)

    # -- failures and records ----------------------------------------------------------------------
    def install(self) -> None:
        """Note an uncaught exception's text (and whether it was a lost peer) in this rank's record."""
        previous = sys.excepthook

        def hook(kind, exc, tb) -> None:
            self.abandon()
            self.error = "".join(traceback.format_exception_only(kind, exc)).strip()[-2000:]
            self.peer_lost = self.peer_lost or looks_like_peer_loss(self.error)
            if self._record_path is not None:  # the trial was already recorded as failed: add what killed it
                self._write({"error": self.error, "peer_lost": self.peer_lost})
            previous(kind, exc, tb)

        sys.excepthook = hook

    def record(self, log_dir: str | os.PathLike[str], **fields: Any) -> None:
        self._record_path = rank_record_path(log_dir, self.info.rank)
        base = {
            "rank": self.info.rank,
            "local_rank": self.info.local_rank,
            "world_size": self.info.world_size,
            "pid": os.getpid(),
            "recorded_at": time.time(),
            "windows": self.readings,
        }
        self._write({**base, **fields, "error": self.error, "peer_lost": self.peer_lost})

    def _write(self, fields: dict[str, Any]) -> None:
        self._record.update(fields)
        assert self._record_path is not None
        atomic_write_text(self._record_path, json.dumps(self._record, indent=2, default=str))


class RankMonitor:
    """An EnergyMonitor over all ranks: windows live on this rank's GPU, readings are reduced over every rank.

    It offers exactly what the profiler and the trial use of EnergyMonitor. Readings of the profiling
    windows are kept with this rank's own figures and the limit its GPU was at (for the rank record).
    """

    def __init__(self, local: EnergyMonitor, ranks: TorchRanks) -> None:
        self.local, self.ranks = local, ranks
        self.gpu, self.indices = local.gpu, local.indices

    def begin_window(self, name: str) -> None:
        self.local.begin_window(name)

    def is_open(self, name: str) -> bool:
        return self.local.is_open(name)

    def is_paused(self, name: str) -> bool:
        return self.local.is_paused(name)

    def pause_window(self, name: str) -> None:
        self.local.pause_window(name)

    def resume_window(self, name: str) -> None:
        self.local.resume_window(name)

    def cancel_window(self, name: str) -> None:
        self.local.cancel_window(name)

    def elapsed_s(self, name: str) -> float:
        return self.ranks.max_float(self.local.elapsed_s(name))

    def peek(self, name: str) -> Measurement:
        mine = self.local.peek(name)
        self.ranks.own[name] = mine
        if name.startswith("profile:"):
            self.ranks.readings.append(
                {
                    "window": name,
                    "gpu_limit_w": self.gpu.get_power_limit(0),
                    "time_s": mine.time_s,
                    "energy_j": mine.total_energy_j,
                }
            )
        return self.ranks.sum_measurement(mine)

    def end_window(self, name: str) -> Measurement:
        measurement = self.peek(name)
        self.local.cancel_window(name)
        return measurement


class DeviceView:
    """One device of a multi-GPU backend, seen as device 0 (a rank drives only its own GPU)."""

    def __init__(self, gpu: GPU, index: int) -> None:
        self.inner, self.index = gpu, index
        self.kind, self.simulated, self.meter = gpu.kind, gpu.simulated, gpu.meter
        self.source = getattr(gpu, "source", "")
        self.clock_kind = getattr(gpu, "clock_kind", "model")

    @property
    def can_set_limits(self) -> bool:
        return self.inner.can_set_limits

    @property
    def min_window_s(self) -> float:
        return self.inner.min_window_s

    def _at(self, index: int) -> int:
        if index != 0:
            raise IndexError(f"invalid gpu index {index}: allowed 0 (this rank's own GPU)")
        return self.index

    def device_count(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [self.inner.names()[self.index]]

    def constraints(self, index: int) -> PowerConstraints:
        return self.inner.constraints(self._at(index))

    def get_power_limit(self, index: int) -> float:
        return self.inner.get_power_limit(self._at(index))

    def set_power_limit(self, index: int, watts: float) -> None:
        self.inner.set_power_limit(self._at(index), watts)

    def energy_j(self, index: int) -> float:
        return self.inner.energy_j(self._at(index))

    def clock(self) -> float:
        return self.inner.clock()

    def account_work(self, samples: int) -> None:
        self.inner.account_work(samples)

    def close(self) -> None:
        self.inner.close()


def looks_like_peer_loss(error: str) -> bool:
    """Whether a rank's error says only that another rank went away (so it is not the root cause)."""
    return any(marker in error for marker in PEER_LOSS_MARKERS)


def ranks_from_env(environ: Mapping[str, str] | None = None) -> Ranks:
    """`TorchRanks` under torchrun with more than one process, else the single-process `Ranks`."""
    info = RankInfo.from_env(environ)
    return TorchRanks(info) if info.distributed else Ranks(info)


def rank_record_path(log_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(log_dir) / RANKS_SUBDIR / f"rank-{rank:05d}.json"


def read_rank_records(log_dir: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """Every rank record in the log dir, by rank (a half-written or foreign file is skipped)."""
    records = {}
    for path in sorted((Path(log_dir) / RANKS_SUBDIR).glob("rank-*.json")):
        try:
            data = json.loads(path.read_text())
            records[int(data["rank"])] = data
        except (ValueError, KeyError, OSError):
            log.warning("zeus: skipping unreadable rank record %s", path)
    return records


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
