"""A simulated GPU for machines without one: a deterministic power model applied to real step times.

Why: the profiler, the cost threshold and the whole pipeline must be exercisable on a CPU-only
machine, and their decisions must follow the same shape as on a real GPU. The model is shaped
after the V100 measurements of Zeus (NSDI'23, ../shared/traces/summary_power_v100.csv):
limits 100-250 W; below what the workload would draw unconstrained (its *demand*), the average
power follows the limit (a little under it), and throughput falls sub-linearly with power (the
trace: about 0.68-0.72 of full speed at 100 W, 0.97-1.0 at 225 W).

    power(p)      = D * x / (1 + x**k)**(1/k),  x = p / D   (a smooth min(p, D))
    throughput(p) = (power(p) / D) ** alpha                  (relative to the unconstrained speed)

The simulated clock advances by the *real* elapsed time divided by throughput(limit): real work
runs on the CPU, the model says how much longer it would have taken under the limit, and the
energy counter integrates power(limit) over the simulated time. Every figure is simulated:
`simulated` is True and tables built from it carry the flag.

Clock source: "process" (CPU time of this process, the default for in-process training) makes
the simulated step times insensitive to other processes sharing the CPU; "wall" is for
watching another process (the plain-script runner).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from zeus.power.gpu import PowerConstraints

SIM_CLOCKS = ("process", "wall")


@dataclass(frozen=True)
class PowerModel:
    """The simulated device: V100-shaped defaults (see the module docstring)."""

    name: str = "Simulated V100 (model after the Zeus NSDI'23 V100 trace)"
    min_w: float = 100.0
    max_w: float = 250.0
    demand_w: float = 210.0
    sharpness: float = 6.0
    alpha: float = 0.4

    def power_w(self, limit_w: float) -> float:
        x = limit_w / self.demand_w
        return self.demand_w * x / (1.0 + x**self.sharpness) ** (1.0 / self.sharpness)

    def relative_throughput(self, limit_w: float) -> float:
        return (self.power_w(limit_w) / self.demand_w) ** self.alpha

    def cost_per_sample(self, limit_w: float, *, eta: float, max_power_w: float) -> float:
        """Zeus's per-sample cost at `limit_w`, for unit unconstrained throughput."""
        return (eta * self.power_w(limit_w) + (1.0 - eta) * max_power_w) / self.relative_throughput(limit_w)

    def optimal_limit(self, limits: list[float], *, eta: float, max_power_w: float) -> float:
        """The exhaustive-sweep optimum: what a perfect profiler would choose."""
        return min(limits, key=lambda p: (self.cost_per_sample(p, eta=eta, max_power_w=max_power_w), -p))


class SimulatedGPU:
    """`num_devices` identical simulated GPUs sharing one simulated clock (data-parallel: the slowest sets pace)."""

    kind = "simulated"
    simulated = True
    min_window_s = 0.0  # its energy is the exact integral of the model: any window length means something

    def __init__(
        self,
        num_devices: int = 1,
        model: PowerModel | None = None,
        clock: str = "process",
        real_clock: Callable[[], float] | None = None,
    ) -> None:
        """`real_clock` overrides the clock source (tests replay exact step times through it)."""
        if clock not in SIM_CLOCKS:
            raise ValueError(f"invalid clock={clock!r}: allowed {', '.join(SIM_CLOCKS)}")
        if num_devices < 1:
            raise ValueError(f"invalid num_devices={num_devices!r}: allowed a positive integer")
        self.model = model or PowerModel()
        self.can_set_limits = True
        self._real = real_clock or (time.process_time if clock == "process" else time.perf_counter)
        self._limits = [self.model.max_w] * num_devices
        self._energy = [0.0] * num_devices
        self._virtual = 0.0
        self._last_real = self._real()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> SimulatedGPU:
        """ZEUS_SIM_GPUS (count, default 1) and ZEUS_SIM_CLOCK ("process" or "wall")."""
        count = int(os.environ.get("ZEUS_SIM_GPUS", "1"))
        return cls(num_devices=count, clock=os.environ.get("ZEUS_SIM_CLOCK", "process"))

    def _advance(self) -> None:
        with self._lock:
            now = self._real()
            dt_real = max(0.0, now - self._last_real)
            self._last_real = now
            slowest = min(self.model.relative_throughput(p) for p in self._limits)
            dt = dt_real / slowest
            self._virtual += dt
            for i, p in enumerate(self._limits):
                self._energy[i] += self.model.power_w(p) * dt

    def device_count(self) -> int:
        return len(self._limits)

    def names(self) -> list[str]:
        return [self.model.name] * len(self._limits)

    def constraints(self, index: int) -> PowerConstraints:
        self._check(index)
        return PowerConstraints(min_w=self.model.min_w, max_w=self.model.max_w, default_w=self.model.max_w)

    def get_power_limit(self, index: int) -> float:
        self._check(index)
        return self._limits[index]

    def set_power_limit(self, index: int, watts: float) -> None:
        self._check(index)
        if not self.model.min_w <= watts <= self.model.max_w:
            raise ValueError(
                f"invalid power_limit_w={watts!r}: allowed {self.model.min_w:g}-{self.model.max_w:g} W "
                f"on {self.model.name}"
            )
        self._advance()  # time so far ran at the old limit
        self._limits[index] = float(watts)

    def energy_j(self, index: int) -> float:
        self._check(index)
        self._advance()
        return self._energy[index]

    def clock(self) -> float:
        self._advance()
        return self._virtual

    def close(self) -> None:
        return None

    def _check(self, index: int) -> None:
        if not 0 <= index < len(self._limits):
            raise IndexError(f"invalid gpu index {index}: allowed 0-{len(self._limits) - 1}")
