"""Power-limit profiling of a plain script from outside, driven by its collected progress counter.

A Zeus-aware script calls the JIT profiler's step hooks from ZeusDataLoader. A plain script
cannot, but when its metrics carry a progress counter (a `step`, or an `epoch`), the runner can
call the same hooks of the same state machine (zeus_kfp.power.profiler.PowerLimitProfiler) as the
counter advances: set a limit, measure energy and progress over a window, move on, then hold
the optimum. Nothing here is a second profiler; this module only turns observations into hooks.

Rules, in the order they apply:
- Step mode (the first observation carrying a step): each advance of the counter by k is k steps
  of `batch_size` samples. A counter that goes back started again (a per-epoch counter).
  Epoch boundaries are where the epoch counter changes, else (no epoch counter) where the job's
  metric is reported (an evaluation ends an epoch), else where the step counter restarts.
- Epoch mode (no step counter, but the job's metric arrives with an epoch counter): each change
  of the epoch counter is one unit of work; each power limit is measured over one epoch
  (0 warm-up + 1 profiled unit) and throughput is in epochs per second.
- Neither: the trial runs unprofiled at the limit in force, and says so once; each report of the
  job's metric is one epoch.

Where the trial is charged from (`on_training_start`, Zeus measures from the start of training):
- On the simulated GPU: from the first report, any mode. The runner's simulated GPU then moves to
  its model clock (see zeus_kfp.power.simulated "Plain scripts") and the work reported is replayed on
  it, so start-up (imports, data loading) costs nothing, however long it takes.
- On a real meter (NVML, zeusd): from the first report of a step counter (the steps before it are
  not charged: report the counter every few steps). A script that reports only at epoch ends gives
  nothing that tells start-up from training, so it is charged from its start, and its first epoch
  is not a price of an epoch (zeus_kfp.train.plain never predicts with it); `from_training_start` says which.

How a burst of k steps (or epochs) is fed:
- On the simulated GPU's model clock: step by step, `on_step_begin`, `account_work(batch_size)`,
  `on_step_end`, exactly the calls ZeusDataLoader makes per batch (an epoch: `account_epoch`). A
  burst replays the same sequence however late the runner saw it, so the plain trial's profile, and
  its chosen limit, are those of the Zeus-aware script.
- On a real meter: the runner only knows that k steps happened between two reports, so windows
  open and close at reports: `on_step_end(k * batch_size, steps=k)`, then `on_step_begin()` for
  what follows. The steps before the first report ran before profiling began and are not profiled.
  A script should report its counter every few steps; the warm-up steps absorb the lag of a limit change.

A stored profile (zeus_kfp.power.reuse) is applied from the start: no counter is needed to hold
the stored optimum. The profiler restores the limits from before the trial in `close()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from zeus_kfp.power.gpu import GPU
from zeus_kfp.power.monitor import EnergyMonitor
from zeus_kfp.power.profile_params import ProfileParams
from zeus_kfp.power.profiler import PowerLimitProfiler
from zeus_kfp.power.selection import CostRate
from zeus_kfp.profiles import UNPROFILED_NOTE, PowerProfile
from zeus_kfp.train.collectors.observation import Observation

log = logging.getLogger(__name__)

UNIT_NOTES = {
    "step": "throughput from metric progress (step counter, {batch_size} samples a step)",
    "epoch": "throughput from metric progress (epoch counter; throughput in epochs/s)",
}


@dataclass(frozen=True)
class ProfilingOptions:
    """The profiler's iteration counts and shortest window (None: the backend's), as for a Zeus-aware trial."""

    warmup_iters: int = 10
    profile_iters: int = 40
    min_window_s: float | None = None


PROFILE_HINT = (
    "to profile it, report a counter with the metric: print epoch=N or step=N, or give --metric-pattern an "
    "(?P<epoch>...) or (?P<step>...) group"
)


class ProgressProfiler:
    """Feeds a plain script's progress to the JIT profiler (see the module docstring)."""

    def __init__(
        self,
        gpu: GPU,
        monitor: EnergyMonitor,
        *,
        batch_size: int,
        cost_rate: CostRate,
        options: ProfilingOptions = ProfilingOptions(),
        reuse: PowerProfile | None = None,
        on_training_start: Callable[[], None] | None = None,
    ) -> None:
        self.gpu, self.monitor, self.batch_size = gpu, monitor, batch_size
        self.cost_rate, self.options = cost_rate, options
        self.on_training_start = on_training_start
        self.mode: str | None = None
        self.profiler: PowerLimitProfiler | None = None
        self.exact = False  # replaying the reported work on the simulated model clock
        # How the trial is charged is known: from its first report (see "Where the trial is charged from").
        # Before that, cost means nothing yet.
        self.settled = False
        self.from_training_start = False  # the trial's window began at the start of training
        self._last_step: int | None = None
        self._last_epoch: int | None = None
        self._reuse = reuse  # a stored profile: final (held from the start) or unfinished (continued once paced)
        if reuse is not None and reuse.is_usable():
            held = self._make(ProfileParams(options.warmup_iters, options.profile_iters), reuse)
            if held.reused:
                self.profiler = held
                self.profiler.on_step_begin()  # a stored optimum needs no counter: hold it from the start

    def _make(self, params: ProfileParams, reuse: PowerProfile | None = None) -> PowerLimitProfiler:
        params = ProfileParams(params.warmup_iters, params.profile_iters, min_window_s=self.options.min_window_s)
        return PowerLimitProfiler(self.gpu, cost_rate=self.cost_rate, params=params, monitor=self.monitor, reuse=reuse)

    # -- observations ----------------------------------------------------------------------------
    def observe(self, observation: Observation, *, is_target: bool) -> None:
        """One collected observation, in the order the script reported them; `is_target`: the job's metric."""
        if observation.step is not None and self.mode not in ("epoch", "unprofiled"):
            self._on_step(observation.step)
        epoch_changed = observation.epoch is not None and observation.epoch != self._last_epoch
        if epoch_changed:
            self._last_epoch = observation.epoch
            if self.mode == "step":
                self.profiler.on_epoch_end()  # type: ignore[union-attr]
            elif self.mode == "epoch":
                self._advance(1, samples=1)
        if not is_target:
            return
        if self.mode == "step" and self._last_epoch is None:
            self.profiler.on_epoch_end()  # type: ignore[union-attr]  (an evaluation ends an epoch)
        elif self.mode is None and self._last_epoch is not None:
            self._start("epoch")  # an epoch ended with this evaluation, and no step counter came first
            self._advance(1 if self.exact else 0, samples=1)
        elif self.mode is None:
            self._start("unprofiled")
            self._charge_epoch()
            log.warning("zeus: %s; the trial is measured but not power-profiled (%s)", UNPROFILED_NOTE, PROFILE_HINT)
        elif self.mode == "unprofiled":
            self._charge_epoch()

    def _charge_epoch(self) -> None:
        """An epoch of a script that reports no counter, on the model clock (a real meter measures it)."""
        if self.exact:
            self.gpu.account_epoch(self.batch_size)  # type: ignore[attr-defined]

    def _on_step(self, step: int) -> None:
        if self.mode is None:
            self._start("step")
        last, self._last_step = self._last_step, step
        if last is None:
            self._advance(step if self.exact else 0, samples=self.batch_size)
            return
        if step < last:  # the counter started again: a per-epoch step counter
            if self._last_epoch is None:
                self.profiler.on_epoch_end()  # type: ignore[union-attr]
            self._advance(step, samples=self.batch_size)
        elif step > last:
            self._advance(step - last, samples=self.batch_size)

    def _start(self, mode: str) -> None:
        self.mode, self.settled = mode, True
        on_model_clock = getattr(self.gpu, "clock_kind", None) == "wall"
        if on_model_clock:
            self.gpu.use_model_clock()  # type: ignore[attr-defined]  (the simulated GPU; see its docstring)
        if on_model_clock or mode == "step":  # the start of training is known (module docstring)
            self.from_training_start = True
            if self.on_training_start is not None:
                self.on_training_start()
        self.exact = getattr(self.gpu, "clock_kind", None) == "model"
        if mode == "unprofiled":
            return
        if self.profiler is None:
            params = ProfileParams(self.options.warmup_iters, self.options.profile_iters) if mode == "step" else (
                ProfileParams(warmup_iters=0, profile_iters=1)
            )  # fmt: skip
            self.profiler = self._make(params, self._reuse)
        log.info("zeus: profiling power limits from outside the script on its %s counter", mode)

    def _advance(self, units: int, samples: int) -> None:
        """`units` steps (or epochs) of `samples` samples each happened since the last report."""
        profiler = self.profiler
        assert profiler is not None
        if self.exact:
            for _ in range(units):
                profiler.on_step_begin()
                if self.mode == "epoch":
                    self.gpu.account_epoch(self.batch_size)  # type: ignore[attr-defined]
                else:
                    self.gpu.account_work(samples)  # type: ignore[attr-defined]
                profiler.on_step_end(samples)
            return
        if units > 0:
            profiler.on_step_end(units * samples, steps=units)
        profiler.on_step_begin()

    # -- results ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Put back the limits from before the trial (safe to call more than once)."""
        if self.profiler is not None:
            self.profiler.restore()

    def power_limit(self) -> float | None:
        """The limit the trial trained at (None: unprofiled; the caller reads the GPU's)."""
        return self.profiler.best_limit() if self.profiler is not None else None

    def profile(self) -> PowerProfile:
        return self.profiler.profile() if self.profiler is not None else PowerProfile.empty()

    def notes(self) -> list[str]:
        """What the trial's reason says about profiling."""
        if self.profiler is not None and self.profiler.reused:
            return []
        if self.mode in (None, "unprofiled"):
            return [UNPROFILED_NOTE]
        notes = ["profiled from outside: " + UNIT_NOTES[self.mode].format(batch_size=self.batch_size)]
        partial = self.profiler.partial_note() if self.profiler is not None else ""
        return [*notes, partial] if partial else notes

    def summary(self) -> dict[str, object] | None:
        """For result.json: how profiling went, and on which counter."""
        if self.profiler is None:
            return {"progress": self.mode}
        return {"progress": self.mode, "exact_replay": self.exact, **self.profiler.summary()}
