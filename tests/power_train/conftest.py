"""Fixtures for the power/train tests: the fake pynvml installed as `pynvml` for one test."""

from __future__ import annotations

import sys

import pytest

from .fake_pynvml import FakeDevice, make_module


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch):
    """Install a fake pynvml with two devices (one with, one without an energy counter); returns the module."""
    module = make_module(
        [
            FakeDevice(name="Fake V100", pci_bus_id="00000000:18:00.0"),
            FakeDevice(name="Fake P100", has_counter=False, pci_bus_id="00000000:3B:00.0"),
        ]
    )
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def rate(eta: float, max_power_w: float, num_gpus: int = 1):
    """The job's cost rate for a profiler under test (what JobSpec.cost_model.rate gives a real job)."""
    from zeus_kfp.cost import CostModel

    return CostModel(eta=eta, max_power_w=max_power_w, num_gpus=num_gpus).rate


def wall_optimum(model, limits: list[float], eta: float, max_power_w: float) -> float:
    """The exhaustive optimum on the simulated GPU's *wall* clock, worked from the model's two curves
    (power and relative throughput at each limit), independently of the profiler: ties to the higher limit."""
    return min(
        limits,
        key=lambda p: ((eta * model.power_w(p) + (1 - eta) * max_power_w) / model.relative_throughput(p), -p),
    )
