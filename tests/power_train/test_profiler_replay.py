"""The NSDI'23 power traces fed through the live JIT profiler: it picks, for every batch size of every shipped
workload and GPU, the limit the simulator's trial code picks (choose_limit over
zeus_kfp.simulate.trace_trial.trace_profile).

The device is a stand-in (no GPU here): the simulated GPU driven by TraceDevice, whose step at a limit takes
the trace's epoch time at that limit / STEPS_PER_EPOCH and draws its epoch energy / STEPS_PER_EPOCH. The
profiler only sees what its energy monitor reads of that device, window by window, as on a real meter."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from zeus_kfp.power import EnergyMonitor, PowerLimitProfiler, ProfileParams, SimulatedGPU, choose_limit
from zeus_kfp.power.profiler import Eval
from zeus_kfp.simulate.trace import SHIPPED_POWER_TRACES, SizeTrace
from zeus_kfp.simulate.trace_trial import TraceBackend, trace_profile
from zeus_kfp.simulate.workloads import WORKLOADS

STEPS_PER_EPOCH = 100


@dataclass(frozen=True)
class TraceDevice:
    """A stand-in for a GPU, shaped like zeus_kfp.power.simulated.PowerModel: its figures are a trace's."""

    size: SizeTrace
    name: str = "trace replay (test stand-in)"
    overhead_w: float = 0.0

    @property
    def min_w(self) -> float:
        return float(self.size.power_limits.min())

    @property
    def max_w(self) -> float:
        return float(self.size.power_limits.max())

    def step(self, limit_w: float, samples: float) -> tuple[float, float]:
        k = int(np.flatnonzero(self.size.power_limits == limit_w)[0])
        share = samples / STEPS_PER_EPOCH  # of an epoch
        return self.size.time_per_epoch[k] * share, self.size.energy_per_epoch[k] * share


def replay(size: SizeTrace, cost_rate) -> PowerLimitProfiler:
    gpu = SimulatedGPU(model=TraceDevice(size))  # type: ignore[arg-type]
    (step_w,) = set(np.diff(size.power_limits))  # 25 W; sentiment140 on the A40 was measured every 50 W
    params = ProfileParams.zeus(2, 5, step_w=float(step_w))
    profiler = PowerLimitProfiler(gpu, cost_rate=cost_rate, params=params, monitor=EnergyMonitor(gpu))
    for _ in range(STEPS_PER_EPOCH):  # every limit fits in one epoch: 7 x 9 steps at most
        profiler.on_step_begin()
        gpu.account_work(1)
        profiler.on_step_end(1)
    return profiler


@pytest.mark.parametrize("gpu", SHIPPED_POWER_TRACES)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_the_profiler_on_the_traces_picks_what_the_simulator_picks_for_every_batch_size(workload, gpu) -> None:
    backend = TraceBackend(workload, gpu)
    trace, spec = backend.trace(), backend.spec("replay")
    for batch_size, size in trace.sizes.items():
        profiler = replay(size, spec.cost_model.rate)
        expected = choose_limit(trace_profile(size), spec.cost_model.rate)
        assert profiler.state == Eval(expected), (batch_size, profiler.summary())
        measured = profiler.profile().rows.sort_values("power_limit_w")
        assert list(measured["power_limit_w"]) == list(size.power_limits)  # every limit of the trace, once
        power = size.energy_per_epoch / size.time_per_epoch
        assert np.allclose(measured["average_power_w"], power, rtol=1e-9)
        assert np.allclose(measured["throughput"], STEPS_PER_EPOCH / size.time_per_epoch, rtol=1e-9)
