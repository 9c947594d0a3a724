"""Just-in-time power-limit profiler: an explicit state machine advanced by per-step hooks.

Zeus (NSDI'23) profiles power limits *during* the first epoch of real training instead of in a
separate benchmark: for each limit from the maximum down in 25 W steps it runs a few warm-up
iterations (the GPU settles after a limit change), then measures throughput and power over
the next iterations; it then keeps the limit with the lowest per-sample cost

    (eta * power + (1 - eta) * max_power) / throughput

and trains the rest at that limit. Eval is profiled once, at the chosen limit, so the trial's
predicted epoch cost includes it.

States: READY (a limit is pending) -> WARMUP -> PROFILING -> (next limit: WARMUP) ... -> DONE.

A window closes when it has `profile_iters` steps AND has lasted `min_window_s` seconds (backend
clock). Zeus counts iterations only, assuming iterations long next to the meter's update period;
real meters are coarse (an H200's counter advances in ~100 ms steps: 40 steps of 1.3 ms read zero
energy on 11 of 20 limits). The default is the backend's `GPU.min_window_s` (1 s on NVML with a
counter, 0 simulated); ZEUS_MIN_WINDOW_S overrides it. A window that still read zero energy (the
counter did not tick) is void: never recorded nor chosen from, it stays open twice as long and is
read again, up to MAX_REMEASURES times; then profiling stops with the limits measured so far (a
counter that never moves cannot rank limits). The first void window logs a warning.

An epoch that ends inside a window cancels it (a partial window mixes in epoch-boundary work: eval,
reshuffling) and the limit restarts next epoch. But a window that began at an epoch's first step
and is still open at its end fits in no epoch (epochs are equally long): cancelling would restart
it forever. From then on windows *span* epochs: at an epoch's end the window pauses (boundary work
left out) and resumes at the next epoch's first step, same limit. `ProfileParams.fit` still
shrinks the iteration counts to one epoch; the time needed is unknown before an epoch has run, so
spanning covers it. Eval is profiled at the chosen limit over as many eval passes as it takes to
last `min_window_s`.

`restore()` puts back the limits in force before the trial (the maximum on an untuned node);
callers run it in `finally` and on signals so a crashed or killed trial never leaves a GPU
throttled.

The profiler never reads a clock itself: all figures come from the energy monitor, so the same
machine runs on NVML, zeusd or the simulated GPU, and tests can drive it deterministically.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from zeus.power.gpu import GPU
from zeus.power.monitor import EnergyMonitor, Measurement

log = logging.getLogger(__name__)

# (power in W over all the job's GPUs, throughput in units/s) -> cost per unit of work: JobSpec.cost_rate
CostRate = Callable[[float, float], float]
PROFILE_COLUMNS = ("phase", "power_limit_w", "average_power_w", "throughput", "simulated")
PHASES = ("train", "eval")
MIN_WINDOW_ALLOWED = "a number of seconds >= 0, or unset (None) for the GPU backend's default"
MAX_REMEASURES = 3  # a void window is read again at 2x, 4x, 8x its length before profiling gives up
EVAL_WINDOW = "profile:eval"
ALL_WINDOW = "profile:all"  # the whole profiling phase, for its total time


def valid_min_window_s(value: object) -> bool:
    """None (the backend's default) or a finite number of seconds >= 0."""
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class ProfilerState(StrEnum):
    READY = "ready"
    WARMUP = "warmup"
    PROFILING = "profiling"
    DONE = "done"


@dataclass(frozen=True)
class ProfileParams:
    """Iterations per limit (Zeus defaults 10 warm-up + 40 profiled), the limit step in watts, and the
    shortest window in seconds (None: the GPU backend's `min_window_s`)."""

    warmup_iters: int = 10
    profile_iters: int = 40
    step_w: float = 25.0
    min_window_s: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.warmup_iters, int) and self.warmup_iters >= 0):
            raise ValueError(f"invalid warmup_iters={self.warmup_iters!r}: allowed an integer >= 0")
        if not (isinstance(self.profile_iters, int) and self.profile_iters >= 1):
            raise ValueError(f"invalid profile_iters={self.profile_iters!r}: allowed an integer >= 1")
        if not (self.step_w > 0 and math.isfinite(self.step_w)):
            raise ValueError(f"invalid step_w={self.step_w!r}: allowed a positive number of watts")
        if not valid_min_window_s(self.min_window_s):
            raise ValueError(f"invalid min_window_s={self.min_window_s!r}: allowed {MIN_WINDOW_ALLOWED}")

    def fit(self, steps_per_epoch: int | None) -> ProfileParams:
        """Shrink warm-up and profiling proportionally when one window would not fit in an epoch.

        Without this a short epoch would cancel every window and profiling would never end. Only the
        counts shrink: `min_window_s` is a floor set by the meter, and a window that needs more time
        than an epoch has spans epochs instead (see the module docstring).
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
        return dataclasses.replace(self, warmup_iters=warmup, profile_iters=profile)


def candidate_limits(gpu: GPU, step_w: float = 25.0) -> list[float]:
    """Limits from the maximum down in `step_w` steps, within every device's constraints."""
    cons = [gpu.constraints(i) for i in range(gpu.device_count())]
    hi, lo = min(c.max_w for c in cons), max(c.min_w for c in cons)
    limits, p = [], hi
    while p >= lo - 1e-9:
        limits.append(round(p, 3))
        p -= step_w
    return limits


