"""The recurrence gate and the job's cap in the simulator, in their simple form: runs arrive on a period,
and a run opens a recurrence only when a slot is free.

Why: the recurrence gate opens a recurrence when the job's period has elapsed and the job has fewer than its
cap K of recurrences running; otherwise the run ends at once and trains nothing (skipped: no free slot).
A schedule that runs more often than a recurrence lasts then skips runs instead of piling up training
jobs. Here a run arrives every `period_s` simulated seconds (the trials' own seconds, the simulator's
clock), from time 0; it opens a recurrence when fewer than `cap` are running, and is counted as skipped
otherwise. A trial that finishes at the very time a run arrives frees its slot first.

Recurrences are numbered as they open (a skipped run is no recurrence), and decisions do not read the
clock, so with cap 1 the opened recurrences are trial for trial those of a sequential `Simulator.run`
with as many recurrences (tests/simulate/test_gate.py). Every figure is simulated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zeus_kfp.policy.base import Policy
from zeus_kfp.simulate.engine import SimulationResult, Simulator, _Run


@dataclass(frozen=True)
class GatedResult:
    """A gated simulation: the runs that arrived, those skipped for want of a slot, and the recurrences
    that opened (`result`, whose regret is over them)."""

    arrivals: int
    skipped: int
    result: SimulationResult

    @property
    def opened(self) -> int:
        return self.arrivals - self.skipped


class _GatedRun(_Run):
    """The engine's run with recurrences started by arrivals on a period instead of as slots free up."""

    def __init__(self, sim: Simulator, policy: Policy, seed: int, arrivals: int, period_s: float, cap: int,
                 drifts: tuple[int, ...]) -> None:  # fmt: skip
        super().__init__(sim, policy, sim.spec.with_changes(seed=seed), arrivals, cap, drifts)
        self.arrivals, self.period_s = arrivals, period_s
        self.arrived = self.skipped = 0

    def simulate(self) -> SimulationResult:
        while self.arrived < self.arrivals or self.pending:
            arrival = self.arrived * self.period_s if self.arrived < self.arrivals else math.inf
            if self.pending and self.pending[0][0] <= arrival:
                self._step()
                continue
            self.now, self.arrived = arrival, self.arrived + 1
            if self.started - len(self.done) < self.in_flight:
                self._start_recurrence()
            else:
                self.skipped += 1
        self.n = self.started  # the figures are over the recurrences that opened
        return self._result()

    def _slot_freed(self) -> None:
        """A freed slot waits for the next arrival."""


def simulate_gated(
    sim: Simulator,
    policy: Policy,
    seed: int,
    *,
    arrivals: int,
    period_s: float,
    cap: int = 1,
    drifts: tuple[int, ...] = (),
) -> GatedResult:
    """`arrivals` runs every `period_s` simulated seconds, each opening a recurrence of `sim`'s job under
    `policy` (seed `seed`) when fewer than `cap` are running (the drift recurrences, numbered as opened,
    as in `Simulator.run`)."""
    for name, value in (("arrivals", arrivals), ("cap", cap)):
        if not (isinstance(value, int) and value > 0):
            raise ValueError(f"invalid {name}={value!r}: allowed a positive integer")
    if not (isinstance(period_s, (int, float)) and math.isfinite(period_s) and period_s > 0):
        raise ValueError(f"invalid period_s={period_s!r}: allowed a positive number of seconds")
    run = _GatedRun(sim, policy, seed, arrivals, float(period_s), cap, tuple(drifts))
    result = run.simulate()
    return GatedResult(arrivals, run.skipped, result)
