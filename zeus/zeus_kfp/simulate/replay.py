"""A trace-backed job's store history next to the simulator's run of the same job: one truth, checked.

A job whose trials ran on the trace backend ("trace:<workload>/<gpu>") went through the same policy,
seeds, profile-reuse rule and trial code as the simulator (zeus_kfp.simulate.engine). So the simulator,
given the job's spec, policy and seed, must produce the very same trials, recurrence for recurrence;
`compare` runs it and says whether it did, and where the two first part (a job that mixed policies, or
whose recurrences overlapped, parts ways there). `zeus-kfp run` prints this after every run, and
tests/simulate/test_equivalence.py asserts it through kfp.local.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import pandas as pd

from zeus_kfp.cost import Figures
from zeus_kfp.job import JobSpec
from zeus_kfp.policy import get_policy
from zeus_kfp.simulate.engine import SimulationResult, Simulator
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.trials import Trial, trial_columns, trials_of

# What must agree for every trial; cost to the last bit (the same floats in the same order).
TRIAL_FIELDS = trial_columns("recurrence", "attempt", "batch_size", "power_limit_w", "status", "cost")


@dataclass(frozen=True)
class Comparison:
    """The live job against the simulator: cumulative figures of both, the references, and agreement."""

    num_recurrences: int
    live: Figures
    simulated: Figures
    default: Figures  # the default config (b0 at max power), expected, x num_recurrences
    oracle: Figures  # the cheapest always-reaching config, expected, x num_recurrences
    identical: bool
    first_difference: str  # "" when identical
    simulation: SimulationResult


def compared(trial: Trial) -> tuple:
    """The fields of a trial that must agree, as one tuple (what a disagreement prints)."""
    values = (getattr(trial, name) for name in TRIAL_FIELDS)
    return tuple(value.value if isinstance(value, Enum) else value for value in values)


def live_rows(trials: pd.DataFrame) -> list[tuple]:
    """The store's finished trials (a trials frame) as TRIAL_FIELDS tuples, in trial order."""
    return [compared(trial) for trial in _finished(trials)]


def _finished(trials: pd.DataFrame) -> list[Trial]:
    return trials_of(trials[trials["finished"]].sort_values("trial"))


def simulated_rows(result: SimulationResult) -> list[tuple]:
    return [compared(trial) for trial in result.trials]


def compare(
    trials: pd.DataFrame, spec: JobSpec, backend: TraceBackend, policy: str, drifts: tuple[int, ...] = ()
) -> Comparison:
    """Simulate as many recurrences as the store holds for `spec` (seed spec.seed), told of the same drifts
    (the recurrences drift opened), and compare trial by trial."""
    done = _finished(trials)
    live = [compared(trial) for trial in done]
    n = max((row[0] for row in live), default=0)
    if n == 0:
        raise ValueError(f"job {spec.job_id!r} has no finished trial to compare with the simulator yet")
    result = Simulator(spec, backend.trace(), backend.source).run(get_policy(policy), spec.seed, n, drifts=drifts)
    simulated = simulated_rows(result)
    first = next((i for i, (a, b) in enumerate(zip(live, simulated, strict=False)) if a != b), None)
    if first is None and len(live) != len(simulated):
        first = min(len(live), len(simulated))
    why = ""
    if first is not None:
        got = live[first] if first < len(live) else "no trial"
        expected = simulated[first] if first < len(simulated) else "no trial"
        why = f"trial {first + 1}: the store has {got}, the simulator {expected} (fields {', '.join(TRIAL_FIELDS)})"
    return Comparison(
        num_recurrences=n,
        live=Figures.of(done),
        simulated=result.totals,
        default=result.default,
        oracle=result.oracle,
        identical=first is None,
        first_difference=why,
        simulation=result,
    )
