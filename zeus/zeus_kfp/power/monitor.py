"""An energy monitor with named windows: begin a window, end it, get its time and energy per GPU.

Why named windows: the profiler measures one window per power limit while the trial measures
one window over the whole run, at the same time, on the same counters. Windows only remember
their start marks, so any number can overlap and reading costs two counter reads per GPU.

Why windows can pause: a profiling window that needs more time than an epoch has (the energy
counter of a real GPU only means something over about a second) must span epochs, and the
epoch-boundary work in between (eval, data reshuffling, worker start-up) must not leak into
it. `pause_window` banks what the window measured so far; `resume_window` starts a new
segment; `peek` and `end_window` report the sum of the segments.

Why a window can be marked: a driver outside the training process (zeus_kfp.train.progress) learns what an
interval of time held only at its end. When the line that ends it says an evaluation ran in it, the interval
is not training, and `pause_window(name, at_mark=True)` leaves it out: the window is paused as of its last
`mark`, the end of the last interval that was training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zeus_kfp.power.gpu import GPU


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

    @property
    def counter_stalled(self) -> bool:
        """Time passed but some GPU's energy did not move: the counter has not updated yet, the figure is void.

        A real GPU never draws zero power, so zero energy over a window of positive length means the
        energy counter (which advances in coarse steps, ~100 ms on an H200) did not tick inside it.
        """
        return self.time_s > 0 and any(e <= 0 for e in self.energy_j.values())


class EnergyMonitor:
    """Measures windows on `gpu` for the GPU indices given (all by default)."""

    def __init__(self, gpu: GPU, indices: Sequence[int] | None = None) -> None:
        self.gpu = gpu
        self.indices = list(range(gpu.device_count())) if indices is None else list(indices)
        self._open: dict[str, tuple[float, dict[int, float]]] = {}
        self._banked: dict[str, tuple[float, dict[int, float]]] = {}  # paused or resumed windows' earlier segments
        self._marked: dict[str, tuple[float, dict[int, float]]] = {}  # an open segment's last mark (`mark`)

    def _marks(self) -> tuple[float, dict[int, float]]:
        # The clock is read on both sides of the energy reads and averaged, so a thread stalled between
        # reads (a busy host) skews time and energy less.
        before = self.gpu.clock()
        energy = {i: self.gpu.energy_j(i) for i in self.indices}
        return 0.5 * (before + self.gpu.clock()), energy

    def begin_window(self, name: str) -> None:
        if name in self._open or name in self._banked:
            raise ValueError(f"window {name!r} is already open")
        self._open[name] = self._marks()

    def is_open(self, name: str) -> bool:
        """True while the window is running (not paused)."""
        return name in self._open

    def is_paused(self, name: str) -> bool:
        return name in self._banked and name not in self._open

    def elapsed_s(self, name: str) -> float:
        """Seconds the window has run so far (paused time excluded); reads only the clock, cheap enough per step."""
        if name not in self._open and name not in self._banked:
            raise KeyError(f"window {name!r} is not open")
        banked = self._banked.get(name, (0.0, {}))[0]
        if name in self._open:
            banked += max(0.0, self.gpu.clock() - self._open[name][0])
        return banked

    def peek(self, name: str) -> Measurement:
        """The window so far, leaving it open (the runner polls this to enforce the cost threshold)."""
        if name not in self._open and name not in self._banked:
            raise KeyError(f"window {name!r} is not open")
        time_s, energy = self._banked.get(name, (0.0, {i: 0.0 for i in self.indices}))
        energy = dict(energy)
        if name in self._open:
            t0, e0 = self._open[name]
            t1, e1 = self._marks()
            time_s += max(0.0, t1 - t0)
            for i in self.indices:
                energy[i] += max(0.0, e1[i] - e0[i])
        return Measurement(name=name, time_s=time_s, energy_j=energy, simulated=self.gpu.simulated)

    def mark(self, name: str) -> None:
        """Remember where the running window is now: `pause_window(at_mark=True)` may end its segment here."""
        if name not in self._open:
            raise KeyError(f"window {name!r} is not running")
        self._marked[name] = self._marks()

    def pause_window(self, name: str, at_mark: bool = False) -> None:
        """Stop the clock on a running window, keeping what it measured; `resume_window` continues it. With
        `at_mark`, what it measured after its segment's last `mark` is left out (none: the whole segment)."""
        if name not in self._open:
            raise KeyError(f"window {name!r} is not running")
        if at_mark:
            start = self._open[name]
            time_s, energy = self._banked.get(name, (0.0, {i: 0.0 for i in self.indices}))
            end = self._marked.get(name, start)
            energy = {i: energy[i] + max(0.0, end[1][i] - start[1][i]) for i in self.indices}
            banked = (time_s + max(0.0, end[0] - start[0]), energy)
        else:
            m = self.peek(name)
            banked = (m.time_s, m.energy_j)
        del self._open[name]
        self._marked.pop(name, None)
        self._banked[name] = banked

    def resume_window(self, name: str) -> None:
        if not self.is_paused(name):
            raise KeyError(f"window {name!r} is not paused")
        self._open[name] = self._marks()

    def end_window(self, name: str) -> Measurement:
        measurement = self.peek(name)
        self.cancel_window(name)
        return measurement

    def cancel_window(self, name: str) -> None:
        self._open.pop(name, None)
        self._banked.pop(name, None)
        self._marked.pop(name, None)
