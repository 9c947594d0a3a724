"""Where the bandit stands, one row per batch size: the policy's arm states, computed from the history.

Nothing derived from the history is stored: the arm states are a function of (spec, history, policy)
(`Policy.arm_states`), as a decision is, so every view that shows them (the report step, `zeus-kfp
show` and `run`, TensorBoard, the notebook) computes them here from the history it read, and they all
agree. The statistics of even a long history cost well under 0.1 s (zeus_kfp.policy.tally).

The job's policy is a run parameter, not part of the spec, and the store does not record it: a caller
that knows it (the report step, `zeus-kfp run`) passes it; one that does not (`zeus-kfp show`) gets the
default policy's view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.policy import NoFeasibleBatchSizeError, get_policy
from zeus_kfp.policy.base import ArmState
from zeus_kfp.policy.history import History, tally_history
from zeus_kfp.trial_history import TrialHistory
from zeus_kfp.trials import Trial

DEFAULT_POLICY = "default"
ARM_COLUMNS = ["batch_size", "stage", "num_observations", "posterior_mean", "posterior_precision", "pruned"]
FRAME_COLUMNS = [*ARM_COLUMNS, "lowest_cost"]
_DTYPES = {"batch_size": "int64", "stage": "object", "num_observations": "int64", "posterior_mean": "float64",
           "posterior_precision": "float64", "pruned": "bool", "lowest_cost": "float64"}  # fmt: skip


def arm_frame(spec: JobSpec, history: History, policy: str = DEFAULT_POLICY) -> pd.DataFrame:
    """The policy's arm states after `history` (FRAME_COLUMNS, sorted by batch size; a missing posterior
    is NaN), each with `lowest_cost`: the lowest spend of a recurrence that reached the target, the
    policies' early-stop basis (beta x it is the threshold; zeus_kfp.policy.history), NaN before any.

    Empty while no trial has finished: there is nothing to show before the first result. When every
    size ran out of memory the policy has no view (NoFeasibleBatchSizeError); each size then shows as
    "oom", pruned, so a person sees why rather than an error."""
    history = TrialHistory.of(history)
    if history.has(TrialStatus.DISPATCHED).all():
        return pd.DataFrame({name: pd.Series(dtype=kind) for name, kind in _DTYPES.items()})
    try:
        arms = get_policy(policy).arm_states(spec, history)
    except NoFeasibleBatchSizeError:
        arms = [ArmState(b, "oom", 0, None, None, True) for b in spec.batch_sizes]
    lowest = tally_history(spec, history).best_spend
    frame = pd.DataFrame([astuple(arm) for arm in arms], columns=ARM_COLUMNS)
    frame["lowest_cost"] = lowest
    frame = frame.astype(_DTYPES)  # None -> NaN in the float columns, whatever the first row held
    return frame.sort_values("batch_size", kind="stable").reset_index(drop=True)


def history_through(history: Sequence[Trial], recurrence: int) -> list[Trial]:
    """The history (in trial order) up to and including the last trial of `recurrence`: what the policy
    saw once that recurrence's last trial was in. Empty when the recurrence has no trial. Cheap (one
    pass), so a view per recurrence (TensorBoard) costs the statistics of a prefix, not a stored snapshot."""
    last = max((i for i, record in enumerate(history) if record.recurrence == recurrence), default=-1)
    return list(history[: last + 1])
