"""The NVML backend over the fake pynvml: energy counter, sampling fallback, permission error, restore."""

from __future__ import annotations

import logging
import time

import pytest

from zeus_kfp.power import (
    EnergyMonitor,
    GPUError,
    GPUKindError,
    PowerLimitProfiler,
    ProfileParams,
    SimulatedGPU,
    max_power_limit_w,
    open_gpu,
)
from zeus_kfp.power.nvml import NvmlGPU

from .conftest import rate


def test_reads_devices_and_constraints_in_watts(fake_nvml):
    gpu = open_gpu("nvml")
    assert gpu.kind == "nvml" and not gpu.simulated
    assert gpu.names() == ["Fake V100", "Fake P100"]
    c = gpu.constraints(0)
    assert (c.min_w, c.max_w, c.default_w) == (100.0, 300.0, 300.0)
    gpu.set_power_limit(0, 175)
    assert gpu.get_power_limit(0) == 175.0
    assert fake_nvml.devices[0].set_calls == [175_000]
    gpu.close()


def test_max_power_limit_is_the_visible_gpus_not_the_simulated_one(fake_nvml, monkeypatch):
    monkeypatch.delenv("ZEUSD_HOST", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    fake_nvml.devices[1].max_mw = 350_000
    assert max_power_limit_w("auto") == (350.0, False)
    assert max_power_limit_w("simulated") == (SimulatedGPU().constraints(0).max_w, True)


def test_auto_picks_nvml_when_a_gpu_is_visible(fake_nvml, monkeypatch):
    monkeypatch.delenv("ZEUSD_HOST", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    assert open_gpu("auto").kind == "nvml"


def test_energy_counter_and_sampling_fallback_agree_with_the_power_drawn(fake_nvml):
    gpu = NvmlGPU()
    assert gpu.has_energy_counter(0) and not gpu.has_energy_counter(1)
    monitor = EnergyMonitor(gpu)
    monitor.begin_window("w")
    time.sleep(1.0)
    m = monitor.end_window("w")
    gpu.close()
    # both devices draw 150 W: the counter (device 0) and the sampled integral (device 1) must both see ~150 W
    # (10%: on a loaded 2-core CI host a thread can stall for tens of milliseconds between reads)
    assert m.time_s == pytest.approx(1.0, abs=0.2)
    for index in (0, 1):
        assert m.energy_j[index] / m.time_s == pytest.approx(150.0, rel=0.1), index
    assert not m.simulated


def test_sampling_follows_a_change_in_power(fake_nvml):
    gpu = NvmlGPU()
    e0 = gpu.energy_j(1)
    time.sleep(0.3)
    fake_nvml.devices[1].set_power(300_000)
    time.sleep(0.3)
    used = gpu.energy_j(1) - e0
    gpu.close()
    assert pytest.approx(used, rel=0.15) == 0.3 * 150 + 0.3 * 300


def test_permission_error_switches_to_measure_only_and_says_so_once(fake_nvml, caplog):
    for d in fake_nvml.devices:
        d.may_set = False
    gpu = NvmlGPU()
    with caplog.at_level(logging.WARNING):
        gpu.set_power_limit(0, 200)
        gpu.set_power_limit(1, 200)
        gpu.set_power_limit(0, 150)
    warnings = [r for r in caplog.records if "MEASURE-ONLY" in r.getMessage()]
    assert len(warnings) == 1
    assert not gpu.can_set_limits
    assert gpu.get_power_limit(0) == 300.0
    # measure-only profiler: one window at the current limit, nothing set (min_window_s=0: this test is about
    # permissions, not the meter's granularity; 2 s sampled windows would only slow it down)
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 600), params=ProfileParams.zeus(1, 2, min_window_s=0.0))
    assert profiler.limits == [300.0]
    for _ in range(3):
        profiler.on_step_begin()
        time.sleep(0.01)
        profiler.on_step_end(8)
    assert profiler.done and profiler.chosen_limit == 300.0
    assert all(d.set_calls == [] for d in fake_nvml.devices)
    gpu.close()


def test_limit_restored_when_training_raises(fake_nvml):
    gpu = NvmlGPU()
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 600), params=ProfileParams.zeus(1, 1, min_window_s=0.0))
    with pytest.raises(RuntimeError, match="boom"):
        try:
            for step in range(5):
                profiler.on_step_begin()
                profiler.on_step_end(4)
                if step == 3:
                    assert gpu.get_power_limit(0) < 300.0
                    raise RuntimeError("boom")
        finally:
            profiler.restore()
    assert [gpu.get_power_limit(i) for i in range(2)] == [300.0, 300.0]
    gpu.close()


def test_nvml_without_a_gpu_is_a_clear_error(monkeypatch):
    from .fake_pynvml import make_module

    monkeypatch.setitem(__import__("sys").modules, "pynvml", make_module([]))
    with pytest.raises(GPUError, match="sees no GPU"):
        NvmlGPU()
    assert open_gpu("auto").kind == "simulated"


def test_unknown_kind_names_the_field_and_the_choices():
    with pytest.raises(GPUKindError) as info:
        open_gpu("tpu")
    assert info.value.field == "gpu"
    assert "auto, nvml, zeusd, simulated" in str(info.value)


def test_a_refusal_discovered_mid_profile_measures_only_the_limit_in_force(fake_nvml):
    for d in fake_nvml.devices:
        d.may_set = False
        d.limit_mw = 280_000  # an admin-set limit the pod cannot change
    gpu = NvmlGPU()
    assert gpu.can_set_limits  # NVML cannot tell before trying
    profiler = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 600), params=ProfileParams.zeus(1, 2, min_window_s=0.0))
    assert len(profiler.limits) > 1
    for _ in range(3):
        profiler.on_step_begin()
        time.sleep(0.01)
        profiler.on_step_end(8)
    assert profiler.done and profiler.measure_only
    assert list(profiler.profile().rows["power_limit_w"]) == [280.0] and profiler.chosen_limit == 280.0
    gpu.close()


def test_each_backend_says_how_long_a_window_must_last(fake_nvml, monkeypatch):
    from zeus_kfp.power import SimulatedGPU
    from zeus_kfp.power.nvml import COUNTER_MIN_WINDOW_S, POWER_AVERAGING_S, SAMPLE_INTERVAL_S, SAMPLED_MIN_WINDOW_S

    gpu = NvmlGPU()  # device 1 has no counter: its sampled power is a ~1 s average, so windows need longer
    assert max(POWER_AVERAGING_S, 10 * SAMPLE_INTERVAL_S) <= SAMPLED_MIN_WINDOW_S > 1.0
    assert gpu.min_window_s == SAMPLED_MIN_WINDOW_S
    assert PowerLimitProfiler(gpu, cost_rate=rate(0.5, 600)).min_window_s == SAMPLED_MIN_WINDOW_S
    overridden = PowerLimitProfiler(gpu, cost_rate=rate(0.5, 600), params=ProfileParams.zeus(min_window_s=0.25))
    assert overridden.min_window_s == 0.25
    gpu.close()
    fake_nvml.devices.pop()  # counter only
    gpu = NvmlGPU()
    assert gpu.min_window_s == COUNTER_MIN_WINDOW_S == 1.0
    gpu.close()
    assert SimulatedGPU().min_window_s == 0.0  # exact energy: no floor
