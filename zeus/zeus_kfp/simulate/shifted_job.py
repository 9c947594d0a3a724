"""A job whose costs shift at a known recurrence, and what a policy pays after the shift.

Why: a drift signal (the recurrence gate's) tells the bandit its old observations may be stale, and the job's
`drift_reaction` (zeus_kfp.policy.drift) decides what it does about it. Whether forgetting beats keeping
can only be measured on a job where the truth is known: here the costs shift at recurrence `shift_at`,
from one trace to another made from it, and the oracle after the shift is the new trace's.

The shifted trace is the same workload on the same GPU (a V100 or A40 trace, or a job generated from one
by zeus_kfp.simulate.perturb) with its cost minimum moved to another batch size that always reaches the target
(zeus_kfp.simulate.perturb.move_minimum): what a change in the data does to a job, its best size moving,
while its power limits and the choice among them stay (so a stored power profile stays valid).

The simulator then runs the job's trials of recurrence r on the shifted trace from `shift_at` on, and
passes the drift signal at `shift_at` (with signal) or nothing (without). A false alarm is the signal
with no shift (`shift=False`): what forgetting costs when nothing changed. Every figure is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zeus_kfp.cost import Figures
from zeus_kfp.job import JobSpec
from zeus_kfp.policy.base import Policy
from zeus_kfp.simulate.engine import SimulationResult, Simulator, expected_figures, oracle_batch_size, reaching_figures
from zeus_kfp.simulate.perturb import move_minimum, perturbed_job
from zeus_kfp.simulate.trace import SizeTrace, WorkloadTrace
from zeus_kfp.simulate.workload_runs import build_simulator


class ShiftedSimulator(Simulator):
    """A Simulator whose recurrences from `shift_at` on train on `after` instead of the job's trace."""

    def __init__(self, spec: JobSpec, before: WorkloadTrace, after: WorkloadTrace, shift_at: int, source: str):
        super().__init__(spec, before, source)
        self.after = after
        self.shift_at = shift_at
        self.after_oracle = expected_figures(spec, after)[1]

    def trace_for(self, recurrence: int) -> WorkloadTrace:
        return self.after if recurrence >= self.shift_at else self.trace


@dataclass(frozen=True)
class DriftJob:
    """A job, its trace before and after the shift, where the shift happens and how long the job runs."""

    name: str
    spec: JobSpec
    before: WorkloadTrace
    after: WorkloadTrace
    shift_at: int
    num_recurrences: int
    source: str

    def simulator(self, reaction: str | None = None) -> ShiftedSimulator:
        """Its simulator; with `reaction`, the job's drift_reaction set to it."""
        spec = self.spec if reaction is None else self.spec.with_changes(drift_reaction=reaction)
        return ShiftedSimulator(spec, self.before, self.after, self.shift_at, self.source)

    def false_alarm(self) -> DriftJob:
        """The same job with no shift: the signal comes at `shift_at` but the costs stay."""
        return DriftJob(self.name + " (no shift)", self.spec, self.before, self.before, self.shift_at,
                        self.num_recurrences, self.source)  # fmt: skip


def shifted(
    spec: JobSpec, trace: WorkloadTrace, rng: np.random.Generator, *, level: bool = True
) -> WorkloadTrace | None:
    """`trace` with its cost minimum moved to another size that always reaches the target (drawn from `rng`),
    at the same level: every size's per-epoch time and energy scaled by one factor so the oracle costs what
    it did before. None when no other size always reaches the target.

    Why the same level: the question is whether the bandit finds the new best size. Moved alone, the new
    minimum costs what `to` cost before, above the old minimum, and the early stop a policy keeps (beta x
    the old cheapest recurrence) then cuts every trial short; that is a second effect, measured apart
    (`level=False`: the moved curve as move_minimum leaves it)."""
    best = oracle_batch_size(spec, trace)
    others = [b for b in reaching_figures(spec, trace) if b != best]
    if not others:
        return None
    moved = move_minimum(spec, trace, others[int(rng.integers(len(others)))])
    if not level:
        return moved
    return scaled(moved, expected_figures(spec, trace)[1].cost / expected_figures(spec, moved)[1].cost)


def scaled(trace: WorkloadTrace, factor: float) -> WorkloadTrace:
    """`trace` with every per-epoch time and energy times `factor` (costs scale with it; the cheapest power
    limit of each size stays, the epochs and misses stay)."""
    sizes = {
        b: SizeTrace(b, s.target_epochs, s.power_limits, s.time_per_epoch * factor, s.energy_per_epoch * factor)
        for b, s in trace.sizes.items()
    }
    return WorkloadTrace(sizes, trace.power_limits, trace.max_power_w)


def _job(
    name: str, spec: JobSpec, before: WorkloadTrace, rng: np.random.Generator, source: str, level: bool
) -> DriftJob | None:
    after = shifted(spec, before, rng, level=level)
    if after is None:
        return None
    n = Simulator(spec, before).default_num_recurrences()  # Zeus's 2 x |sizes| x |limits|
    return DriftJob(name, spec, before, after, n // 2 + 1, n, source)


def drift_cell(workload: str, gpu: str, eta: float, seed: int, *, level: bool = True) -> DriftJob | None:
    """A measured cell (a V100 or A40 trace) whose minimum moves, halfway through Zeus's number of
    recurrences, to a size drawn from `seed` (`level`: see `shifted`); None when only one size always
    reaches the target."""
    sim = build_simulator(workload, power_trace=gpu, eta=eta)
    rng = np.random.default_rng([seed, 24])
    source = f"simulated (drift: {workload}/{gpu})"
    return _job(f"{workload}/{gpu} eta {eta}", sim.spec, sim.trace, rng, source, level)


def drift_job(seed: int, index: int, *, level: bool = True) -> DriftJob | None:
    """Job `index` generated from `seed` (zeus_kfp.simulate.perturb, kind "measured": its minimum where the
    perturbation left it), whose minimum then moves halfway through; None as for `drift_cell`."""
    job = perturbed_job(seed, index, kind="measured")
    rng = np.random.default_rng([seed, index, 24])
    source = f"simulated (drift: perturbed job {index} from {job.workload}/{job.gpu})"
    return _job(job.name, job.spec, job.trace, rng, source, level)


@dataclass(frozen=True)
class AfterShift:
    """A simulation's recurrences from the shift on, against the oracle after the shift."""

    num_recurrences: int
    cost: float  # what the policy spent on them
    oracle: Figures  # the post-shift oracle's expected figures for one recurrence

    @property
    def regret(self) -> float:
        """Their cost minus as many post-shift oracle recurrences, in post-shift oracle recurrences."""
        return self.cost / self.oracle.cost - self.num_recurrences


def after_shift(result: SimulationResult, sim: ShiftedSimulator) -> AfterShift:
    rows = [row for row in result.rows if row.recurrence >= sim.shift_at]
    return AfterShift(len(rows), float(sum(row.cost for row in rows)), sim.after_oracle)


def run_drift(job: DriftJob, policy: Policy, seed: int, *, signal: bool, reaction: str) -> AfterShift:
    """The job under `policy` (seed `seed`), told of the drift at `shift_at` when `signal`, reacting with
    `reaction` (the job's drift_reaction); its figures after the shift."""
    sim = job.simulator(reaction)
    drifts = (job.shift_at,) if signal else ()
    return after_shift(sim.run(policy, seed, job.num_recurrences, drifts=drifts), sim)
