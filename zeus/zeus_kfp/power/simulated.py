"""A simulated GPU for machines without one: a deterministic model of time and power per step.

Why: the profiler, the cost threshold and the whole pipeline must be exercisable on a CPU-only
machine, and their figures must not depend on how busy that machine is (CI runs at load 10-25).
So the simulated clock is a *model clock*: it advances only by the work a trial reports
(`account_work`, called by ZeusDataLoader for every batch), never by measured CPU or wall time.
The same script on an idle laptop and on a loaded CI runner gives the same simulated figures.

The model is shaped after the V100 measurements of Zeus (NSDI'23, shared/traces/summary_power_v100.csv):
limits 100-250 W; below what a busy GPU would draw unconstrained (its *demand*), the average power
follows the limit (a little under it), and throughput falls sub-linearly with power (the trace:
about 0.68-0.72 of full speed at 100 W, 0.97-1.0 at 225 W).

    power(p)      = D * x / (1 + x**k)**(1/k),  x = p / D    (a smooth min(p, D))
    throughput(p) = (power(p) / D) ** alpha                   (relative to the unconstrained speed)

A step of n samples has a fixed overhead (kernel launches, host work; not slowed by the limit, drawn
at `overhead_w`) and compute time n / peak / throughput(p), drawn at power(p). Small batches are
launch-bound (many steps per epoch, little compute each), large ones compute-bound: the batch-size
trade-off the bandit learns, and a power-limit optimum that depends on the batch size.

Every figure is simulated: `simulated` is True and tables built from it carry the flag.

Plain scripts (the runner watches another process and cannot see its batches). The rule: a
plain script's work is what its collected progress says. The runner's simulated GPU starts on the
"wall" clock (real elapsed time / throughput). At the script's first report the runner switches it
to the model clock (`use_model_clock`) and charges the trial from there: for every step a step
counter advanced it calls `account_work(batch_size)`, exactly as ZeusDataLoader does per batch;
a script that reports only epochs (an epoch counter, or just the metric once an epoch) is charged
`account_epoch(batch_size)` per epoch: `epoch_samples` samples (50,000, a CIFAR-sized training
set; ZEUS_SIM_EPOCH_SAMPLES) in steps of its batch size, since the runner cannot see how many
samples the script's epoch has. Either way the plain trial's figures are as deterministic as a
Zeus-aware one's, whatever the machine's load, and time before the first report (imports, data
loading) is not charged, as it is not for a Zeus-aware script, which is measured from the start of
training. Only a script that never reports stays on the wall clock (its source says "wall clock").
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from zeus_kfp.power.gpu import EXACT_METER, PowerConstraints

SIM_CLOCKS = ("model", "wall")
EPOCH_SAMPLES_ENV = "ZEUS_SIM_EPOCH_SAMPLES"


@dataclass(frozen=True)
class PowerModel:
    """The simulated device: V100-shaped defaults (see the module docstring)."""

    name: str = "Simulated V100 (model after the Zeus NSDI'23 V100 trace)"
    min_w: float = 100.0
    max_w: float = 250.0
    demand_w: float = 210.0
    sharpness: float = 6.0
    alpha: float = 0.4
    overhead_s: float = 0.001  # per step, whatever the limit
    overhead_w: float = 70.0  # drawn during the per-step overhead
    peak_samples_per_s: float = 200_000.0  # compute speed at full power
    epoch_samples: int = 50_000  # a plain script's epoch when only epochs are reported (see above)

    def power_w(self, limit_w: float) -> float:
        x = limit_w / self.demand_w
        return self.demand_w * x / (1.0 + x**self.sharpness) ** (1.0 / self.sharpness)

    def relative_throughput(self, limit_w: float) -> float:
        return (self.power_w(limit_w) / self.demand_w) ** self.alpha

    def step(self, limit_w: float, samples: float) -> tuple[float, float]:
        """(seconds, joules) of one step over `samples` samples on one device at `limit_w`."""
        compute_s = samples / self.peak_samples_per_s / self.relative_throughput(limit_w)
        return self.overhead_s + compute_s, self.overhead_w * self.overhead_s + self.power_w(limit_w) * compute_s

    def optimal_limit(self, limits: list[float], cost: Callable[[float, float], float], samples: float) -> float:
        """The exhaustive-sweep optimum for steps of `samples`: what a perfect profiler would choose.

        `cost(energy_j, time_s)` is the job's (JobSpec.cost_model.cost); ties go to the higher limit.
        """

        def step_cost(limit: float) -> float:
            seconds, joules = self.step(limit, samples)
            return cost(joules, seconds)

        return min(limits, key=lambda p: (step_cost(p), -p))


def epoch_samples_from_env() -> int:
    """ZEUS_SIM_EPOCH_SAMPLES as a positive integer (default: PowerModel's), or ValueError naming it."""
    text = os.environ.get(EPOCH_SAMPLES_ENV, "").strip()
    if not text:
        return PowerModel.epoch_samples
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"invalid {EPOCH_SAMPLES_ENV}={text!r}: allowed a positive integer (samples an epoch)")
    return int(text)


