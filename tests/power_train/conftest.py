"""Fixtures for the power/train tests: the fake pynvml installed as `pynvml` for one test."""

from __future__ import annotations

import sys

import pytest

from .fake_pynvml import FakeDevice, make_module


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch):
    """Install a fake pynvml with two devices (one with, one without an energy counter); returns the module."""
    module = make_module([FakeDevice(name="Fake V100"), FakeDevice(name="Fake P100", has_counter=False)])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module
