"""Power-limit profiling of a plain script from outside, driven by what it reports.

A Zeus-aware script calls the JIT profiler's step hooks from ZeusDataLoader. A plain script cannot, but
the runner sees its reports as they arrive and can call the same hooks of the same state machine
(zeus_kfp.power.profiler.PowerLimitProfiler) as the script progresses: set a limit, measure energy and
progress over a window, move on, then hold the optimum. Nothing here is a second profiler; this module only
turns observations into hooks. A plain trial is profiled whatever the script prints; it runs unprofiled
only where limits cannot be set (measure-only), and its reason then says why and what to do.

The unit of work, by the first observation that tells one (the mode):
- step: a step counter (`step=200`, a step in a line, a JSON key): each advance by k is k steps of
  `batch_size` samples; a counter that goes back started again (a per-epoch counter). Epoch boundaries are
  where the epoch counter changes, else (no epoch counter) where the job's metric is reported (an
  evaluation ends an epoch), else where the step counter restarts.
- epoch: an epoch counter on a line that reports a metric (`epoch=3 accuracy=..`, Keras's `Epoch 3/10`
  before its metrics line, HuggingFace's `'epoch': 0.32`): the counter's advance is the work, in epochs (a
  fraction where the script reports one); throughput is in epochs per second. Work is credited where a
  metric is reported, never at a line that only names the epoch: Keras prints `Epoch 3/10` before it trains.
- report: neither: each report of the job's metric is one unit (the script's epoch), and windows are the
  time between its metric lines.

Windows measure training, not what surrounds it (on a real meter; the model clock below measures only work):
- at the trial's start the first limit's warm-up lasts a whole shortest window (zeus_kfp.power.profiler:
  the first steps of a process are slow: caches, autotuning, workers), and no window holds the time before
  the script's first report (its start-up);
- after a limit change, warm-up steps absorb the change (the profiler's);
- an evaluation: where the script reports training alone (lines of progress between its metric
  reports), the interval that ends with the job's metric holds the evaluation, and is left out of the
  open window (`PowerLimitProfiler.leave_out_interval`). Where the metric's reports are all it reports, an
  evaluation is part of every unit, at every limit alike, and stays in.

Where the trial is charged from (`on_training_start`, Zeus measures from the start of training):
- On the simulated GPU: from the first report, any mode. The runner's simulated GPU then moves to
  its model clock (see zeus_kfp.power.simulated "Plain scripts") and the work reported is replayed on
  it, so start-up (imports, data loading) costs nothing, however long it takes.
- On a real meter (NVML, zeusd): from the first report of a step counter (the steps before it are
  not charged: report the counter every few steps). A script that reports only at epoch ends gives
  nothing that tells start-up from training, so it is charged from its start, and its first epoch
  is not a price of an epoch (zeus_kfp.train.plain never predicts with it); `from_training_start` says which.

How a burst of work is fed:
- On the simulated GPU's model clock: step by step, `on_step_begin`, `account_work(batch_size)`,
  `on_step_end`, exactly the calls ZeusDataLoader makes per batch (an epoch, or a fraction of one:
  `account_epoch`). A burst replays the same sequence however late the runner saw it, so the plain trial's
  profile, and its chosen limit, are those of the Zeus-aware script.
- On a real meter: the runner only knows that k steps happened between two reports, so windows
  open and close at reports: `on_step_end(k * batch_size, steps=k)`, a mark of where training was, then
  `on_step_begin()` for what follows. The work before the first report ran before profiling began.

A stored profile (zeus_kfp.power.reuse) is applied from the start: no counter is needed to hold
the stored optimum. The profiler puts the GPUs at their resting limit in `close()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zeus_kfp.power.gpu import GPU, measure_only_note
from zeus_kfp.power.monitor import EnergyMonitor
from zeus_kfp.power.profile_params import ProfileParams
from zeus_kfp.power.profiler import PowerLimitProfiler
from zeus_kfp.power.selection import CostRate
from zeus_kfp.profiles import UNPROFILED_NOTE, PowerProfile
from zeus_kfp.train.collectors.counters import counter_kind
from zeus_kfp.train.collectors.observation import Observation

log = logging.getLogger(__name__)

UNIT_NOTES = {
    "step": "throughput from metric progress (step counter, {batch_size} samples a step)",
    "epoch": "throughput from metric progress (epoch counter; throughput in epochs/s)",
    "report": "throughput from the metric's reports (one report a unit: the time between them; in reports/s)",
}


@dataclass(frozen=True)
class ProfilingOptions:
    """The profiler's iteration counts and shortest window (None: the backend's), as for a Zeus-aware trial."""

    warmup_iters: int = 10
    profile_iters: int = 40
    min_window_s: float | None = None


@dataclass(frozen=True)
class Report:
    """What one line (or record, or scrape) of the script said, as the profiler reads it: the observations a
    line holds are one report, so a line that ends with the job's metric is an evaluation whatever counters it
    names first."""

    step: int | None = None
    epoch: float | None = None
    counter_only: bool = True  # it names a counter and nothing else (Keras's `Epoch 3/10`)
    is_target: bool = False  # it reports the job's metric

    @classmethod
    def of(cls, observations: Sequence[Observation], metric_name: str) -> Report:
        steps = [o.step for o in observations if o.step is not None]
        epochs = [o.epoch for o in observations if o.epoch is not None]
        return cls(
            step=max(steps) if steps else None,
            epoch=max(epochs) if epochs else None,
            counter_only=all(counter_kind(o.metric) is not None for o in observations),
            is_target=any(o.metric == metric_name for o in observations),
        )


def reports(observations: Sequence[Observation]) -> list[list[Observation]]:
    """Observations grouped into the reports they came in (a line's, a record's: Observation.report)."""
    groups: list[list[Observation]] = []
    for observation in observations:
        if groups and groups[-1][-1].report == observation.report and observation.report:
            groups[-1].append(observation)
        else:
            groups.append([observation])
    return groups


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
        self.trains_between_reports = False  # progress came on lines that are not the job's metric
        self._last_step: int | None = None
        self._last_epoch: float | None = None  # on the epoch counter's last change
        self._credited_epoch: float | None = None  # where epoch mode last credited work
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
        """One observation as a report of its own (`report` takes a line's observations together)."""
        counter_only = counter_kind(observation.metric) is not None
        self.report(Report(observation.step, observation.epoch, counter_only, is_target))

    def report(self, report: Report) -> None:
        """One report of the script (a line, a record), in the order it reported them."""
        if self.mode is None:
            self._choose_mode(report)
            return
        # An interval that ends at the job's metric, where the script also reports training alone, held the
        # evaluation: it is left out of the open window (module docstring). On the model clock no
        # evaluation is modelled.
        evaluation = report.is_target and self.trains_between_reports and not self.exact
        if self.mode == "step":
            self._step_mode(report, evaluation)
        elif self.mode == "epoch" and not report.counter_only:
            self._epoch_mode(report, evaluation)
        elif self.mode == "report" and report.is_target:
            self._advance(1.0)

    def _choose_mode(self, report: Report) -> None:
        """The first report that tells the unit of work starts profiling (the module docstring's modes)."""
        if report.step is not None:
            self._start("step")
            self._last_step, self._last_epoch = report.step, report.epoch
            self._advance(report.step if self.exact else 0.0)  # the work before the first report
        elif report.epoch is not None and not report.counter_only:
            self._start("epoch")
            first = report.epoch if 0 < report.epoch < 1 else 1.0  # the epoch just reported
            self._last_epoch = self._credited_epoch = report.epoch
            self.trains_between_reports = not report.is_target
            self._advance(first if self.exact else 0.0)
        elif report.epoch is not None:
            self._last_epoch = report.epoch  # Keras's `Epoch 1/10`: it names the epoch about to train
        elif report.is_target:
            self._start("report")
            self._advance(1.0 if self.exact else 0.0)

    def _step_mode(self, report: Report, evaluation: bool) -> None:
        profiler = self.profiler
        assert profiler is not None
        if not report.is_target and report.step is not None:
            self.trains_between_reports = True
        step, last = report.step, self._last_step
        if evaluation:
            profiler.leave_out_interval()
        if step is not None:
            self._last_step = step
            if evaluation:
                pass  # its steps ran before the evaluation, inside the interval left out
            elif last is not None and step < last:  # a per-epoch step counter started again
                if report.epoch is None and self._last_epoch is None:
                    profiler.on_epoch_end()
                self._advance(float(step))
            elif last is not None and step > last:
                self._advance(float(step - last))
        if report.epoch is not None and report.epoch != self._last_epoch:
            self._last_epoch = report.epoch
            profiler.on_epoch_end()
        elif report.is_target and self._last_epoch is None:
            profiler.on_epoch_end()  # an evaluation ends an epoch
        if evaluation:
            profiler.on_step_begin()  # the next interval is training again

    def _epoch_mode(self, report: Report, evaluation: bool) -> None:
        """Work is credited where a metric is reported, by the epoch counter's advance since the last credit."""
        profiler = self.profiler
        assert profiler is not None
        if not report.is_target:
            self.trains_between_reports = True
        epoch = report.epoch if report.epoch is not None else self._last_epoch  # the last one named
        if epoch is None:
            return
        self._last_epoch = epoch
        credited = self._credited_epoch
        advance = epoch - credited if credited is not None else 0.0
        if advance <= 0 and report.is_target and not self.trains_between_reports:
            advance = 1.0  # a counter that did not move between evaluations: one epoch each
        if evaluation:
            self._credited_epoch = epoch
            profiler.leave_out_interval()
            profiler.on_step_begin()
        elif advance > 0:
            self._credited_epoch = epoch
            self._advance(advance)

    def _start(self, mode: str) -> None:
        self.mode, self.settled = mode, True
        simulated_model = getattr(self.gpu, "clock_kind", None) is not None  # the simulated GPU (its docstring)
        if simulated_model:
            self.gpu.use_model_clock()  # type: ignore[attr-defined]  (from here only reported work is charged)
        if simulated_model or mode == "step":  # the start of training is known (module docstring)
            self.from_training_start = True
            if self.on_training_start is not None:
                self.on_training_start()
        self.exact = getattr(self.gpu, "clock_kind", None) == "model"
        if self.profiler is None:
            params = ProfileParams(self.options.warmup_iters, self.options.profile_iters) if mode == "step" else (
                ProfileParams(warmup_iters=0, profile_iters=1)
            )  # fmt: skip
            self.profiler = self._make(params, self._reuse)
        if self.profiler.measure_only:
            log.warning("zeus: %s; the trial is measured but not power-profiled", measure_only_note(self.gpu))
        else:
            log.info("zeus: profiling power limits from outside the script (%s)", UNIT_NOTES[mode].format(
                batch_size=self.batch_size))  # fmt: skip

    def _advance(self, units: float) -> None:
        """`units` steps, epochs or reports of work happened since the last report."""
        profiler = self.profiler
        assert profiler is not None
        samples = self.batch_size if self.mode == "step" else 1
        if self.exact:
            if self.mode == "step":
                for _ in range(int(units)):
                    profiler.on_step_begin()
                    self.gpu.account_work(samples)
                    profiler.on_step_end(samples)
            elif units > 0:
                profiler.on_step_begin()
                self.gpu.account_epoch(self.batch_size, fraction=units)  # type: ignore[attr-defined]
                profiler.on_step_end(units)  # type: ignore[arg-type]  (epochs: throughput in epochs/s)
            return
        if units > 0:
            steps = int(units) if self.mode == "step" else 1
            profiler.on_step_end(units * samples, steps=steps)  # type: ignore[arg-type]
            profiler.mark()
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
        """What the trial's reason says about profiling (measure-only: the plain trial's own note says why)."""
        if self.profiler is not None and (self.profiler.reused or self.profiler.measure_only):
            return []
        if self.mode is None:
            return [UNPROFILED_NOTE]
        notes = ["profiled from outside: " + UNIT_NOTES[self.mode].format(batch_size=self.batch_size)]
        if self.profiler is not None:
            notes += [note for note in (self.profiler.reuse_note(), self.profiler.partial_note()) if note]
        return notes

    def summary(self) -> dict[str, object] | None:
        """For result.json: how profiling went, and on which counter."""
        if self.profiler is None:
            return {"progress": self.mode}
        return {"progress": self.mode, "exact_replay": self.exact, **self.profiler.summary()}
