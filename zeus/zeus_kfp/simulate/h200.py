"""A simulated H200, fitted to what a real one measured: for replaying the JIT profiler where no GPU is.

Every figure it produces is SIMULATED; the measurements it is fitted to are real (traces/h200_*.csv,
copies of shared/traces/h200: a ResNet-18 at batch size 256 swept over every limit from 700 W to 200 W
in 50 W steps, 3 s windows, twice). What they showed, and this model keeps:

- **The draw plateaus below the limit.** Uncapped the GPU drew about 307 W, so every limit from 350 to
  700 W changed nothing; 300 W clipped the peaks (284 W), 250 and 200 W bound fully (248, 199 W). The
  average power is a smooth minimum of the limit and the uncapped draw, `draw * x / (1 + x**k)**(1/k)`
  with x = limit / draw, its sharpness k solved so that 300 W reads what it read.
- **Throughput is flat until the power falls below a knee.** 250 W trained as fast as 700 W; 200 W at
  0.87 of it. Throughput is `min(1, power / knee) ** alpha`, the knee being the 250 W rows' power and
  alpha solved from the 200 W rows. So the optimum is 250 W (Zeus's cost at eta 0.5 with time priced at
  700 W: about 6 % below 700 W, the sweep measured 6.4 %), and 200 W costs more again.
- **Windows are noisy.** Two 3 s windows at the same limit read throughputs about 2 % apart (one standard
  deviation, from the two repeats), far more than the differences between the limits above the draw.
  The model draws a speed factor per `SEGMENT_S` of training (log-normal), scaled so a 3 s window
  averages to the measured spread: short windows are noisier, as the pipeline's 1 s windows were.
- **A limit takes effect after a moment.** A new limit applies `SETTLE_S` after it is set (the sweep's
  15 warm-up steps, about 0.15 s at batch 256, sufficed); until then the old one holds.
- **Its meter is a real meter's.** `min_window_s` is NVML's 1 s, so the profiler treats it as it treats
  a real GPU (zeus_kfp.power.profiler: the search over limits, windows sized to their noise).

`H200Curve.scaled(draw_w)` is the same curve for a workload that draws `draw_w` uncapped (both power
axes scaled): the issue's "binds higher" workloads, 450 and 650 W, which the sweep did not measure.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from zeus_kfp.power.gpu import REAL_METER, PowerConstraints
from zeus_kfp.power.profiler import PowerLimitProfiler

SWEEP_CSV = "h200_sweep_resnet18_bs256.csv"
SEGMENT_S = 0.25  # the model's speed factor holds this long (seconds of training)
SETTLE_S = 0.1  # a new limit applies this long after it is set
NON_BINDING_W = 350.0  # limits at or above this changed nothing in the sweep: the uncapped draw's rows
BATCH_SIZE = 256  # the sweep's
EPOCH_STEPS = 50_000 // BATCH_SIZE  # a CIFAR epoch at that batch size, as the measured script trained


def load_sweep() -> pd.DataFrame:
    """The measured sweep (traces/h200_sweep_resnet18_bs256.csv), as shipped with the package."""
    with resources.files("zeus_kfp.simulate").joinpath("traces", SWEEP_CSV).open() as handle:
        return pd.read_csv(handle)


@dataclass(frozen=True)
class H200Curve:
    """A workload's power and throughput at each limit on a simulated H200 (module docstring)."""

    min_w: float
    max_w: float
    draw_w: float  # what the workload draws uncapped
    sharpness: float  # of the smooth minimum of the limit and the draw
    knee_w: float  # below this power the throughput falls
    alpha: float  # throughput ~ (power / knee) ** alpha below the knee
    samples_per_s: float  # uncapped
    window_noise: float  # relative standard deviation of one window's throughput...
    window_s: float  # ...of this length

    def power_w(self, limit_w: float) -> float:
        x = limit_w / self.draw_w
        return self.draw_w * x / (1.0 + x**self.sharpness) ** (1.0 / self.sharpness)

    def throughput(self, limit_w: float) -> float:
        """Samples per second at `limit_w`, noiseless."""
        return self.samples_per_s * min(1.0, self.power_w(limit_w) / self.knee_w) ** self.alpha

    def cost_per_sample(self, limit_w: float, eta: float = 0.5) -> float:
        """Zeus's cost per sample in joules, time priced at the maximum limit (NSDI'23)."""
        return (eta * self.power_w(limit_w) + (1.0 - eta) * self.max_w) / self.throughput(limit_w)

    def limits(self, step_w: float = 25.0) -> list[float]:
        count = round((self.max_w - self.min_w) / step_w)
        return [self.max_w - i * step_w for i in range(count + 1)]

    def optimum(self, step_w: float = 25.0, eta: float = 0.5) -> float:
        return min(self.limits(step_w), key=lambda limit: (self.cost_per_sample(limit, eta), -limit))

    def scaled(self, draw_w: float) -> H200Curve:
        """The same curve for a workload that draws `draw_w` uncapped (power axes scaled)."""
        factor = draw_w / self.draw_w
        return dataclasses.replace(self, draw_w=draw_w, knee_w=self.knee_w * factor)

    @property
    def segment_noise(self) -> float:
        """The per-segment log-speed deviation that averages to `window_noise` over `window_s`."""
        return self.window_noise * math.sqrt(self.window_s / SEGMENT_S)


