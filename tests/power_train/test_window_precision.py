"""How precisely a window measures throughput (zeus_kfp.power.precision), and what it changes in a choice:
on a noisy meter a lower limit is never taken to be faster (zeus_kfp.power.selection, monotone)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zeus_kfp.power import ZeusCost
from zeus_kfp.power.precision import MIN_DOF, WindowNoise, bin_deviations
from zeus_kfp.profiles import PowerProfile


def marks(rates: list[float], bin_s: float = 0.25, steps_per_bin: int = 5) -> list[tuple[float, int]]:
    """Step ends at a steady rate within each bin."""
    out, t, samples = [], 0.0, 0.0
    for rate in rates:
        for _ in range(steps_per_bin):
            t += bin_s / steps_per_bin
            samples += rate * bin_s / steps_per_bin
            out.append((t, round(samples)))
    return out


def test_a_steady_window_has_no_spread_and_an_alternating_one_its_own():
    assert np.allclose(bin_deviations(marks([1000.0] * 8), 0.25), 0.0, atol=1e-3)
    deviations = bin_deviations(marks([900.0, 1100.0] * 4), 0.25)
    assert deviations.size == 8 and np.allclose(np.abs(deviations), 0.1, atol=1e-3)


def test_the_error_is_unknown_until_enough_bins_then_the_pooled_spread_over_root_length():
    noise = WindowNoise(bin_s=0.25)
    short = marks([900.0, 1100.0] * 2)  # 4 bins: 3 degrees of freedom
    assert MIN_DOF > 3 and noise.relative_error(short) is None
    for _ in range(3):
        noise.add(marks([900.0, 1100.0] * 4))  # 3 windows of 8 bins: 21 degrees of freedom, each bin +-10 %
    window = marks([1000.0] * 16)  # 4 s, itself steady
    expected = math.sqrt(3 * 8 * 0.01 / (3 * 7 + 15)) * math.sqrt(0.25 / 4.0)
    assert noise.relative_error(window) == pytest.approx(expected, rel=3e-2)  # bins cut between step ends


def rows(*figures: tuple[float, float, float]) -> PowerProfile:
    return PowerProfile.of(
        [{"phase": "train", "power_limit_w": w, "average_power_w": p, "throughput": t, "simulated": False}
         for w, p, t in figures]
    )  # fmt: skip


def rate(power: float, throughput: float) -> float:
    return (0.5 * power + 350.0) / throughput


def test_on_a_noisy_meter_a_lower_limit_read_faster_is_pooled_with_the_higher_and_wins_on_power():
    # 275 W read 3 % faster than 300 W: noise (a lower limit cannot be faster). Exactly, 275 W wins on that
    # noise; pooled, the two share one throughput and 275 W wins on power alone, as it would have anyway.
    # 250 W read 4 % slower than the pool: pooled too (it cannot be faster than 275 W either, but it may be
    # slower), so it stays slower and costs more.
    profile = rows((700.0, 309.0, 24000.0), (300.0, 284.0, 24000.0), (275.0, 268.0, 24720.0), (250.0, 247.0, 22500.0))
    exact, monotone = ZeusCost(rate), ZeusCost(rate, monotone=True)
    limits, power, throughput = monotone.pooled(profile)
    assert limits.tolist() == [250.0, 275.0, 300.0, 700.0]
    assert np.all(np.diff(throughput) >= 0) and np.all(np.diff(power) >= 0)
    assert throughput[1] == throughput[2] == pytest.approx((24000.0 + 24720.0 + 24000.0) / 3)
    assert exact.choose(profile) == 275.0 == monotone.choose(profile)
    # the noise that made a higher limit look slower than a lower one no longer decides between them
    twisted = rows((700.0, 309.0, 23000.0), (300.0, 284.0, 24800.0))
    assert ZeusCost(rate, monotone=True).pooled(twisted)[2].tolist() == [23900.0, 23900.0]


def test_repeated_windows_at_a_limit_count_as_their_mean():
    profile = rows((250.0, 200.0, 1000.0), (250.0, 210.0, 1400.0), (200.0, 150.0, 1100.0))
    limits, power, throughput = ZeusCost(rate).pooled(profile)
    assert limits.tolist() == [200.0, 250.0]
    assert power.tolist() == [150.0, 205.0] and throughput.tolist() == [1100.0, 1200.0]
