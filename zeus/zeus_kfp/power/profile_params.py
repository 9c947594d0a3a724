"""What the JIT profiler (zeus_kfp.power.profiler) is told: iterations per limit, the limit step, the shortest
measurement window, and the limits a GPU offers to try."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

from zeus_kfp.power.gpu import GPU
from zeus_kfp.power.search import SEARCHES

log = logging.getLogger("zeus_kfp.power.profiler")  # what it says is about profiling: the profiler's log

MIN_WINDOW_ALLOWED = "a number of seconds >= 0, or unset (None) for the GPU backend's default"


def valid_min_window_s(value: object) -> bool:
    """None (the backend's default) or a finite number of seconds >= 0."""
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


@dataclass(frozen=True)
class ProfileParams:
    """Iterations per limit (Zeus defaults 10 warm-up + 40 profiled), the limit step in watts, the shortest
    window in seconds (None: the GPU backend's `min_window_s`), the search over the limits
    (zeus_kfp.power.search: "descend", or Zeus's "sweep" of every limit; None: "descend" on a real meter,
    and Zeus's sweep on an exact one, the simulated V100 model, where a
    window costs nothing and the sweep is the exact reference Zeus's own simulator follows; the GPU's `meter`
    says which it has), and how precisely a window measures.

    `rel_error`: a window stays open until the relative standard error of its throughput is at most this
    (zeus_kfp.power.precision), or for `max_window_factor` times its shortest length; two limits are called
    different only when their costs are more than two standard errors of a difference apart
    (2 * sqrt(2) * rel_error). Why 0.01 and 4: on the H200 the limits near the optimum differ by 2-4 % in
    cost (shared/traces/h200), so a window must read to about 1 % to rank them; a 3 s window reads to
    about 2 %, so the bound is reached only on quiet GPUs, and the window stops at 4 s (4 x NVML's 1 s), which
    keeps a whole search (6-9 windows) within two trials of the lengths measured (6-20 s). On the fitted
    H200 model (benchmarks/power_replay.py) lower bounds or longer windows spread profiling over more
    trials without picking better. 0: Zeus's exact rule (one window of `profile_iters`, the exact minimum)."""

    warmup_iters: int = 10
    profile_iters: int = 40
    step_w: float = 25.0
    min_window_s: float | None = None
    search: str | None = None
    rel_error: float = 0.01
    max_window_factor: float = 4.0

    def __post_init__(self) -> None:
        if not (isinstance(self.warmup_iters, int) and self.warmup_iters >= 0):
            raise ValueError(f"invalid warmup_iters={self.warmup_iters!r}: allowed an integer >= 0")
        if not (isinstance(self.profile_iters, int) and self.profile_iters >= 1):
            raise ValueError(f"invalid profile_iters={self.profile_iters!r}: allowed an integer >= 1")
        if not (self.step_w > 0 and math.isfinite(self.step_w)):
            raise ValueError(f"invalid step_w={self.step_w!r}: allowed a positive number of watts")
        if not valid_min_window_s(self.min_window_s):
            raise ValueError(f"invalid min_window_s={self.min_window_s!r}: allowed {MIN_WINDOW_ALLOWED}")
        if self.search is not None and self.search not in SEARCHES:
            raise ValueError(f"invalid search={self.search!r}: allowed {', '.join(SEARCHES)}")
        if not (0 <= self.rel_error < 1):
            raise ValueError(f"invalid rel_error={self.rel_error!r}: allowed a fraction >= 0 and < 1")
        if not (self.max_window_factor >= 1 and math.isfinite(self.max_window_factor)):
            raise ValueError(f"invalid max_window_factor={self.max_window_factor!r}: allowed a number >= 1")

    @classmethod
    def zeus(cls, warmup_iters: int = 10, profile_iters: int = 40, **changes: object) -> ProfileParams:
        """Zeus's exact rules: every limit from the maximum down, one window of `profile_iters` steps each, the
        exact minimum (the fidelity check and the tests of the state machine's mechanics)."""
        return cls(warmup_iters, profile_iters, search="sweep", rel_error=0.0, **changes)  # type: ignore[arg-type]

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
            steps_per_epoch, self.warmup_iters, self.profile_iters, warmup, profile,
        )  # fmt: skip
        return dataclasses.replace(self, warmup_iters=warmup, profile_iters=profile)


def candidate_limits(gpu: GPU, step_w: float = 25.0, cap: float | None = None) -> list[float]:
    """Limits from the maximum (or `cap`, an administrator's, where lower) down in `step_w` steps, within every
    device's constraints."""
    cons = [gpu.constraints(i) for i in range(gpu.device_count())]
    hi, lo = min(c.max_w for c in cons), max(c.min_w for c in cons)
    if cap is not None:
        hi = max(lo, min(hi, cap))
    limits, p = [], hi
    while p >= lo - 1e-9:
        limits.append(round(p, 3))
        p -= step_w
    return limits
