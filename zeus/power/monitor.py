"""An energy monitor with named windows: begin a window, end it, get its time and energy per GPU.

Why named windows: the profiler measures one window per power limit while the trial measures
one window over the whole run, at the same time, on the same counters. Windows only remember
their start marks, so any number can overlap and reading costs two counter reads per GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zeus.power.gpu import GPU


@dataclass(frozen=True)
class Measurement:
    """One window: seconds, joules per GPU index, and whether the figures come from the simulated GPU."""

    name: str
    time_s: float
    energy_j: dict[int, float]
    simulated: bool

    @property
    def total_energy_j(self) -> float:
        return sum(self.energy_j.values())

    @property
    def average_power_w(self) -> float:
        """Average power over the window, all GPUs together."""
        return self.total_energy_j / self.time_s if self.time_s > 0 else 0.0


class EnergyMonitor:
    """Measures windows on `gpu` for the GPU indices given (all by default)."""

    def __init__(self, gpu: GPU, indices: Sequence[int] | None = None) -> None:
        self.gpu = gpu
        self.indices = list(range(gpu.device_count())) if indices is None else list(indices)
        self._open: dict[str, tuple[float, dict[int, float]]] = {}

    def _marks(self) -> tuple[float, dict[int, float]]:
        # The clock is read on both sides of the energy reads and averaged, so a thread stalled between
        # reads (a busy host) skews time and energy less.
        before = self.gpu.clock()
        energy = {i: self.gpu.energy_j(i) for i in self.indices}
        return 0.5 * (before + self.gpu.clock()), energy

    def begin_window(self, name: str) -> None:
        if name in self._open:
            raise ValueError(f"window {name!r} is already open")
        self._open[name] = self._marks()

    def is_open(self, name: str) -> bool:
        return name in self._open

    def peek(self, name: str) -> Measurement:
        """The window so far, leaving it open (the runner polls this to enforce the cost threshold)."""
        if name not in self._open:
            raise KeyError(f"window {name!r} is not open")
        t0, e0 = self._open[name]
        t1, e1 = self._marks()
        return Measurement(
            name=name,
            time_s=max(0.0, t1 - t0),
            energy_j={i: max(0.0, e1[i] - e0[i]) for i in self.indices},
            simulated=self.gpu.simulated,
        )

    def end_window(self, name: str) -> Measurement:
        measurement = self.peek(name)
        del self._open[name]
        return measurement

    def cancel_window(self, name: str) -> None:
        self._open.pop(name, None)
