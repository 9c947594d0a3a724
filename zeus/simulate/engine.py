"""Trace-driven simulation of a recurring job under a batch-size policy, with Zeus's rules.

The rules are those of ml-energy/zeus `zeus/_legacy/simulate.py` (`simulate_one_job`,
`_run_job`, `_profile_power_limit`), re-implemented so that any policy of ours runs through
them — the same `decide` and the same cost function the live pipeline uses:

- a trial samples one training path (a run of the train trace at its batch size) with the
  job's RNG, exactly as Zeus's `DataFrame.sample(n=1, random_state=rng)` does;
- the first trial of a batch size never dispatched before profiles power limits just in time:
  its first epoch costs the mean over all power limits; every other epoch runs at the limit that
  minimizes that size's epoch cost (what the profiler picks; ties go to the higher limit);
- epochs are capped at min(max_epochs, floor(threshold / cost per epoch)); a trial that hits
  the cap before its path reaches the target has not reached (cost_exceeded when the threshold
  set the cap, not_reached when max_epochs did);
- a recurrence ends at its first reached trial, or after `spec.max_attempts` tries (Zeus: 20);
- the threshold is the policy's `Decision.cost_threshold` (beta x lowest recurrence spend).

ZERO-EPOCH QUIRK (kept for fidelity, and applied to every policy alike): when the cap is 0
epochs the trial never runs. Zeus still reports it to the policy — as not reached, with cost
100 x threshold — but leaves it out of the cumulative figures, and the profiling it triggered
is never paid for. Here it enters the history as cost_exceeded with that cost and zero energy
and time, and counts as a try.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from zeus.job import JobSpec, TrialRecord, TrialStatus
from zeus.policy.base import Policy
from zeus.simulate.trace import SizeTrace, WorkloadTrace

QUIRK_PENALTY = 100.0  # Zeus reports a never-run trial as costing 100 x the threshold


@dataclass(frozen=True)
class Figures:
    """Cumulative (or per-recurrence expected) cost, energy and time."""

    cost: float
    energy_j: float
    time_s: float

    def times(self, n: int) -> Figures:
        return Figures(self.cost * n, self.energy_j * n, self.time_s * n)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class _SizeModel:
    """What a batch size costs per epoch: steady state at the profiler's pick, and the profiling epoch."""

    trace: SizeTrace
    power_limit: float
    energy: float
    time: float
    cost: float
    profile_energy: float
    profile_time: float


def size_model(spec: JobSpec, trace: SizeTrace) -> _SizeModel:
    """Pick the power limit the JIT profiler would (argmin epoch cost; ties to the higher limit)."""
    epoch_costs = spec.cost(trace.energy_per_epoch, trace.time_per_epoch)
    k = len(epoch_costs) - 1 - int(np.argmin(epoch_costs[::-1]))
    return _SizeModel(
        trace=trace,
        power_limit=float(trace.power_limits[k]),
        energy=float(trace.energy_per_epoch[k]),
        time=float(trace.time_per_epoch[k]),
        cost=float(epoch_costs[k]),
        profile_energy=float(trace.energy_per_epoch.mean()),
        profile_time=float(trace.time_per_epoch.mean()),
    )


@dataclass(frozen=True)
class RecurrenceRow:
    """One recurrence of a simulation: what was tried, what it cost, and whether it reached."""

    recurrence: int
    reached: bool
    num_trials: int  # tries, including never-run (0-epoch) ones
    batch_sizes: list[int]
    power_limits: list[float]
    stages: list[str]
    threshold: float | None
    cost: float
    energy_j: float
    time_s: float


@dataclass(frozen=True)
class SimulationResult:
    """A simulated job under one policy and seed, with its reference figures."""

    policy: str
    seed: int
    num_recurrences: int
    totals: Figures  # the policy, cumulative over counted trials
    default: Figures  # b0 at the largest power limit, expected, x num_recurrences
    oracle: Figures  # cheapest expected always-reaching config, x num_recurrences
    rows: list[RecurrenceRow]
    history: list[TrialRecord]

    @property
    def cost_over_oracle(self) -> float:
        return self.totals.cost / self.oracle.cost

    def regret(self) -> float:
        """Cumulative cost minus the oracle's, in oracle recurrences."""
        return (self.totals.cost - self.oracle.cost) / (self.oracle.cost / self.num_recurrences)

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "num_recurrences": self.num_recurrences,
            "policy": self.totals.to_dict(),
            "default": self.default.to_dict(),
            "oracle": self.oracle.to_dict(),
            "cost_over_oracle": self.cost_over_oracle,
            "recurrences": [asdict(r) for r in self.rows],
        }


