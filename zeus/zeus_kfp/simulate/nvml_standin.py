"""A stand-in NVML over the fitted H200 (zeus_kfp.simulate.h200): the real-meter code path on a machine without a GPU.

Every figure it produces is SIMULATED; the curve it follows was measured on a real H200 (zeus_kfp.simulate.h200).
It exists so that what only a GPU node shows can be run and tested here, through the same code a node runs:
`zeus_kfp.power.nvml.NvmlGPU` imports it as `pynvml` (a one-line shim put first on PYTHONPATH, `shim_env`),
and the profiler, the runner and the pipeline cannot tell it from NVML, except that it says so
(`ZEUS_STAND_IN`): every figure is labelled simulated, and windows run on its simulated clock.

**A node's state outlives processes.** On a real node the train step sets a limit, the script trains at it, a
trial killed mid-profile leaves it, and the next trial finds it. So the node (each GPU's limit, its default,
the energy counter and the clock) lives in one JSON file (`ZEUS_NVML_STANDIN`, created by `create`), read and
written under an exclusive lock by every process that opens it: the train step, the user's script, a benchmark.

**Time is the node's own.** The clock advances only by what the script does on the GPU: `train` (a step of
`samples` at the limit in force, as fast as the fitted curve and its window noise say), `evaluate` (forward
passes: EVAL_SPEEDUP times a step's throughput at the same power, an assumption, not measured) and `idle`
(start-up, data loading: IDLE_W, a typical board's idle draw, not measured). So every figure follows from the
work, whatever the machine's load. The script paces itself in real time, `speedup` times faster than the
node's clock, so the runner's limit changes land where they would.

**Reading the node where the script reported.** On a node the runner reads the meter microseconds after a
line is printed, against windows of a second: the lag is nothing. Run `speedup` times faster on a busy
machine, the same real lag would be many milliseconds of the node's clock, and every figure would depend on
the machine's load. So the script reports through the node (`Node.report`: print the line, publish the
node's clock and counter as of that moment, wait until the runner has read the line from the pipe), and
other processes read the clock, the counter and the draw as last published, the way they would read a
real meter the moment the line arrived. The process doing the work reads its own node live.

**What it keeps of a real H200.** A new limit takes effect SETTLE_S after it is set (the measured sweep's
warm-up sufficed); the energy counter publishes in steps of COUNTER_PERIOD_S (an H200's counter advances in
~100 ms steps); limits go from 200 to 700 W and the default is the maximum; setting one may be refused
(NO_PERMISSION, as without root or SYS_ADMIN) where the node says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import struct
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zeus_kfp.simulate.h200 import SEGMENT_S, SETTLE_S, H200Curve, fitted

STATE_ENV = "ZEUS_NVML_STANDIN"  # the node's state file
COUNTER_PERIOD_S = 0.1  # an H200's energy counter advances in steps of about this
IDLE_W = 75.0  # assumed, not measured: what the board draws doing nothing (start-up, data loading)
EVAL_SPEEDUP = 3.0  # assumed, not measured: a forward pass alone, against a training step's three passes
NAME = "NVIDIA H200 (simulated: a stand-in NVML fitted to a measured sweep)"
SOURCE = "simulated (NVML stand-in: H200 fitted to a measured sweep)"
SHIM = "from zeus_kfp.simulate.nvml_standin import *  # noqa: F403  (a stand-in NVML: zeus_kfp.simulate.nvml_standin)\n"

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4


class NVMLError(Exception):
    """NVML's error class, with its `value` code, as nvidia-ml-py raises it."""

    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(f"NVML error {value} (stand-in NVML)")


# -- the node --------------------------------------------------------------------------------------------
def create(path: str | os.PathLike[str], *, seed: int = 0, draw_w: float | None = None, limit_w: float | None = None,
           may_set: bool = True, speedup: float = 10.0) -> Path:  # fmt: skip
    """A fresh node at `path`: one H200 running the fitted curve (scaled to draw `draw_w` uncapped, if given), its
    window noise drawn from `seed`, at `limit_w` (default: the maximum, its default limit)."""
    curve = fitted() if draw_w is None else fitted().scaled(draw_w)
    limit = curve.max_w if limit_w is None else float(limit_w)
    state = {
        "seed": int(seed),
        "draw_w": curve.draw_w,
        "speedup": float(speedup),
        "may_set": bool(may_set),
        "clock_s": 0.0,
        "energy_j": 0.0,
        "published_j": 0.0,
        "limit_w": limit,  # the limit set (what NVML reports)
        "in_force_w": limit,  # the limit the GPU runs at (a new one after SETTLE_S)
        "pending_at_s": None,
        "power_w": IDLE_W,  # the draw of the last thing done, for nvmlDeviceGetPowerUsage
        "seen": {"clock_s": 0.0, "counter_j": 0.0, "power_w": IDLE_W},  # as of the last report (module docstring)
        "set_calls": [],
    }
    target = Path(path)
    target.write_text(json.dumps(state))
    return target


