"""A trace-backed trial: one trial of an NSDI'23 workload, replayed from the measured traces.

This is the one place a trace-backed trial's outcome is decided. The simulator (zeus_kfp.simulate.engine)
calls it for every trial it simulates, and the pipeline's train step calls it when a job selects the
trial backend "trace:<workload>/<gpu>", so `zeus-kfp run` and `zeus-kfp simulate` agree trial for trial.

Rules (after ml-energy/zeus `_legacy/simulate.py`):
- the trial samples one training run of the train trace at its batch size with its own RNG
  (zeus_kfp.seeds.trial_seed): the epoch at which that run first reached the target, or never;
- power: a trial with no stored profile to reuse (zeus_kfp.power.reuse) profiles its first epoch at every
  power limit of the trace (that epoch costs the mean over the limits) and trains the rest at the limit
  `choose_limit` picks from that profile; a trial that reuses a stored profile trains every epoch at
  that profile's choice. The profile rows are the trace's (throughput in epochs per second);
- epochs are capped at min(max_epochs, floor(threshold / epoch cost)), at least one (a trial always
  runs its first epoch, as ZeusDataLoader does); a trial capped before its run reaches the target has
  not reached: cost_exceeded when the threshold set the cap, not_reached when max_epochs did;
- with `threshold_at` (the simulator's overlapping recurrences) the threshold is read again at every
  epoch end, `threshold_at(seconds into the trial)`, as a live trial reads the job's early stop then
  (zeus_kfp.steps.threshold_feed): the trial stops at the first epoch end at which it has run its cap under
  the threshold of that moment, or reached. A constant `threshold_at` gives the same trial as
  `cost_threshold` alone.

Every figure is simulated and labelled `simulated (trace: <workload>/<gpu>)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec, TrialOutcome, TrialResult, TrialStatus
from zeus_kfp.power.selection import choose_limit
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES, SizeTrace, WorkloadTrace
from zeus_kfp.simulate.workloads import WORKLOADS, get_workload, load_shipped

SCRIPT_BACKEND = "script"
TRACE_PREFIX = "trace:"
TRIAL_BACKENDS_ALLOWED = (
    f"'{SCRIPT_BACKEND}' (run the training command) or '{TRACE_PREFIX}<workload>/<gpu>' with a workload of "
    f"{', '.join(WORKLOADS)} and a gpu of {', '.join(SHIPPED_POWER_TRACES)}"
)


class TrialBackendError(FieldError):
    """An unknown trial backend; names the `trial_backend` setting and what is allowed."""

    def __init__(self, value: object) -> None:
        super().__init__("trial_backend", value, TRIAL_BACKENDS_ALLOWED)


@dataclass(frozen=True)
class TraceBackend:
    """The trial backend "trace:<workload>/<gpu>": trials replayed from a shipped NSDI'23 trace."""

    workload: str
    gpu: str

    @classmethod
    def parse(cls, text: str) -> TraceBackend | None:
        """None for the script backend; a TraceBackend for "trace:<workload>/<gpu>"; TrialBackendError else."""
        if text == SCRIPT_BACKEND:
            return None
        if not isinstance(text, str) or not text.startswith(TRACE_PREFIX):
            raise TrialBackendError(text)
        workload, _, gpu = text[len(TRACE_PREFIX) :].partition("/")
        if workload not in WORKLOADS or gpu not in SHIPPED_POWER_TRACES:
            raise TrialBackendError(text)
        return cls(workload, gpu)

    @property
    def name(self) -> str:
        return f"{TRACE_PREFIX}{self.workload}/{self.gpu}"

    @property
    def source(self) -> str:
        return f"simulated (trace: {self.workload}/{self.gpu})"

    def trace(self) -> WorkloadTrace:
        return _load(self.workload, self.gpu)

    def spec(self, job_id: str, **changes: object) -> JobSpec:
        """The job Zeus simulated on this trace (its settings; shared/traces/README.md), with `changes`."""
        return get_workload(self.workload).spec(self.trace()).with_changes(job_id=job_id, **changes)

    def run(
        self,
        spec: JobSpec,
        *,
        batch_size: int,
        cost_threshold: float | None,
        seed: int | None,
        reuse: PowerProfile | None,
        work_dir: Path | None = None,
    ) -> TrialOutcome:
        """One replayed trial: a zeus_kfp.launch.trial_runner.TrialRunner, like the script and cluster runners (a replay
        writes nothing, so `work_dir` goes unused)."""
        trace = self.trace()
        if batch_size not in trace.sizes:
            raise FieldError("batch_size", batch_size, f"one of the trace's batch sizes {list(trace.batch_sizes)}")
        return run_trace_trial(
            spec, trace.sizes[batch_size], cost_threshold=cost_threshold, seed=seed, reuse=reuse, source=self.source
        )