def valid_rows(profile: pd.DataFrame) -> np.ndarray:
    """Rows whose power and throughput are positive and finite; a zero-power row is a void window (the meter
    did not tick), which profiles stored before zeus-kfp waited for the meter may still contain.
    numpy, not pandas: the simulator asks this for every trial it runs."""
    power = profile["average_power_w"].to_numpy(dtype=float)
    throughput = profile["throughput"].to_numpy(dtype=float)
    return (power > 0) & (throughput > 0) & np.isfinite(power) & np.isfinite(throughput)


def train_rows(profile: pd.DataFrame) -> np.ndarray:
    """Valid rows of the training phase: what a power limit is chosen from."""
    return valid_rows(profile) & (profile["phase"].to_numpy(dtype=object) == "train")


def choose_limit(profile: pd.DataFrame, cost_rate: CostRate) -> float:
    """The train-phase limit of least cost per unit of work (ties go to the higher limit: same cost, faster).

    `cost_rate` is the job's (`JobSpec.cost_rate`): the live profiler, a reused profile, the trace-backed
    trial and the report all choose through this one function. Void rows (zero or non-finite power or
    throughput) are never chosen from.
    """
    rows = np.flatnonzero(train_rows(profile))
    if rows.size == 0:
        raise ValueError("profile has no valid train rows to choose a power limit from")
    limits = profile["power_limit_w"].to_numpy(dtype=float)[rows]
    power = profile["average_power_w"].to_numpy(dtype=float)[rows]
    throughput = profile["throughput"].to_numpy(dtype=float)[rows]
    costs = [(cost_rate(float(p), float(t)), -float(w)) for p, t, w in zip(power, throughput, limits, strict=True)]
    return float(limits[min(range(len(costs)), key=costs.__getitem__)])


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
        cost_rate: CostRate,
        params: ProfileParams | None = None,
        monitor: EnergyMonitor | None = None,
        reuse: pd.DataFrame | None = None,
        agree: Callable[[float], float] | None = None,
    ) -> None:
        self.gpu = gpu
        # How a chosen limit becomes the one every process trains at: as is here; rank 0's, broadcast, in a
        # distributed trial (zeus.train.distributed), so no rank can pick another.
        self.agree = agree or (lambda watts: watts)
        self.monitor = monitor or EnergyMonitor(gpu)
        self.cost_rate = cost_rate
        self.params = params or ProfileParams()
        given = self.params.min_window_s
        self.min_window_s = float(gpu.min_window_s if given is None else given)
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
        self.invalid_windows = 0  # reads that found the energy counter had not moved (void, re-measured)
        self.spanned_epochs = 0  # epoch boundaries a window was paused over
        self.span_epochs = False  # set once a window proved longer than an epoch
        self.profiling_s: float | None = None
        self.gave_up = ""
        self._index = 0
        self._count = 0
        self._samples = 0
        self._epoch_step = 0  # steps since the epoch began
        self._limit_began_at = 0  # the epoch step at which the current limit's warm-up began
        self._required_s = self.min_window_s
        self._remeasures = 0
        self._eval_open = False
        self._eval_done = False
        self._eval_samples = 0
        self._eval_remeasures = 0
        self._warned_void = False
        self._current: float | None = None
        self.reused = False
        if reuse is not None and not reuse.empty:
            if train_rows(reuse).any():
                self.rows = profile_frame(reuse.to_dict("records")).to_dict("records")
                self.chosen_limit = self.agree(choose_limit(reuse, cost_rate))
                self._eval_done = bool((reuse["phase"] == "eval").any())
                self.state = ProfilerState.DONE
                self.reused = True
            else:
                log.warning("the stored power profile has no valid train rows (zero power); profiling again")

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
            if not self.monitor.is_open(ALL_WINDOW):
                self.monitor.begin_window(ALL_WINDOW)
            self._apply(self.limits[self._index])
            self._enter_warmup()
        elif self.state is ProfilerState.PROFILING and self.monitor.is_paused(self.window):
            self.monitor.resume_window(self.window)  # a window spanning an epoch boundary goes on
        elif self.state is ProfilerState.DONE and self._current != self.chosen_limit:
            self._apply(self.chosen_limit)

    def _enter_warmup(self) -> None:
        self.state, self._count, self._limit_began_at = ProfilerState.WARMUP, 0, self._epoch_step
        if self.params.warmup_iters == 0:
            self._enter_profiling()

    def _enter_profiling(self) -> None:
        self.monitor.begin_window(self.window)
        self.state, self._count, self._samples = ProfilerState.PROFILING, 0, 0
        self._required_s, self._remeasures = self.min_window_s, 0

    def on_step_end(self, samples: int, steps: int = 1) -> None:
        """`steps` steps over `samples` samples in all have run since on_step_begin. More than one: a
        driver outside the process that sees progress in bursts (zeus.train.progress), so windows
        open and close only where it saw progress."""
        self._epoch_step += steps
        if self.state is ProfilerState.WARMUP:
            self._count += steps
            if self._count >= self.params.warmup_iters:
                self._enter_profiling()
        elif self.state is ProfilerState.PROFILING:
            self._count += steps
            self._samples += samples
            if self._count >= self.params.profile_iters and self.monitor.elapsed_s(self.window) >= self._required_s:
                self._close_window()

    def _void(self, m: Measurement, where: str) -> None:
        """Count a window whose energy counter did not move; warn the first time."""
        self.invalid_windows += 1
        say = log.info if self._warned_void else log.warning
        self._warned_void = True
        say(
            "zeus: the GPU energy counter did not advance over a %.3f s window (%s); the window is void and is "
            "measured longer (the counter updates in coarse steps; ZEUS_MIN_WINDOW_S is %g s)",
            m.time_s,
            where,
            self.min_window_s,
        )

    def _close_window(self) -> None:
        limit = self.limits[self._index]
        m = self.monitor.peek(self.window)
        if m.counter_stalled:
            self._void(m, f"{limit:g} W")
            if self._remeasures < MAX_REMEASURES:
                self._remeasures += 1
                self._required_s = 2.0 * max(m.time_s, self._required_s)
                return
            self.monitor.cancel_window(self.window)
            self.gave_up = f"energy counter did not advance in {m.time_s:.2f} s at {limit:g} W"
            log.warning("zeus: %s; power-limit profiling stops with the limits measured so far", self.gave_up)
            self._finish()
            return
        self.monitor.cancel_window(self.window)  # `m` is its final reading
        throughput = self._samples / max(m.time_s, 1e-12)
        self.rows.append(self._row("train", limit, m.average_power_w, throughput))
        self._index += 1
        if self._index < len(self.limits):
            self._apply(self.limits[self._index])
            self._enter_warmup()
            return
        self._finish()

    def _finish(self) -> None:
        profile = profile_frame(self.rows)
        # Without evidence to throttle on, keep what was in force before the trial.
        evidence = train_rows(profile).any()
        chosen = choose_limit(profile, self.cost_rate) if evidence else self.original_limits[0]
        self.chosen_limit = self.agree(chosen)
        self._apply(self.chosen_limit)
        self.state = ProfilerState.DONE
        if self.monitor.is_open(ALL_WINDOW):
            self.profiling_s = self.monitor.end_window(ALL_WINDOW).time_s
        log.info("power-limit profiling done: chose %g W of %s; %s", self.chosen_limit, self.limits, self.summary())

    def on_epoch_end(self) -> None:
        if self.state in (ProfilerState.WARMUP, ProfilerState.PROFILING):
            limit = self.limits[self._index]
            if self.span_epochs or self._limit_began_at == 0:
                if not self.span_epochs:
                    log.info("the %g W window outlasts a whole epoch: windows span epochs from now on", limit)
                self.span_epochs = True
                self.spanned_epochs += 1
                if self.monitor.is_open(self.window):
                    self.monitor.pause_window(self.window)
            else:
                self.monitor.cancel_window(self.window)
                self.cancelled_windows += 1
                log.info("epoch ended inside the %g W window; it restarts next epoch", limit)
                self.state = ProfilerState.READY
        self._epoch_step = 0

    def on_eval_begin(self) -> None:
        if self.state is ProfilerState.DONE and not self._eval_done:
            self._apply(self.chosen_limit)
            if self.monitor.is_paused(EVAL_WINDOW):
                self.monitor.resume_window(EVAL_WINDOW)  # eval passes shorter than min_window_s add up
            else:
                self.monitor.begin_window(EVAL_WINDOW)
            self._eval_open = True

    def on_eval_end(self, samples: int) -> None:
        if not self._eval_open:
            return
        self._eval_open = False
        self._eval_samples += samples
        self.monitor.pause_window(EVAL_WINDOW)
        m = self.monitor.peek(EVAL_WINDOW)
        if m.time_s < self.min_window_s:
            return
        if m.counter_stalled:
            self._void(m, "eval")
            self._eval_remeasures += 1
            if self._eval_remeasures <= MAX_REMEASURES:
                return
        self.monitor.cancel_window(EVAL_WINDOW)
        self._eval_done = True
        if m.time_s > 0 and self._eval_samples > 0 and not m.counter_stalled:
            self.rows.append(self._row("eval", self.chosen_limit, m.average_power_w, self._eval_samples / m.time_s))

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

    def best_limit(self) -> float | None:
        """The chosen limit; for a trial that ended mid-profiling, the choice among the limits measured so
        far (what a later trial reusing this partial profile will train at); None with nothing measured."""
        if self.chosen_limit is not None:
            return self.chosen_limit
        profile = self.profile()
        return choose_limit(profile, self.cost_rate) if train_rows(profile).any() else None

    def partial_note(self) -> str:
        """For a trial that ended before profiling finished: what its limit was chosen among ("" otherwise)."""
        if self.done or self.best_limit() is None:
            return ""
        return f"ended while profiling: chose among {len(self.profile())} of {len(self.limits)} limits"

    def summary(self) -> dict[str, object]:
        """How profiling went, for result.json and device checks (not part of the stored profile table)."""
        counts = ("min_window_s", "invalid_windows", "cancelled_windows", "spanned_epochs", "profiling_s", "gave_up")
        return {
            "done": self.done,
            "reused": self.reused,
            "chosen_limit_w": self.chosen_limit,
            "limits_w": list(self.limits),
            **{name: getattr(self, name) for name in counts},
        }
