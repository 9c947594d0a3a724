"""What a drift does to the history a policy decides from (zeus_kfp.policy.drift), worked out by hand.

The history (make_spec: sizes 8..256, default 128; costs are reached costs unless said):
  recurrence 1: trial 1 at 128 reached, cost 10
  recurrence 2: trial 2 at 64 reached, cost 8
  recurrence 3: trial 3 at 256 oom; trial 4 at 32 reached, cost 12
  recurrence 4 (opened by drift): trial 5 at 64 reached, cost 20
  recurrence 5: trial 6 at 128 dispatched
Before the drift the cheapest size is 64 (8 < 10 < 12).
"""

from __future__ import annotations

import pytest

from zeus_kfp.errors import JobSpecError
from zeus_kfp.job import DRIFT_REACTIONS
from zeus_kfp.policy import get_policy
from zeus_kfp.policy.drift import after_drift, decide_after_drift, last_drift

from .helpers import make_spec, record

HISTORY = [
    record(1, 1, 128, "reached", 10.0),
    record(2, 2, 64, "reached", 8.0),
    record(3, 3, 256, "oom"),
    record(3, 4, 32, "reached", 12.0),
    record(4, 5, 64, "reached", 20.0),
    record(5, 6, 128, "dispatched"),
]


def trials_of(history) -> list[int]:
    return [int(t) for t in history.trial]


def test_window_forgets_the_trials_before_the_drift_but_keeps_the_oom():
    spec = make_spec()
    seen_spec, seen = after_drift(spec, HISTORY, [4], "window", recurrence=5)
    assert trials_of(seen) == [3, 5, 6]
    assert seen_spec == spec


def test_reexplore_forgets_them_too_and_restarts_the_walk_from_the_cheapest_size_before_the_drift():
    seen_spec, seen = after_drift(make_spec(), HISTORY, [4], "reexplore", recurrence=5)
    assert trials_of(seen) == [3, 5, 6]
    assert seen_spec.default_batch_size == 64
    assert seen_spec.diff(make_spec()) == {"default_batch_size": (64, 128)}


def test_none_and_a_drift_not_yet_reached_leave_the_history_as_it_is():
    assert trials_of(after_drift(make_spec(), HISTORY, [4], "none", recurrence=5)[1]) == [1, 2, 3, 4, 5, 6]
    assert trials_of(after_drift(make_spec(), HISTORY, [4], "window", recurrence=3)[1]) == [1, 2, 3, 4, 5, 6]
    assert trials_of(after_drift(make_spec(), HISTORY, [], "window", recurrence=5)[1]) == [1, 2, 3, 4, 5, 6]


def test_the_latest_drift_at_or_before_the_recurrence_opens_the_window():
    assert last_drift([2, 4], 3) == 2 and last_drift([2, 4], 9) == 4 and last_drift([4], 3) is None
    _, seen = after_drift(make_spec(), HISTORY, [2, 4], "window", recurrence=3)
    assert trials_of(seen) == [2, 3, 4, 5, 6]


def test_reexplore_with_nothing_reached_before_the_drift_keeps_the_default():
    history = [record(1, 1, 128, "not_reached", 30.0), record(2, 2, 64, "reached", 9.0)]
    seen_spec, seen = after_drift(make_spec(), history, [2], "reexplore", recurrence=2)
    assert seen_spec.default_batch_size == 128 and trials_of(seen) == [2]


@pytest.mark.parametrize("policy", ["zeus-nsdi23", "turning-walk"])
def test_a_policy_decides_on_what_the_reaction_leaves(policy):
    """The decision after a drift is the policy's decision on the hand-made windowed history."""
    chosen = get_policy(policy)
    spec = make_spec(drift_reaction="reexplore")
    windowed = [HISTORY[2], HISTORY[4], HISTORY[5]]
    expected = chosen.decide(spec.with_changes(default_batch_size=64), windowed, 7)
    assert decide_after_drift(chosen, spec, HISTORY, 7, drifts=[4], recurrence=5) == expected
    # Without a drift, or under `none`, the policy sees everything.
    assert decide_after_drift(chosen, spec, HISTORY, 7, recurrence=5) == chosen.decide(spec, HISTORY, 7)
    off = spec.with_changes(drift_reaction="none")
    assert decide_after_drift(chosen, off, HISTORY, 7, drifts=[4], recurrence=5) == chosen.decide(off, HISTORY, 7)


def test_a_bad_drift_reaction_names_the_field_and_what_is_allowed():
    with pytest.raises(JobSpecError) as caught:
        make_spec(drift_reaction="reset")
    assert caught.value.field == "drift_reaction"
    assert str(caught.value) == "invalid drift_reaction='reset': allowed window, reexplore, none"
    assert set(DRIFT_REACTIONS) == {"window", "reexplore", "none"}
    with pytest.raises(ValueError, match="drift_reaction='forget'"):
        after_drift(make_spec(), HISTORY, [4], "forget")