def fit(sweep: pd.DataFrame) -> H200Curve:
    """The curve fitted to a sweep with the columns of traces/h200_sweep_resnet18_bs256.csv (module docstring)."""
    by_limit = sweep.groupby("power_limit_w")[["average_power_w", "samples_per_s"]].mean()
    uncapped = by_limit[by_limit.index >= NON_BINDING_W]
    draw, speed = float(uncapped["average_power_w"].mean()), float(uncapped["samples_per_s"].mean())
    limits = sorted(by_limit.index)
    lowest, knee_limit, clip_limit = limits[0], limits[1], limits[2]  # 200 W, 250 W, 300 W
    knee = float(by_limit.loc[knee_limit, "average_power_w"])
    low = by_limit.loc[lowest]
    clip = float(by_limit.loc[clip_limit, "average_power_w"])

    def smooth_min(k: float) -> float:
        x = clip_limit / draw
        return draw * x / (1.0 + x**k) ** (1.0 / k)

    lo, hi = 1.0, 200.0  # smooth_min rises with k: bisect for the clipped limit's power
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if smooth_min(mid) < clip else (lo, mid)
    sharpness = (lo + hi) / 2
    curve = H200Curve(
        min_w=float(lowest),
        max_w=float(limits[-1]),
        draw_w=draw,
        sharpness=sharpness,
        knee_w=knee,
        alpha=1.0,
        samples_per_s=speed,
        window_noise=0.0,
        window_s=float(sweep["window_s"].mean()),
    )
    alpha = math.log(float(low["samples_per_s"]) / speed) / math.log(curve.power_w(float(lowest)) / knee)
    # the two repeats at each limit: their difference has twice one window's variance
    pairs = sweep.pivot_table(index="power_limit_w", columns="repeat", values="samples_per_s")
    relative = (pairs[0] - pairs[1]) / ((pairs[0] + pairs[1]) / 2)
    noise = float(np.sqrt(np.mean(relative**2) / 2))
    return dataclasses.replace(curve, alpha=alpha, window_noise=noise)


@lru_cache(maxsize=1)
def fitted() -> H200Curve:
    """The curve fitted to the shipped sweep: the measured ResNet-18 at batch size 256."""
    return fit(load_sweep())


class SimulatedH200:
    """One simulated H200 running one workload's `curve` (module docstring); the GPU protocol of
    zeus_kfp.power.gpu, driven like SimulatedGPU's model clock: `account_work` per step."""

    kind = "simulated"
    simulated = True
    meter = REAL_METER  # noisy windows, as the real H200's: the profiler searches and confirms as on a real GPU
    can_set_limits = True
    min_window_s = 1.0  # NVML's

    def __init__(self, curve: H200Curve | None = None, seed: int = 0) -> None:
        self.curve = curve or fitted()
        self._rng = np.random.default_rng(seed)
        self._factors: list[float] = []  # the speed factor of each SEGMENT_S of the clock, drawn as reached
        self._limit = self.curve.max_w  # in force
        self._pending: tuple[float, float] | None = None  # (when it applies, limit)
        self._requested = self.curve.max_w
        self._clock = 0.0
        self._energy = 0.0

    def _factor(self) -> float:
        segment = int(self._clock / SEGMENT_S)
        while len(self._factors) <= segment:
            sigma = self.curve.segment_noise
            self._factors.append(float(np.exp(self._rng.normal(-sigma * sigma / 2, sigma))))
        return self._factors[segment]

    def account_work(self, samples: int, steps: int = 1) -> None:
        """`steps` steps of `samples` samples: the clock and energy advance by each at the limit in force."""
        for _ in range(steps):
            if self._pending is not None and self._clock >= self._pending[0]:
                self._limit, self._pending = self._pending[1], None
            seconds = samples / (self.curve.throughput(self._limit) * self._factor())
            self._energy += self.curve.power_w(self._limit) * seconds
            self._clock += seconds

    def device_count(self) -> int:
        return 1

    def names(self) -> list[str]:
        return [f"Simulated H200 (fitted to a measured sweep; draws {self.curve.draw_w:.0f} W uncapped)"]

    def constraints(self, index: int) -> PowerConstraints:
        return PowerConstraints(min_w=self.curve.min_w, max_w=self.curve.max_w, default_w=self.curve.max_w)

    def get_power_limit(self, index: int) -> float:
        return self._requested

    def set_power_limit(self, index: int, watts: float) -> None:
        if not self.curve.min_w <= watts <= self.curve.max_w:
            raise ValueError(f"invalid power_limit_w={watts!r}: allowed {self.curve.min_w:g}-{self.curve.max_w:g} W")
        if watts != self._requested:
            self._requested = float(watts)
            self._pending = (self._clock + SETTLE_S, float(watts))

    def energy_j(self, index: int) -> float:
        return self._energy

    def clock(self) -> float:
        return self._clock

    def close(self) -> None:
        return None


def train_for(gpu: SimulatedH200, profiler: PowerLimitProfiler, seconds: float) -> None:
    """`seconds` of training at batch size 256 on `gpu`, driving `profiler`'s hooks as ZeusDataLoader does
    (a step's begin and end around each batch, an epoch's end every EPOCH_STEPS steps)."""
    start, steps = gpu.clock(), 0
    while gpu.clock() - start < seconds:
        profiler.on_step_begin()
        gpu.account_work(BATCH_SIZE)
        profiler.on_step_end(BATCH_SIZE)
        steps += 1
        if steps % EPOCH_STEPS == 0:
            profiler.on_epoch_end()