@lru_cache(maxsize=16)
def _load(workload: str, gpu: str) -> WorkloadTrace:
    return load_shipped(workload, gpu)


@lru_cache(maxsize=256)
def trace_profile(size: SizeTrace) -> PowerProfile:
    """The profile a trial measures at this batch size: one training row per power limit of the trace.
    Cached per batch size (the simulator asks for it on every trial); callers never modify it."""
    rows = [
        {
            "phase": "train",
            "power_limit_w": float(limit),
            "average_power_w": float(energy / time),
            "throughput": float(1.0 / time),
            "simulated": True,
        }
        for limit, energy, time in zip(size.power_limits, size.energy_per_epoch, size.time_per_epoch, strict=True)
    ]
    return PowerProfile.of(rows[::-1])  # from the maximum down, the order the JIT profiler walks


def run_trace_trial(
    spec: JobSpec,
    size: SizeTrace,
    *,
    cost_threshold: float | None,
    seed: int,
    reuse: PowerProfile | None,
    source: str,
    threshold_at: Callable[[float], float | None] | None = None,
) -> TrialOutcome:
    """One trial of `size` under the rules in the module docstring."""
    measured = reuse is None
    profile = trace_profile(size) if measured else reuse
    limit = choose_limit(profile, spec.cost_model.rate)
    k = int(np.flatnonzero(size.power_limits == limit)[0])
    energy, time = float(size.energy_per_epoch[k]), float(size.time_per_epoch[k])
    epoch_cost = spec.cost_model.cost(energy, time)
    runs = size.target_epochs
    target = runs[int(np.random.default_rng(seed).integers(len(runs)))]

    def cap_of(threshold: float | None) -> int:
        if threshold is None:
            return spec.max_epochs
        return max(1, min(spec.max_epochs, math.floor(threshold / epoch_cost)))

    def elapsed(epochs: int) -> float:  # seconds into the trial at the end of epoch `epochs`
        if measured:  # the first epoch ran at every limit in turn
            return float(size.time_per_epoch.mean()) + time * (epochs - 1)
        return time * epochs

    if threshold_at is None:
        cap = cap_of(cost_threshold)
        reached = not math.isnan(target) and target <= cap
        epochs = int(target) if reached else cap
    else:
        epochs, cap = _live_stop(cap_of, threshold_at, elapsed, target)
        reached = not math.isnan(target) and target <= epochs
    if reached:
        status, reason = TrialStatus.REACHED, ""
    elif cap == spec.max_epochs:
        status, reason = TrialStatus.NOT_REACHED, f"target not reached in {spec.max_epochs} epochs"
    else:
        status, reason = TrialStatus.COST_EXCEEDED, f"stopped after {epochs} epochs: the next would pass the threshold"
    # profiled: the first epoch ran at every limit in turn (the same sums as `elapsed`'s)
    total_energy = float(size.energy_per_epoch.mean()) + energy * (epochs - 1) if measured else energy * epochs
    result = TrialResult.build(
        spec,
        batch_size=size.batch_size,
        status=status,
        time_s=elapsed(epochs),
        energy_j=total_energy,
        num_epochs=epochs,
        power_limit_w=limit,
        simulated=True,
        reason=reason,
        source=source,
    )
    return TrialOutcome(result, profile if measured else None)


def _live_stop(
    cap_of: Callable[[float | None], int],
    threshold_at: Callable[[float], float | None],
    elapsed: Callable[[int], float],
    target: float,
) -> tuple[int, int]:
    """(epochs run, the cap at the last epoch end) when the threshold is read at every epoch end: the first
    epoch end that meets the target, or at which the trial has run the cap of the threshold then. The cap
    never exceeds max_epochs, so the walk ends there at the latest."""
    epochs = 1
    while True:
        cap = cap_of(threshold_at(elapsed(epochs)))
        if epochs >= cap or (not math.isnan(target) and target <= epochs):
            return epochs, cap
        epochs += 1
