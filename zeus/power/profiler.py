"""Just-in-time power-limit profiler: an explicit state machine advanced by per-step hooks.

Zeus (NSDI'23) profiles power limits *during* the first epoch of real training instead of in a
separate benchmark: for each limit from the maximum down in 25 W steps it runs a few warm-up
iterations (the GPU settles after a limit change), then measures throughput and power over
the next iterations; it then keeps the limit with the lowest per-sample cost

    (eta * power + (1 - eta) * max_power) / throughput

and trains the rest at that limit. Eval is profiled once, at the chosen limit, so the trial's
predicted epoch cost includes it.

States: READY (a limit is pending) -> WARMUP -> PROFILING -> (next limit: WARMUP) ... -> DONE.
An epoch that ends inside a warm-up or profiling window cancels that window (a partial window
mixes in epoch-boundary work such as eval and data reshuffling) and the same limit restarts on
the next epoch. `restore()` puts back the limits in force before the trial (the maximum on an
untuned node); callers run it in `finally` and on signals so a crashed or killed trial never
leaves a GPU throttled.

The profiler never reads a clock itself: all figures come from the energy monitor, so the same
machine runs on NVML, zeusd or the simulated GPU, and tests can drive it deterministically.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import StrEnum

import pandas as pd

from zeus.power.gpu import GPU
from zeus.power.monitor import EnergyMonitor

log = logging.getLogger(__name__)

PROFILE_COLUMNS = ("phase", "power_limit_w", "average_power_w", "throughput", "simulated")
PHASES = ("train", "eval")


class ProfilerState(StrEnum):
    READY = "ready"
    WARMUP = "warmup"
    PROFILING = "profiling"
    DONE = "done"


@dataclass(frozen=True)
class ProfileParams:
    """Iterations per limit (Zeus defaults 10 warm-up + 40 profiled) and the limit step in watts."""

    warmup_iters: int = 10
    profile_iters: int = 40
    step_w: float = 25.0

    def __post_init__(self) -> None:
        if not (isinstance(self.warmup_iters, int) and self.warmup_iters >= 0):
            raise ValueError(f"invalid warmup_iters={self.warmup_iters!r}: allowed an integer >= 0")
        if not (isinstance(self.profile_iters, int) and self.profile_iters >= 1):
            raise ValueError(f"invalid profile_iters={self.profile_iters!r}: allowed an integer >= 1")
        if not (self.step_w > 0 and math.isfinite(self.step_w)):
            raise ValueError(f"invalid step_w={self.step_w!r}: allowed a positive number of watts")

    def fit(self, steps_per_epoch: int | None) -> ProfileParams:
        """Shrink warm-up and profiling proportionally when one window would not fit in an epoch.

        Without this a short epoch would cancel every window and profiling would never end.
        """
        total = self.warmup_iters + self.profile_iters
        if not steps_per_epoch or steps_per_epoch >= total:
            return self
        scale = steps_per_epoch / total
        profile = max(1, math.floor(self.profile_iters * scale))
        warmup = max(0, min(math.floor(self.warmup_iters * scale), steps_per_epoch - profile))
        log.info(
            "epoch has %d steps < %d warm-up + %d profile; profiling %d + %d per limit",
            steps_per_epoch,
            self.warmup_iters,
            self.profile_iters,
            warmup,
            profile,
        )
        return ProfileParams(warmup_iters=warmup, profile_iters=profile, step_w=self.step_w)


def candidate_limits(gpu: GPU, step_w: float = 25.0) -> list[float]:
    """Limits from the maximum down in `step_w` steps, within every device's constraints."""
    cons = [gpu.constraints(i) for i in range(gpu.device_count())]
    hi, lo = min(c.max_w for c in cons), max(c.min_w for c in cons)
    limits, p = [], hi
    while p >= lo - 1e-9:
        limits.append(round(p, 3))
        p -= step_w
    return limits


def cost_per_sample(power_w: float, throughput: float, *, eta: float, max_power_w: float) -> float:
    """Zeus's per-sample cost; `power_w` and `max_power_w` are totals over the job's GPUs."""
    if throughput <= 0:
        return math.inf
    return (eta * power_w + (1.0 - eta) * max_power_w) / throughput


def choose_limit(profile: pd.DataFrame, *, eta: float, max_power_w: float) -> float:
    """The train-phase limit of least per-sample cost (ties go to the higher limit: same cost, faster)."""
    train = profile[profile["phase"] == "train"]
    if train.empty:
        raise ValueError("profile has no train rows to choose a power limit from")
    costs = [
        (cost_per_sample(r.average_power_w, r.throughput, eta=eta, max_power_w=max_power_w), -r.power_limit_w)
        for r in train.itertuples()
    ]
    best = min(range(len(costs)), key=costs.__getitem__)
    return float(train["power_limit_w"].iloc[best])


def profile_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as the profile table, columns in the contract's order."""
    frame = pd.DataFrame(rows, columns=list(PROFILE_COLUMNS))
    return frame.astype(
        {"phase": "string", "power_limit_w": float, "average_power_w": float, "throughput": float, "simulated": bool}
    )