def expected_figures(spec: JobSpec, trace: WorkloadTrace) -> tuple[Figures, Figures]:
    """Per-recurrence expected figures of (default config, oracle), over the trace's runs.

    Default config: b0 at the largest power limit. Oracle: the cheapest (batch size, power
    limit) among sizes whose every run reaches the target within max_epochs.
    """
    best: Figures | None = None
    for size in trace.sizes.values():
        epochs = size.target_epochs
        if np.isnan(epochs).any() or (epochs > spec.max_epochs).any():
            continue
        mean_epochs = float(epochs.mean())
        energy, time = mean_epochs * size.energy_per_epoch, mean_epochs * size.time_per_epoch
        costs = spec.cost(energy, time)
        k = int(np.argmin(costs))
        if best is None or costs[k] < best.cost:
            best = Figures(float(costs[k]), float(energy[k]), float(time[k]))
    if best is None:
        raise ValueError(f"no batch size of job {spec.job_id} reaches the target in every run of the trace")
    b0 = trace.sizes[spec.default_batch_size]
    reached = b0.target_epochs[~np.isnan(b0.target_epochs)]
    mean_epochs = float(reached.mean()) if reached.size else float(spec.max_epochs)
    energy, time = mean_epochs * b0.energy_per_epoch[-1], mean_epochs * b0.time_per_epoch[-1]
    return Figures(spec.cost(energy, time), float(energy), float(time)), best


class Simulator:
    """Replays one workload trace for one job spec; `run` simulates a policy over recurrences."""

    def __init__(self, spec: JobSpec, trace: WorkloadTrace) -> None:
        missing = sorted(set(spec.batch_sizes) - set(trace.sizes))
        if missing:
            raise ValueError(
                f"invalid batch_sizes: {missing} not in the trace; allowed a subset of {list(trace.batch_sizes)}"
            )
        self.spec = spec
        self.trace = trace
        self.models = {b: size_model(spec, trace.sizes[b]) for b in spec.batch_sizes}
        self.default, self.oracle = expected_figures(spec, trace)

    def default_num_recurrences(self) -> int:
        """Zeus's choice: 2 x |batch sizes| x |power limits|."""
        return 2 * len(self.spec.batch_sizes) * len(self.trace.power_limits)

    def _trial(
        self, batch_size: int, threshold: float | None, rng: np.random.Generator, profile: bool
    ) -> tuple[TrialStatus, int, float, float]:
        """(status, epochs, energy, time) of one trial; epochs 0 is the never-run quirk."""
        spec, model = self.spec, self.models[batch_size]
        runs = model.trace.target_epochs
        target = runs[int(rng.choice(len(runs), size=1, replace=False)[0])]
        cap = spec.max_epochs if threshold is None else min(spec.max_epochs, math.floor(threshold / model.cost))
        if cap <= 0:
            return TrialStatus.COST_EXCEEDED, 0, 0.0, 0.0
        reached = not math.isnan(target) and target <= cap
        epochs = int(target) if reached else cap
        if reached:
            status = TrialStatus.REACHED
        else:
            status = TrialStatus.NOT_REACHED if cap == spec.max_epochs else TrialStatus.COST_EXCEEDED
        if profile:
            energy = model.profile_energy + model.energy * (epochs - 1)
            time = model.profile_time + model.time * (epochs - 1)
        else:
            energy, time = model.energy * epochs, model.time * epochs
        return status, epochs, energy, time

    def run(self, policy: Policy, seed: int, num_recurrences: int | None = None) -> SimulationResult:
        """Simulate `num_recurrences` sequential recurrences (default: Zeus's 2 x |sizes| x |limits|)."""
        spec = self.spec
        n = self.default_num_recurrences() if num_recurrences is None else num_recurrences
        if not (isinstance(n, int) and n > 0):
            raise ValueError(f"invalid num_recurrences={n!r}: allowed a positive integer")
        rng = np.random.default_rng(seed)
        history: list[TrialRecord] = []
        profiled: set[int] = set()
        rows: list[RecurrenceRow] = []
        total_cost = total_energy = total_time = 0.0
        for rec in range(n):
            sizes, limits, stages = [], [], []
            cost = energy = time = 0.0
            reached, threshold = False, None
            for attempt in range(spec.max_attempts):
                decision = policy.decide(spec, history, seed)
                b = decision.batch_size
                if attempt == 0:
                    threshold = decision.cost_threshold
                profile = b not in profiled
                profiled.add(b)
                status, epochs, e, t = self._trial(b, decision.cost_threshold, rng, profile)
                sizes.append(b)
                stages.append(decision.stage)
                limits.append(self.models[b].power_limit)
                if epochs == 0:  # the zero-epoch quirk: reported to the policy, not counted
                    quirk_cost = QUIRK_PENALTY * decision.cost_threshold
                    history.append(TrialRecord(rec, len(history), b, status, quirk_cost, 0.0, 0.0))
                    continue
                c = spec.cost(e, t)
                history.append(TrialRecord(rec, len(history), b, status, c, t, e))
                cost, energy, time = cost + c, energy + e, time + t
                if status is TrialStatus.REACHED:
                    reached = True
                    break
            total_cost, total_energy, total_time = total_cost + cost, total_energy + energy, total_time + time
            rows.append(RecurrenceRow(rec, reached, len(sizes), sizes, limits, stages, threshold, cost, energy, time))
        return SimulationResult(
            policy=policy.name,
            seed=seed,
            num_recurrences=n,
            totals=Figures(total_cost, total_energy, total_time),
            default=self.default.times(n),
            oracle=self.oracle.times(n),
            rows=rows,
            history=history,
        )
