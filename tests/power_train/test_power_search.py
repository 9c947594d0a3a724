"""The profiler on the simulated H200 (zeus_kfp.simulate.h200, fitted to a real sweep): what went wrong on the
real one reproduces under Zeus's rules, and the search that replaced them (zeus_kfp.power.search) finds the
optimum in few windows, continues an unfinished profile in the next trial, and reuses only a complete one."""

from __future__ import annotations

import dataclasses

import pytest

from zeus_kfp.power import PowerLimitProfiler, ProfileParams, ZeusCost
from zeus_kfp.power.search import DRAW_MARGIN, LimitSearch
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.simulate.h200 import SimulatedH200, fitted, train_for


def cost_rate(power: float, throughput: float) -> float:
    return (0.5 * power + 0.5 * 700.0) / throughput


def quiet(draw_w: float | None = None):
    """The fitted curve without window noise (its optimum is then the search's to find exactly)."""
    curve = fitted() if draw_w is None else fitted().scaled(draw_w)
    return dataclasses.replace(curve, window_noise=0.0)


def exhaustive_optimum(curve) -> float:
    limits = [700.0 - 25.0 * i for i in range(21)]
    return min(limits, key=lambda limit: cost_rate(curve.power_w(limit), curve.throughput(limit)))


def limits_measured(profiler) -> list[float]:
    return profiler.profile().rows["power_limit_w"].tolist()


def test_under_zeus_rules_an_11_s_trial_ends_mid_sweep_with_a_high_pick():
    """The H200's failure (traces/h200_trials.csv: 9 of 21 limits in 11.4 s, 625 W chosen, the optimum 250 W)."""
    gpu = SimulatedH200(seed=0)
    profiler = PowerLimitProfiler(gpu, cost_rate=cost_rate, params=ProfileParams.zeus())
    train_for(gpu, profiler, 11.4)
    assert not profiler.done
    assert limits_measured(profiler) == [700.0 - 25.0 * i for i in range(len(limits_measured(profiler)))]
    assert len(limits_measured(profiler)) < 21
    assert profiler.best_limit() >= 450.0  # nowhere near 250 W: every limit it measured is above the draw


@pytest.mark.parametrize("draw", [None, 450.0, 650.0])
def test_the_search_finds_the_exhaustive_optimum_in_at_most_eight_windows(draw):
    curve = quiet(draw)
    gpu = SimulatedH200(curve)
    profiler = PowerLimitProfiler(gpu, cost_rate=cost_rate)  # defaults: on a 1 s meter, the search
    train_for(gpu, profiler, 60.0)
    assert profiler.done and not profiler.reused
    assert profiler.chosen_limit == exhaustive_optimum(curve)
    measured = limits_measured(profiler)
    assert len(measured) <= 8 and measured[0] == 700.0
    above = [limit for limit in measured[1:] if limit > curve.draw_w * (1 + DRAW_MARGIN)]
    assert above == []  # no window above the draw but the maximum's


def test_on_the_measured_curve_the_search_measures_the_draw_brackets_250_w_and_confirms_it():
    gpu = SimulatedH200(quiet())
    profiler = PowerLimitProfiler(gpu, cost_rate=cost_rate)
    train_for(gpu, profiler, 60.0)
    assert limits_measured(profiler) == [700.0, 325.0, 275.0, 225.0, 250.0, 250.0]
    assert profiler.chosen_limit == 250.0


def test_an_unfinished_profile_is_continued_by_the_next_trial_and_then_reused():
    curve = quiet()
    gpu = SimulatedH200(curve)
    first = PowerLimitProfiler(gpu, cost_rate=cost_rate)
    train_for(gpu, first, 6.0)  # too short for the whole search
    first.restore()
    assert not first.done and "continues the profile" in first.partial_note()
    stored = PowerProfile.of(first.profile().rows)
    second = PowerLimitProfiler(gpu, cost_rate=cost_rate, reuse=stored)
    assert not second.reused and second.resumed_rows == len(stored)
    train_for(gpu, second, 60.0)
    grown = limits_measured(second)
    assert grown[: len(stored)] == stored.rows["power_limit_w"].tolist()  # the stored windows kept, not redone
    repeated = {limit for limit in grown if grown.count(limit) > 1}
    assert repeated == {second.chosen_limit}  # only the pick is measured twice (confirmed)
    assert second.done and second.chosen_limit == exhaustive_optimum(curve)
    third = PowerLimitProfiler(gpu, cost_rate=cost_rate, reuse=second.profile())
    assert third.reused and third.chosen_limit == second.chosen_limit


def test_a_complete_profile_is_complete_for_the_search_and_a_partial_one_is_not():
    limits = tuple(700.0 - 25.0 * i for i in range(21))
    search = LimitSearch(limits, ZeusCost(cost_rate))
    curve = quiet()

    def rows(*measured: float) -> PowerProfile:
        return PowerProfile.of(
            [
                {"phase": "train", "power_limit_w": w, "average_power_w": curve.power_w(w),
                 "throughput": curve.throughput(w), "simulated": True}
                for w in measured
            ]
        )  # fmt: skip

    assert search.next_limit(rows()) == 700.0
    assert search.next_limit(rows(700.0)) == 325.0  # the first rung at or below 309 W * 1.1
    assert not search.is_complete(rows(700.0, 325.0, 275.0))
    assert search.next_limit(rows(700.0, 325.0, 275.0, 225.0, 250.0)) == 250.0  # the pick, confirmed
    assert search.is_complete(rows(700.0, 325.0, 275.0, 225.0, 250.0, 250.0))
    assert LimitSearch(limits, ZeusCost(cost_rate), "sweep").next_limit(rows(700.0, 325.0)) == 675.0


def test_a_draw_below_every_limit_checks_the_lowest_and_searches_all_only_if_it_binds():
    limits = (250.0, 225.0, 200.0, 175.0, 150.0)
    search = LimitSearch(limits, ZeusCost(cost_rate))

    def profile(*rows: tuple[float, float, float]) -> PowerProfile:
        return PowerProfile.of(
            [{"phase": "train", "power_limit_w": w, "average_power_w": p, "throughput": t, "simulated": True}
             for w, p, t in rows]
        )  # fmt: skip

    idle = (250.0, 90.0, 1000.0)  # a launch-bound job averaging 90 W
    assert search.next_limit(profile(idle)) == 150.0
    unchanged = (150.0, 90.0, 1000.0)
    assert search.next_limit(profile(idle, unchanged)) == 250.0  # the lowest changed nothing: confirm the maximum
    assert search.next_limit(profile(idle, unchanged, idle)) is None
    assert search.next_limit(profile(idle, (150.0, 70.0, 980.0))) == 225.0  # it bound: every rung is a candidate


def test_search_and_window_bounds_are_checked_naming_the_field():
    with pytest.raises(ValueError, match=r"search='every'.*sweep, descend"):
        ProfileParams(search="every")
    with pytest.raises(ValueError, match=r"rel_error=1\.5"):
        ProfileParams(rel_error=1.5)
    with pytest.raises(ValueError, match=r"max_window_factor=0\.5"):
        ProfileParams(max_window_factor=0.5)