def shim_env(state: str | os.PathLike[str], shim_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Writes `shim_dir`/pynvml.py (which imports this module as pynvml) and returns the environment that makes a
    process, and every process it starts, open the node at `state` as its NVML: PYTHONPATH first, ZEUS_GPU nvml."""
    directory = Path(shim_dir)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pynvml.py").write_text(SHIM)
    path = os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, STATE_ENV: str(Path(state).resolve()), "ZEUS_GPU": "nvml"}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any]]:
    """The node's state, read and written back under an exclusive lock (one process at a time)."""
    with open(path, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            state = json.loads(handle.read())
            before = dict(state)
            yield state
            if state != before:
                handle.seek(0)
                handle.write(json.dumps(state))
                handle.truncate()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _state_path() -> Path:
    raw = os.environ.get(STATE_ENV, "")
    if not raw or not Path(raw).is_file():
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # as NVML fails where there is no driver
    return Path(raw)


@dataclass
class Node:
    """The node at `path`, as a script and a benchmark use it: train, evaluate, idle, and read it."""

    path: Path

    @classmethod
    def from_env(cls) -> Node:
        """The node of ZEUS_NVML_STANDIN (what `shim_env` sets for every process of a trial)."""
        return cls(_state_path())

    def curve(self) -> H200Curve:
        with _locked(self.path) as state:
            return _curve(state)

    def train(self, samples: int, steps: int = 1) -> None:
        """`steps` training steps of `samples` samples each, at the limit in force."""
        self._work(samples, steps, faster=1.0)

    def evaluate(self, samples: int) -> None:
        """One evaluation pass over `samples` samples (forward only: EVAL_SPEEDUP times faster, same power)."""
        self._work(samples, 1, faster=EVAL_SPEEDUP)

    def idle(self, seconds: float) -> None:
        """`seconds` of the GPU waiting (start-up, data loading) at IDLE_W."""
        with _locked(self.path) as state:
            _apply_pending(state)
            _advance(state, seconds, IDLE_W)
            pace = state["speedup"]
        _sleep(seconds / pace)

    def read(self) -> dict[str, Any]:
        """The node's state (limit, clock, energy, ...), for tests and benchmarks."""
        with _locked(self.path) as state:
            return dict(state)

    def report(self, line: str, stream: Any = None) -> None:
        """Print `line` (to stdout, or `stream`) as the script's report: the node is published as of this moment,
        and the script waits until the reader has taken the line (the module docstring)."""
        out = sys.stdout if stream is None else stream
        self.publish()
        print(line, file=out, flush=True)
        _drained(out)

    def publish(self) -> None:
        """What other processes read from now on: the clock, the counter and the draw as they are now."""
        global _worker
        _worker = True
        with _locked(self.path) as state:
            state["seen"] = {
                "clock_s": state["clock_s"],
                "counter_j": state["published_j"],
                "power_w": state["power_w"],
            }

    def _work(self, samples: int, steps: int, faster: float) -> None:
        global _worker
        _worker = True
        seconds = 0.0
        with _locked(self.path) as state:
            curve = _curve(state)
            for _ in range(steps):
                _apply_pending(state)
                factor = _speed_factor(state["seed"], state["clock_s"], curve)
                limit = state["in_force_w"]
                dt = samples / (curve.throughput(limit) * factor * faster)
                _advance(state, dt, curve.power_w(limit))
                seconds += dt
            pace = state["speedup"]
        _sleep(seconds / pace)


_worker = False  # this process does the node's work (Node): it reads the node live, others as published


def _drained(stream: Any, timeout_s: float = 5.0) -> None:
    """Wait until the pipe behind `stream` is empty (the reader has taken every line); a terminal or a file
    needs no wait."""
    try:
        fd = stream.fileno()
        deadline = time.monotonic() + timeout_s
        while struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] > 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.0002)
    except (OSError, ValueError, AttributeError):
        return


