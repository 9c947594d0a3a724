"""What a drift does to the history a policy decides from: the job's `drift_reaction`.

Why: a recurrence opened because the input data drifted (the recurrence gate, zeus_kfp.steps.gate) says the
costs the bandit learned before it may no longer hold. A policy is a pure function of (spec, history, seed), so the
reaction is too, and it sits in front of any policy: it changes what the policy is shown, never the
policy. Three reactions (zeus_kfp.job.DRIFT_REACTIONS):

- `window`: forget every trial of a recurrence before the last drift. The policy starts afresh from
  the job's default size, as a new job would (its early stop too: no recurrence has a cost yet).
- `reexplore`: the same fresh window, but the walk restarts from the size that was cheapest before the
  drift (the lowest mean charged cost among sizes that reached the target) instead of the default: the
  old history is kept as a prior on where the minimum is, and exploration starts again around it.
- `none`: nothing; the policy goes on deciding from every trial.

Kept in every reaction: trials that ran out of memory (memory depends on the model and the batch
size, not on the data, so an oom still rules its size out). Dropped with the old recurrences: their
in-flight trials too (they train on the old data, and their results would be stale when they come).

A drift at recurrence d counts for a decision of recurrence r when d <= r; the latest such d opens the
window. The simulator calls the same `decide_after_drift` as the bandit step, so `zeus-kfp simulate`
measures the reaction users get (benchmarks/drift.py; RESULTS.md, "Drift").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from zeus_kfp.job import DRIFT_REACTIONS, JobSpec, TrialStatus
from zeus_kfp.policy.base import Decision, Policy
from zeus_kfp.policy.history import History, read_history
from zeus_kfp.trial_history import TrialHistory


def last_drift(drifts: Iterable[int], recurrence: int | None) -> int | None:
    """The latest drift recurrence at or before `recurrence` (any, when None); None if there is none."""
    before = [int(d) for d in drifts if recurrence is None or int(d) <= recurrence]
    return max(before) if before else None


def cheapest_size(spec: JobSpec, history: History) -> int | None:
    """The feasible size with the lowest mean charged cost among those that reached the target; None when
    none has (or every size ran out of memory)."""
    columns = TrialHistory.of(history)
    if not len(columns):
        return None
    try:
        view = read_history(spec, columns)
    except ValueError:  # NoFeasibleBatchSizeError: nothing to start from
        return None
    means = {b: view.charged(b)[1] for b in view.feasible if view.has_reached(b)}
    means = {b: m for b, m in means.items() if m is not None}
    return min(means, key=lambda b: (means[b], b)) if means else None


def after_drift(
    spec: JobSpec, history: History, drifts: Iterable[int], reaction: str, recurrence: int | None = None
) -> tuple[JobSpec, TrialHistory]:
    """The (spec, history) a policy decides from for `recurrence` under `reaction`, `drifts` being the
    recurrence numbers that drift opened. Unchanged without a drift at or before `recurrence`, or with
    `none`; see the module docstring for the others."""
    if reaction not in DRIFT_REACTIONS:
        raise ValueError(f"invalid drift_reaction={reaction!r}: allowed {', '.join(DRIFT_REACTIONS)}")
    columns = TrialHistory.of(history)
    since = last_drift(drifts, recurrence)
    if reaction == "none" or since is None:
        return spec, columns
    old = columns.recurrence < since
    keep = ~old | columns.has(TrialStatus.OOM)
    if reaction == "reexplore":
        best = cheapest_size(spec, columns.take(old))
        if best is not None:
            spec = spec.with_changes(default_batch_size=best)
    return spec, columns.take(np.flatnonzero(keep))


def _seen(spec: JobSpec, history: History, drifts: Iterable[int], recurrence: int | None) -> tuple[JobSpec, History]:
    """What the job's drift_reaction shows a policy: (spec, history) themselves, the same objects, when no
    drift counts; else after_drift's."""
    drifts = tuple(drifts)
    if not drifts or spec.drift_reaction == "none":
        return spec, history
    return after_drift(spec, history, drifts, spec.drift_reaction, recurrence)


def decide_after_drift(
    policy: Policy,
    spec: JobSpec,
    history: History,
    seed: int,
    *,
    drifts: Iterable[int] = (),
    recurrence: int | None = None,
) -> Decision:
    """`policy`'s decision for `recurrence` on what the job's `drift_reaction` leaves of the history.
    Without drifts, exactly `policy.decide(spec, history, seed)` (same objects)."""
    seen_spec, seen = _seen(spec, history, drifts, recurrence)
    return policy.decide(seen_spec, seen, seed)


def early_stop_after_drift(
    policy: Policy, spec: JobSpec, history: History, *, drifts: Iterable[int] = (), recurrence: int | None = None
) -> float | None:
    """`policy`'s early-stop threshold on what the job's `drift_reaction` leaves of the history: what a
    running trial stops at (the mid-trial stop), judged like the decisions next to it. Without drifts,
    exactly `policy.stop_threshold(spec, history)`."""
    seen_spec, seen = _seen(spec, history, drifts, recurrence)
    return policy.stop_threshold(seen_spec, seen)
