"""zeus_kfp.report.arms: the bandit's state computed from the history where it is shown, on the trials of
ux.frames with the numbers worked out by hand (the store is not needed: the history is built here)."""

from __future__ import annotations

import math

import pytest

from ux.frames import SPEC, history
from zeus_kfp.job import TrialStatus
from zeus_kfp.report import arm_frame
from zeus_kfp.report.arms import FRAME_COLUMNS, history_through
from zeus_kfp.report.tensorboard import POSTERIOR_TAG, recurrence_scalars
from zeus_kfp.trials import Trial

# cost = 0.5 * E + 0.5 * 300 W * t: trial 1 (128) 25000; 2 (64, missed) 7000; 3 (256) 15000; 4 (256) 13750;
# trial 5 (32) is only dispatched. Recurrence spends: 25000, 22000, 13750.


def test_the_default_policys_view_of_the_history() -> None:
    frame = arm_frame(SPEC, history())
    assert list(frame.columns) == FRAME_COLUMNS and frame["batch_size"].tolist() == [32, 64, 128, 256]
    state = frame.set_index("batch_size")
    assert state["stage"].to_dict() == {32: "skipped", 64: "pruned", 128: "exploitation", 256: "exploitation"}
    assert state["pruned"].to_dict() == {32: True, 64: True, 128: False, 256: False}
    assert state["num_observations"].to_dict() == {32: 0, 64: 1, 128: 1, 256: 2}
    # 64's miss is charged the retry at 256 its recurrence needed (7000 + 15000); 256 is (15000 + 13750) / 2.
    means = state["posterior_mean"].to_dict()
    assert math.isnan(means[32]) and math.isnan(state.loc[32, "posterior_precision"])
    assert [means[b] for b in (64, 128, 256)] == pytest.approx([22000.0, 25000.0, 14375.0])
    assert set(state["lowest_cost"]) == {13750.0}  # the cheapest recurrence that reached: recurrence 3


def test_the_policy_named_is_the_one_shown() -> None:
    """zeus-nsdi23 learns from each observation's own cost (no retry charge) and is still in its second
    pruning round over the sizes that reached (128, 256)."""
    state = arm_frame(SPEC, history(), "zeus-nsdi23").set_index("batch_size")
    assert state.loc[64, "posterior_mean"] == pytest.approx(7000.0)
    assert state["stage"].to_dict() == {32: "pruned", 64: "pruned", 128: "exploration", 256: "exploration"}
    with pytest.raises(ValueError, match="invalid policy='greedy'"):
        arm_frame(SPEC, history(), "greedy")


def test_nothing_to_show_before_a_first_result_and_every_size_oom_shows_as_such() -> None:
    dispatched = [Trial(1, 1, 128, TrialStatus.DISPATCHED)]
    for empty in ([], dispatched):
        frame = arm_frame(SPEC, empty)
        assert frame.empty and list(frame.columns) == FRAME_COLUMNS
    oom = arm_frame(SPEC, [Trial(1, 1, 32, TrialStatus.OOM)]).set_index("batch_size")
    assert set(oom["stage"]) == {"oom"} and oom["pruned"].all() and oom["lowest_cost"].isna().all()


def test_history_through_a_recurrence_is_the_prefix_up_to_its_last_trial() -> None:
    full = history()
    assert [r.trial for r in history_through(full, 1)] == [1]
    assert [r.trial for r in history_through(full, 2)] == [1, 2, 3]
    assert history_through(full, 3) == full
    assert history_through(full, 9) == []


def test_tensorboard_posterior_after_each_recurrence_from_its_prefix() -> None:
    from ux.frames import profiles_frame, trials_frame

    def posterior(recurrence: int) -> dict[str, float]:
        arms = arm_frame(SPEC, history_through(history(), recurrence))
        scalars = recurrence_scalars(trials_frame(), profiles_frame(), arms, SPEC, recurrence)
        return {tag: value for tag, value in scalars.items() if tag.startswith(POSTERIOR_TAG)}

    assert posterior(1) == {f"{POSTERIOR_TAG}128": 25000.0}
    assert posterior(2) == pytest.approx(
        {f"{POSTERIOR_TAG}{b}": v for b, v in ((64, 22000.0), (128, 25000.0), (256, 15000.0))}
    )
    assert posterior(3)[f"{POSTERIOR_TAG}256"] == pytest.approx(14375.0) and f"{POSTERIOR_TAG}32" not in posterior(3)
