"""How precisely a profiling window measures throughput, from the spread of its own stretches of time.

Why: windows on a real GPU are noisy. On the H200 (shared/traces/h200) two 3 s windows at the same limit
read throughputs about 2 % apart (one standard deviation), and 1 s windows 4-5 %, while the whole saving
to be found by the limit was 6 %: a profiler that ranks limits on single short windows ranks noise. So a
window stays open until its throughput is known to ProfileParams.rel_error.

How: each window is cut into bins of `bin_s` (a quarter of the meter's shortest window) and the bins'
throughputs, relative to their window's mean, give the spread of one bin. That spread is pooled over
every window of the profile so far (the noise is the GPU's and the job's, not the limit's), so even the
first short window is judged on more than its own three or four bins once a few windows have run; a
window's relative standard error is then the pooled spread * sqrt(bin_s / its length). Bins are treated as
independent: noise that drifts over many seconds is underestimated, which the window's upper bound
(ProfileParams.max_window_factor) and the comparison's margin (zeus_kfp.power.selection: two standard
errors of a difference) absorb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_DOF = 12  # below this many pooled degrees of freedom (three full windows of bins) the spread is not yet known


def bin_deviations(marks: list[tuple[float, int]], bin_s: float) -> np.ndarray:
    """The relative deviations of a window's whole bins' throughputs from their mean; `marks` are
    (seconds into the window, samples so far) at each step's end."""
    if not marks or bin_s <= 0:
        return np.zeros(0)
    times = np.array([0.0, *(t for t, _ in marks)])
    samples = np.array([0.0, *(s for _, s in marks)], dtype=float)
    count = int(times[-1] / bin_s)
    if count < 2:
        return np.zeros(0)
    edges = np.arange(count + 1) * bin_s
    rates = np.diff(np.interp(edges, times, samples)) / bin_s
    mean = rates.mean()
    return rates / mean - 1.0 if mean > 0 else np.zeros(0)


@dataclass
class WindowNoise:
    """The pooled spread of one bin's throughput over a profile's windows."""

    bin_s: float
    squares: float = 0.0
    dof: int = 0

    def add(self, marks: list[tuple[float, int]]) -> None:
        """A closed window's bins join the pool."""
        deviations = bin_deviations(marks, self.bin_s)
        if deviations.size >= 2:
            self.squares += float(np.sum(deviations**2))
            self.dof += deviations.size - 1

    def relative_error(self, marks: list[tuple[float, int]]) -> float | None:
        """The open window's relative standard error of throughput (None: not known yet)."""
        deviations = bin_deviations(marks, self.bin_s)
        squares = self.squares + float(np.sum(deviations**2))
        dof = self.dof + max(deviations.size - 1, 0)
        if dof < MIN_DOF or not marks or marks[-1][0] <= 0:
            return None
        return math.sqrt(squares / dof) * math.sqrt(self.bin_s / marks[-1][0])
