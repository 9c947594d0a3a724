"""NVML backend (nvidia-ml-py, imported as pynvml): real power limits and real energy.

Energy: Volta and newer GPUs keep a hardware energy counter (nvmlDeviceGetTotalEnergyConsumption,
mJ), which is exact and free to read. Older GPUs answer NOT_SUPPORTED; for those a background
thread samples instantaneous power (nvmlDeviceGetPowerUsage, mW) and integrates it, which is
what Zeus does too. The choice is made per device on first use.

Both meters are coarse, so a window shorter than `min_window_s` measures noise (see
COUNTER_MIN_WINDOW_S and SAMPLED_MIN_WINDOW_S; measured on an H200, driver 580).

Setting limits needs root or SYS_ADMIN. On Kubeflow a pod cannot get SYS_ADMIN, so a
permission error is not fatal: the backend flips to measure-only, says so once, and later
`set_power_limit` calls are no-ops (use zeusd to set limits from an unprivileged pod).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from zeus_kfp.power.gpu import REAL_METER, GPUError, PowerConstraints, warn_measure_only

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 0.1
# nvmlDeviceGetTotalEnergyConsumption advances in coarse steps (~100 ms on an H200): a window of T s
# reads the energy to within one step, an error of up to 0.1 / T; Zeus's 40-step windows read zero on
# an H200 (benchmarks/RESULTS.md, "On a real GPU"). One second bounds the error at ~10 %.
COUNTER_MIN_WINDOW_S = 1.0
# nvmlDeviceGetPowerUsage is not instantaneous on recent GPUs: it is a moving average over ~1 s.
POWER_AVERAGING_S = 1.0
SAMPLED_MIN_WINDOW_S = max(2 * POWER_AVERAGING_S, 20 * SAMPLE_INTERVAL_S)


class _PowerSampler:
    """Integrates sampled power (W) over time on a daemon thread, for GPUs without an energy counter.

    The figure LAGS: on recent GPUs nvmlDeviceGetPowerUsage returns power averaged over about the
    last second (POWER_AVERAGING_S), not the power now. A load that starts or changes is seen late
    (on an H200, sampling read a busy loop's energy about a fifth low: benchmarks/RESULTS.md, "On a
    real GPU"). Hence the energy counter is always preferred where the GPU has one, and a
    sampled window must last several averaging periods (SAMPLED_MIN_WINDOW_S) before its
    average power means something.
    """

    def __init__(
        self,
        read_power_w: Callable[[], float],
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read_power_w
        self._interval = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._energy = 0.0
        self._last_t = clock()
        self._last_p = float(read_power_w())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zeus-power-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        p = float(self._read())
        with self._lock:
            now = self._clock()
            self._energy += 0.5 * (p + self._last_p) * (now - self._last_t)  # trapezoid
            self._last_t, self._last_p = now, p

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sample()
            except Exception as exc:  # a failed read must not kill the thread; the next one may work
                log.debug("power sample failed: %s", exc)

    def energy_j(self) -> float:
        self._sample()
        with self._lock:
            return self._energy

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


class NvmlGPU:
    """All GPUs NVML sees in this process (on Kubernetes: the ones assigned to the pod).

    `clock` is the time source of every window on this backend (time.monotonic; tests pass a fake
    clock that also drives the fake pynvml's counter).

    A stand-in NVML (zeus_kfp.simulate.nvml_standin: a simulated GPU reached through this very code, for machines
    without one) says so by a module attribute `ZEUS_STAND_IN`: then every figure is labelled simulated, with
    what it simulates (`source`), and windows run on its simulated clock, which its training advances.
    """

    kind = "nvml"
    meter = REAL_METER

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        try:
            import pynvml  # here, not at the top: its absence is this GPUError, not an ImportError of zeus_kfp.power
        except ImportError as exc:
            raise GPUError("gpu=nvml needs nvidia-ml-py (import pynvml)") from exc
        self._nvml = pynvml
        stand_in = getattr(pynvml, "ZEUS_STAND_IN", None)
        self.simulated = stand_in is not None
        self.source = stand_in.source if stand_in is not None else ""
        self._clock = clock or (stand_in.clock if stand_in is not None else time.monotonic)
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise GPUError(f"gpu=nvml: NVML could not start ({exc}); is an NVIDIA driver present?") from exc
        if count == 0:
            pynvml.nvmlShutdown()
            raise GPUError("gpu=nvml: NVML sees no GPU")
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._samplers: dict[int, _PowerSampler] = {}
        self._has_counter: dict[int, bool] = {}
        self.can_set_limits = True
        self.measure_only_reason = ""

    def device_count(self) -> int:
        return len(self._handles)

    def names(self) -> list[str]:
        names = []
        for h in self._handles:
            name = self._nvml.nvmlDeviceGetName(h)
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names

    def constraints(self, index: int) -> PowerConstraints:
        h = self._handles[index]
        lo, hi = self._nvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
        default = self._nvml.nvmlDeviceGetPowerManagementDefaultLimit(h)
        return PowerConstraints(min_w=lo / 1000.0, max_w=hi / 1000.0, default_w=default / 1000.0)

    def pci_bus_ids(self) -> list[str]:
        """Each visible GPU's PCI address as NVML gives it ("00000000:3B:00.0"): the one name of a GPU that a pod
        (which sees only its own GPUs, renumbered from 0) and the node's daemons agree on."""
        out = []
        for h in self._handles:
            bus_id = self._nvml.nvmlDeviceGetPciInfo(h).busId
            out.append(bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id))
        return out

    def get_power_limit(self, index: int) -> float:
        return self._nvml.nvmlDeviceGetPowerManagementLimit(self._handles[index]) / 1000.0

    def set_power_limit(self, index: int, watts: float) -> None:
        if not self.can_set_limits:
            return
        try:
            self._nvml.nvmlDeviceSetPowerManagementLimit(self._handles[index], round(watts * 1000))
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) != self._nvml.NVML_ERROR_NO_PERMISSION:
                raise GPUError(f"gpu=nvml: setting GPU {index} to {watts:g} W failed: {exc}") from exc
            self.disable_limits(f"NVML: {exc} (needs root or SYS_ADMIN)")

    def disable_limits(self, reason: str) -> None:
        """Switch to measure-only, saying so once."""
        if self.can_set_limits:
            self.can_set_limits = False
            self.measure_only_reason = reason
            warn_measure_only(self.kind, reason)

    def power_w(self, index: int) -> float:
        return self._nvml.nvmlDeviceGetPowerUsage(self._handles[index]) / 1000.0

    def has_energy_counter(self, index: int) -> bool:
        if index not in self._has_counter:
            try:
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handles[index])
                self._has_counter[index] = True
            except self._nvml.NVMLError as exc:
                if getattr(exc, "value", None) != self._nvml.NVML_ERROR_NOT_SUPPORTED:
                    raise
                log.info("GPU %d has no energy counter; sampling power every %.2f s", index, SAMPLE_INTERVAL_S)
                self._has_counter[index] = False
        return self._has_counter[index]

    def energy_j(self, index: int) -> float:
        if self.has_energy_counter(index):
            return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handles[index]) / 1000.0
        if index not in self._samplers:
            self._samplers[index] = _PowerSampler(lambda: self.power_w(index), clock=self._clock)
        return self._samplers[index].energy_j()

    @property
    def min_window_s(self) -> float:
        """The longest any device needs: COUNTER_MIN_WINDOW_S with an energy counter, else SAMPLED_MIN_WINDOW_S."""
        counters = [self.has_energy_counter(i) for i in range(len(self._handles))]
        return max(COUNTER_MIN_WINDOW_S if counter else SAMPLED_MIN_WINDOW_S for counter in counters)

    def account_work(self, samples: int) -> None:
        """Nothing to do: the hardware counters measure the work themselves."""

    def clock(self) -> float:
        return self._clock()

    def close(self) -> None:
        for sampler in self._samplers.values():
            sampler.stop()
        self._samplers.clear()
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown: %s", exc)
