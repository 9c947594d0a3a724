"""The simulated H200 against the sweep it is fitted to (traces/h200_sweep_resnet18_bs256.csv, measured):
each expectation below is read from the CSV here, not from the model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from zeus_kfp.simulate.h200 import SETTLE_S, SimulatedH200, fitted, load_sweep

SWEEP = load_sweep()
BY_LIMIT = SWEEP.groupby("power_limit_w")[["average_power_w", "samples_per_s"]].mean()


def zeus_cost(power: float, throughput: float) -> float:
    return (0.5 * power + 0.5 * 700.0) / throughput  # eta 0.5, time priced at the 700 W maximum


@pytest.mark.parametrize("limit", sorted(BY_LIMIT.index))
def test_power_and_throughput_follow_the_measured_means(limit):
    curve = fitted()
    measured = BY_LIMIT.loc[limit]
    assert curve.power_w(limit) == pytest.approx(measured["average_power_w"], rel=0.05)
    assert curve.throughput(limit) == pytest.approx(measured["samples_per_s"], rel=0.06)  # windows read +-5 %


def test_the_optimum_and_the_saving_are_the_sweeps():
    measured = {limit: zeus_cost(r.average_power_w, r.samples_per_s) for limit, r in BY_LIMIT.iterrows()}
    best = min(measured, key=measured.get)
    assert best == 250.0
    curve = fitted()
    assert curve.optimum(step_w=50.0) == best
    saving = 1 - measured[best] / measured[700.0]  # 6.4 % measured
    assert 1 - curve.cost_per_sample(250.0) / curve.cost_per_sample(700.0) == pytest.approx(saving, abs=0.015)
    assert curve.cost_per_sample(200.0) > curve.cost_per_sample(250.0)  # below the optimum, cost rises again


def test_a_limit_above_the_draw_changes_nothing():
    curve = fitted()
    draw = BY_LIMIT.loc[BY_LIMIT.index >= 400.0, "average_power_w"].mean()
    for limit in (450.0, 550.0, 650.0, 700.0):
        assert curve.power_w(limit) == pytest.approx(draw, rel=0.01)
        assert curve.throughput(limit) == curve.throughput(700.0)


def test_three_second_windows_are_as_noisy_as_the_sweeps_repeats():
    pairs = SWEEP.pivot_table(index="power_limit_w", columns="repeat", values="samples_per_s")
    measured = float(np.sqrt(np.mean(((pairs[0] - pairs[1]) / ((pairs[0] + pairs[1]) / 2)) ** 2) / 2))
    readings = []
    for seed in range(40):
        gpu = SimulatedH200(seed=seed)
        start, samples = gpu.clock(), 0
        while gpu.clock() - start < 3.0:
            gpu.account_work(256)
            samples += 256
        readings.append(samples / (gpu.clock() - start))
    spread = float(np.std(readings) / np.mean(readings))
    assert spread == pytest.approx(measured, rel=0.35)
    assert np.mean(readings) == pytest.approx(fitted().throughput(700.0), rel=0.02)


def test_a_new_limit_applies_after_it_settles_and_is_reported_at_once():
    gpu = SimulatedH200(dataclasses.replace(fitted(), window_noise=0.0))
    gpu.set_power_limit(0, 200.0)
    assert gpu.get_power_limit(0) == 200.0
    joules = gpu.energy_j(0)
    gpu.account_work(256)  # still at 700 W: the first step after the change
    first = (gpu.energy_j(0) - joules) / gpu.clock()
    assert first == pytest.approx(fitted().power_w(700.0))
    while gpu.clock() < SETTLE_S + 0.05:
        gpu.account_work(256)
    before, at = gpu.energy_j(0), gpu.clock()
    gpu.account_work(256)
    assert (gpu.energy_j(0) - before) / (gpu.clock() - at) == pytest.approx(fitted().power_w(200.0))


def test_limits_outside_the_gpus_range_are_refused_naming_the_range():
    with pytest.raises(ValueError, match=r"power_limit_w=100.*200-700 W"):
        SimulatedH200().set_power_limit(0, 100.0)