def _seen(state: dict[str, Any], key: str, live: str) -> float:
    """A reading as this process sees it: live for the process doing the work, else as last published."""
    return float(state[live] if _worker else state["seen"][key])


def _sleep(real_s: float) -> None:
    """The script's pace: `speedup` times faster than the node's clock, never ahead of it (module docstring)."""
    if real_s > 0:
        time.sleep(real_s)


def _curve(state: dict[str, Any]) -> H200Curve:
    base = fitted()
    return base if math.isclose(state["draw_w"], base.draw_w) else base.scaled(state["draw_w"])


def _speed_factor(seed: int, clock_s: float, curve: H200Curve) -> float:
    """The window noise of the segment of the clock `clock_s` falls in: drawn from (seed, segment), so every
    process that reaches the segment draws the same (zeus_kfp.simulate.h200: SEGMENT_S, segment_noise)."""
    sigma = curve.segment_noise
    rng = np.random.default_rng((int(seed), int(clock_s / SEGMENT_S)))
    return float(np.exp(rng.normal(-sigma * sigma / 2, sigma)))


def _apply_pending(state: dict[str, Any]) -> None:
    if state["pending_at_s"] is not None and state["clock_s"] >= state["pending_at_s"]:
        state["in_force_w"], state["pending_at_s"] = state["limit_w"], None


def _advance(state: dict[str, Any], seconds: float, power_w: float) -> None:
    """`seconds` of the clock at `power_w`: the energy integral, and what the coarse counter last published."""
    start, end = state["clock_s"], state["clock_s"] + seconds
    tick = math.floor(end / COUNTER_PERIOD_S) * COUNTER_PERIOD_S
    if tick > start:  # the counter updated inside (start, end]: it shows the integral at that instant
        state["published_j"] = state["energy_j"] + power_w * (tick - start)
    state["energy_j"] += power_w * seconds
    state["clock_s"] = end
    state["power_w"] = power_w


# -- what NvmlGPU asks of pynvml (nvidia-ml-py's names and units: mW, mJ) -------------------------------
@dataclass(frozen=True)
class StandIn:
    """What zeus_kfp.power.nvml reads off a stand-in: its figures are simulated, labelled `source`, on `clock`."""

    source: str = SOURCE

    @staticmethod
    def clock() -> float:
        with _locked(_state_path()) as state:
            return _seen(state, "clock_s", "clock_s")


ZEUS_STAND_IN = StandIn()


def nvmlInit() -> None:
    _state_path()


def nvmlShutdown() -> None:
    return None


def nvmlDeviceGetCount() -> int:
    _state_path()
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if index != 0:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return 0


def nvmlDeviceGetName(handle: int) -> str:
    return NAME


def nvmlSystemGetDriverVersion() -> str:
    return "stand-in"


def nvmlDeviceGetPciInfo(handle: int) -> Any:
    return type("PciInfo", (), {"busId": b"00000000:18:00.0"})()


def nvmlDeviceGetPowerManagementLimitConstraints(handle: int) -> tuple[int, int]:
    curve = Node(_state_path()).curve()
    return round(curve.min_w * 1000), round(curve.max_w * 1000)


def nvmlDeviceGetPowerManagementDefaultLimit(handle: int) -> int:
    return round(Node(_state_path()).curve().max_w * 1000)


def nvmlDeviceGetPowerManagementLimit(handle: int) -> int:
    with _locked(_state_path()) as state:
        return round(state["limit_w"] * 1000)


def nvmlDeviceSetPowerManagementLimit(handle: int, milliwatts: int) -> None:
    with _locked(_state_path()) as state:
        curve = _curve(state)
        if not state["may_set"]:
            raise NVMLError(NVML_ERROR_NO_PERMISSION)
        watts = milliwatts / 1000.0
        if not curve.min_w <= watts <= curve.max_w:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        state["set_calls"] = [*state["set_calls"][-999:], watts]
        if watts != state["limit_w"]:
            state["limit_w"], state["pending_at_s"] = watts, state["clock_s"] + SETTLE_S


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    with _locked(_state_path()) as state:
        return int(_seen(state, "counter_j", "published_j") * 1000)


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    with _locked(_state_path()) as state:
        return round(_seen(state, "power_w", "power_w") * 1000)


__all__ = [
    "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "ZEUS_STAND_IN",
    "NVMLError",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceSetPowerManagementLimit",
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
]