class SimulatedGPU:
    """`num_devices` identical simulated GPUs sharing one clock (data-parallel: the slowest sets the pace)."""

    kind = "simulated"
    simulated = True
    meter = EXACT_METER  # the model's exact integral: the profiler keeps Zeus's sweep
    min_window_s = 0.0  # its energy is the exact integral of the model: any window length means something

    def __init__(
        self,
        num_devices: int = 1,
        model: PowerModel | None = None,
        clock: str = "model",
        real_clock: Callable[[], float] | None = None,
    ) -> None:
        """clock "model": time advances only through `account_work`; "wall": real elapsed time / throughput
        (`real_clock` overrides the real time source)."""
        if clock not in SIM_CLOCKS:
            raise ValueError(f"invalid clock={clock!r}: allowed {', '.join(SIM_CLOCKS)}")
        if num_devices < 1:
            raise ValueError(f"invalid num_devices={num_devices!r}: allowed a positive integer")
        self.model = model or PowerModel()
        self.clock_kind = clock
        self.can_set_limits = True
        self._real = real_clock or time.perf_counter
        self._limits = [self.model.max_w] * num_devices
        self._energy = [0.0] * num_devices
        self._virtual = 0.0
        self._last_real = self._real()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, clock: str | None = None) -> SimulatedGPU:
        """ZEUS_SIM_GPUS (count, default 1), ZEUS_SIM_CLOCK ("model", the default, or "wall"; `clock` overrides
        it) and ZEUS_SIM_EPOCH_SAMPLES (a plain script's epoch, 50,000 samples)."""
        count = int(os.environ.get("ZEUS_SIM_GPUS", "1"))
        model = PowerModel(epoch_samples=epoch_samples_from_env())
        return cls(num_devices=count, model=model, clock=clock or os.environ.get("ZEUS_SIM_CLOCK", "model"))

    def account_work(self, samples: int, steps: int = 1) -> None:
        """`steps` steps over `samples` samples each, split evenly over the devices: the model clock advances
        by the slowest device's step time per step; each device draws its step energy, then waits at the
        overhead power."""
        if self.clock_kind != "model" or steps < 1:
            return
        with self._lock:
            share = samples / len(self._limits)
            per_device = [self.model.step(p, share) for p in self._limits]
            dt = max(seconds for seconds, _ in per_device)
            self._virtual += dt * steps
            for i, (seconds, joules) in enumerate(per_device):
                self._energy[i] += (joules + self.model.overhead_w * (dt - seconds)) * steps

    def account_epoch(self, batch_size: int, fraction: float = 1.0) -> None:
        """One epoch (or `fraction` of one) of a plain script that reports only epochs: `model.epoch_samples`
        samples in steps of `batch_size` (see "Plain scripts" above)."""
        full, rest = divmod(round(self.model.epoch_samples * fraction), batch_size)
        self.account_work(batch_size, steps=full)
        self.account_work(rest, steps=1 if rest else 0)

    def use_model_clock(self) -> None:
        """Switch a wall-clock GPU to the model clock (see "Plain scripts" above). The clock and energy
        so far stay; from now on only `account_work` advances them."""
        with self._lock:
            if self.clock_kind == "wall":
                self._advance_wall_locked()
            self.clock_kind = "model"

    def _advance_wall(self) -> None:
        if self.clock_kind != "wall":
            return
        with self._lock:
            self._advance_wall_locked()

    def _advance_wall_locked(self) -> None:
        now = self._real()
        dt_real = max(0.0, now - self._last_real)
        self._last_real = now
        dt = dt_real / min(self.model.relative_throughput(p) for p in self._limits)
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
        self._advance_wall()  # wall time so far ran at the old limit
        self._limits[index] = float(watts)

    def energy_j(self, index: int) -> float:
        self._check(index)
        self._advance_wall()
        return self._energy[index]

    def clock(self) -> float:
        self._advance_wall()
        return self._virtual

    def close(self) -> None:
        return None

    def _check(self, index: int) -> None:
        if not 0 <= index < len(self._limits):
            raise IndexError(f"invalid gpu index {index}: allowed 0-{len(self._limits) - 1}")