class PowerLimitProfiler:
    """Drives one trial's power limits. Hooks: on_step_begin/on_step_end, on_epoch_end, on_eval_begin/end."""

    def __init__(
        self,
        gpu: GPU,
        *,
        eta: float,
        max_power_w: float,
        params: ProfileParams | None = None,
        monitor: EnergyMonitor | None = None,
        reuse: pd.DataFrame | None = None,
    ) -> None:
        self.gpu = gpu
        self.monitor = monitor or EnergyMonitor(gpu)
        self.eta = eta
        self.max_power_w = max_power_w
        self.params = params or ProfileParams()
        self.max_limit = min(gpu.constraints(i).max_w for i in range(gpu.device_count()))
        # What `restore()` puts back: the limits in force before the trial. On a node nobody else tuned
        # that is the maximum (Zeus restores the maximum); where an admin set a lower cap, it stays.
        self.original_limits = [gpu.get_power_limit(i) for i in range(gpu.device_count())]
        self.measure_only = not gpu.can_set_limits
        self.limits = [gpu.get_power_limit(0)] if self.measure_only else candidate_limits(gpu, self.params.step_w)
        self.rows: list[dict] = []
        self.state = ProfilerState.READY
        self.chosen_limit: float | None = None
        self.cancelled_windows = 0
        self._index = 0
        self._count = 0
        self._samples = 0
        self._eval_open = False
        self._eval_done = False
        self._current: float | None = None
        if reuse is not None and not reuse.empty:
            self.rows = profile_frame(reuse.to_dict("records")).to_dict("records")
            self.chosen_limit = choose_limit(reuse, eta=eta, max_power_w=max_power_w)
            self._eval_done = bool((reuse["phase"] == "eval").any())
            self.state = ProfilerState.DONE
            self.reused = True
        else:
            self.reused = False

    # -- limits --------------------------------------------------------------------------------
    def _apply(self, watts: float) -> None:
        if not self.measure_only and watts != self._current:
            for i in range(self.gpu.device_count()):
                self.gpu.set_power_limit(i, watts)
            if not self.gpu.can_set_limits:
                # Refused just now (no SYS_ADMIN): profiling limits we cannot set would label rows with
                # limits that never applied. Measure one window at the limit actually in force instead.
                self.measure_only = True
                self.limits, self._index, self.rows = [self.gpu.get_power_limit(0)], 0, []
                watts = self.limits[0]
        self._current = watts

    def restore(self) -> None:
        """Put the limits from before the trial back on every GPU. Safe to call more than once."""
        if self.gpu.can_set_limits:
            for i, watts in enumerate(self.original_limits):
                self.gpu.set_power_limit(i, watts)
        self._current = self.original_limits[0]

    @property
    def window(self) -> str:
        return f"profile:{self.limits[self._index]:g}"

    # -- hooks ---------------------------------------------------------------------------------
    def on_step_begin(self) -> None:
        if self.state is ProfilerState.READY:
            self._apply(self.limits[self._index])
            self._enter_warmup()
        elif self.state is ProfilerState.DONE and self._current != self.chosen_limit:
            self._apply(self.chosen_limit)

    def _enter_warmup(self) -> None:
        self.state, self._count = ProfilerState.WARMUP, 0
        if self.params.warmup_iters == 0:
            self._enter_profiling()

    def _enter_profiling(self) -> None:
        self.monitor.begin_window(self.window)
        self.state, self._count, self._samples = ProfilerState.PROFILING, 0, 0

    def on_step_end(self, samples: int) -> None:
        if self.state is ProfilerState.WARMUP:
            self._count += 1
            if self._count >= self.params.warmup_iters:
                self._enter_profiling()
        elif self.state is ProfilerState.PROFILING:
            self._count += 1
            self._samples += samples
            if self._count >= self.params.profile_iters:
                self._close_window()

    def _close_window(self) -> None:
        m = self.monitor.end_window(self.window)
        throughput = self._samples / max(m.time_s, 1e-12)
        self.rows.append(self._row("train", self.limits[self._index], m.average_power_w, throughput))
        self._index += 1
        if self._index < len(self.limits):
            self._apply(self.limits[self._index])
            self._enter_warmup()
            return
        self.chosen_limit = choose_limit(profile_frame(self.rows), eta=self.eta, max_power_w=self.max_power_w)
        self._apply(self.chosen_limit)
        self.state = ProfilerState.DONE
        log.info("power-limit profiling done: chose %g W of %s", self.chosen_limit, self.limits)

    def on_epoch_end(self) -> None:
        if self.state in (ProfilerState.WARMUP, ProfilerState.PROFILING):
            self.monitor.cancel_window(self.window)
            self.cancelled_windows += 1
            log.info("epoch ended inside the %g W window; it restarts next epoch", self.limits[self._index])
            self.state = ProfilerState.READY

    def on_eval_begin(self) -> None:
        if self.state is ProfilerState.DONE and not self._eval_done:
            self._apply(self.chosen_limit)
            self.monitor.begin_window("profile:eval")
            self._eval_open = True

    def on_eval_end(self, samples: int) -> None:
        if self._eval_open:
            m = self.monitor.end_window("profile:eval")
            self._eval_open, self._eval_done = False, True
            if m.time_s > 0 and samples > 0:
                self.rows.append(self._row("eval", self.chosen_limit, m.average_power_w, samples / m.time_s))

    def _row(self, phase: str, limit: float, power: float, throughput: float) -> dict:
        return {
            "phase": phase,
            "power_limit_w": float(limit),
            "average_power_w": float(power),
            "throughput": float(throughput),
            "simulated": bool(self.gpu.simulated),
        }

    # -- outputs -------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.state is ProfilerState.DONE

    def profile(self) -> pd.DataFrame:
        return profile_frame(self.rows)
