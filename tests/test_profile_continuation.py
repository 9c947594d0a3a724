"""An unfinished power profile across trials, where the steps and the report handle it: the train step stores
the grown profile of a trial that continued one (and nothing for a trial that trained at a final one), and
`show` and the power plot say how complete each batch size's latest profile is."""

from __future__ import annotations

import dataclasses

import pandas as pd

from zeus_kfp.power.profiler import PowerLimitProfiler
from zeus_kfp.profiles import UNFINISHED_NOTE, PowerProfile
from zeus_kfp.report.numbers import profile_states
from zeus_kfp.simulate.h200 import SimulatedH200, fitted, train_for
from zeus_kfp.steps.train import _measured_more


def rows(*limits: float) -> PowerProfile:
    return PowerProfile.of(
        [{"phase": "train", "power_limit_w": w, "average_power_w": w / 2, "throughput": 100.0, "simulated": True}
         for w in limits]
    )  # fmt: skip


def test_the_train_step_stores_a_continued_profile_and_not_a_final_one_trained_at():
    assert _measured_more(rows(700.0), None)
    assert not _measured_more(None, rows(700.0))  # a replayed trial that trained at the stored profile hands none
    assert _measured_more(rows(700.0, 325.0, 275.0), rows(700.0, 325.0))  # continued: grown, stored
    assert not _measured_more(rows(700.0, 325.0), rows(700.0, 325.0))  # trained at it: nothing new
    with_eval = PowerProfile.of([*rows(700.0).rows.to_dict("records"), {**rows(700.0).rows.iloc[0], "phase": "eval"}])
    assert not _measured_more(with_eval, rows(700.0))  # an eval row at the chosen limit is not a new profile


def test_show_and_the_plot_say_which_latest_profiles_are_unfinished():
    profiles = pd.concat(
        [
            rows(250.0, 225.0).rows.assign(batch_size=64, trial=1),
            rows(250.0, 225.0, 200.0).rows.assign(batch_size=64, trial=3),
            rows(250.0).rows.assign(batch_size=128, trial=2),
        ]
    )
    reason = f"{UNFINISHED_NOTE}: chose among 1 of 7 limits; the next trial at this batch size continues the profile"
    trials = pd.DataFrame({"trial": [1, 2, 3], "reason": [reason, reason, ""]})
    assert profile_states(trials, profiles) == {
        64: "complete, 3 limits",
        128: "unfinished, 1 limit (the next trial continues it)",
    }


def test_a_trial_that_ends_mid_search_is_reported_unfinished_from_its_own_reason():
    gpu = SimulatedH200(dataclasses.replace(fitted(), window_noise=0.0))
    profiler = PowerLimitProfiler(gpu, cost_rate=lambda power, throughput: (0.5 * power + 350.0) / throughput)
    train_for(gpu, profiler, 6.0)  # a 1 s first warm-up, two windows and a bit: the search has more to measure
    assert not profiler.done
    measured = profiler.profile().rows.assign(batch_size=256, trial=1)
    trials = pd.DataFrame({"trial": [1], "reason": [profiler.partial_note()]})
    assert len(measured) == 2  # the maximum (3.25 s: 13 bins for a known spread) and the first rung below the draw
    assert profile_states(trials, measured) == {256: "unfinished, 2 limits (the next trial continues it)"}
