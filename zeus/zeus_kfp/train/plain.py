"""A plain script's trial as its collected metrics tell it: target, epochs, cost, power profile.

The runner (zeus_kfp.train.runner) owns the process; this object owns what the collected values
mean. Each report of the job's metric is one evaluation, so one epoch (as Katib counts
observations). The trial ends:
- reached: a metric value meets the target;
- not reached: max_epochs evaluations passed without it, or the script ended;
- cost exceeded (Zeus's early stop): the cost so far passes the threshold, or, at an epoch's
  end, the cost so far plus the price of one more epoch would pass it (Zeus's "would the next
  epoch exceed" rule, priced by the last epoch). An epoch's price never holds start-up: on a meter
  the first epoch is charged but never a price, whatever marked the start of training (imports, data
  loading, a compiler's slow first steps, the first evaluation's set-up all fall before the first
  evaluation), so the prediction starts with the second epoch; on the simulated GPU's model clock an
  epoch is the work it reported and nothing else, so the first prices the second, as in a Zeus-aware
  trial. The trial is charged from its first report where that marks the start of training
  (zeus_kfp.train.progress). Cost is checked once it is known how
  the trial is charged (its first report); a script that hangs before reporting anything is the
  timeout's to stop;
- failed: the script crashed (oom when it ran out of memory), the collector could not read its
  source, or the script never reported the metric: found after two epochs of output without it where the
  output shows epoch numbers (zeus_kfp.train.metric_watch), else when the script ends. The reason names the
  collector and source, the metrics that were reported, and a pattern to try.
Progress counters in the observations drive the external power profiler (zeus_kfp.train.progress).

Lines the script prints are taken as they arrive, on the output pump's thread (`on_line`, stdout and stderr), not at
the runner's next poll: a window opens and closes where the meter is read, so reading it 50 ms late (the
poll) would move each window's edges by up to that much, 5 % of a 1 s window. A lock keeps the two threads'
reads of the collector apart.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd

from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.power.gpu import GPU, measure_only_note
from zeus_kfp.power.monitor import EnergyMonitor
from zeus_kfp.train.collectors import Collector, CollectorError, CollectorSpec, Observation, StdoutCollector
from zeus_kfp.train.live_threshold import current_threshold
from zeus_kfp.train.metric_watch import MetricWatch
from zeus_kfp.train.progress import ProfilingOptions, ProgressProfiler, Report, reports
from zeus_kfp.train.session import TRIAL_WINDOW


class PlainTrial:
    """Collected observations -> the trial's status, metrics and power profile."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        batch_size: int,
        cost_threshold: float | None,
        collector_spec: CollectorSpec,
        collector: Collector,
        gpu: GPU,
        monitor: EnergyMonitor,
        options: ProfilingOptions,
        reuse: pd.DataFrame | None = None,
        threshold_file: str | None = None,
    ) -> None:
        self.spec, self.threshold = spec, cost_threshold
        self.dispatched_threshold, self.threshold_file = cost_threshold, threshold_file  # the live one: at each metric
        self.collector_spec, self.collector = collector_spec, collector
        self.gpu, self.monitor = gpu, monitor
        self.metrics: list[float] = []
        self.epoch_costs: list[float] = []
        self.epoch_prices: list[float] = []  # the epochs whose cost is training alone (see the module docstring)
        self.notes_before: list[str] = []  # what claiming the collector's source said
        self.status: TrialStatus | None = None
        self.reason = ""
        self._cost_at_last_epoch = 0.0
        self._lock = threading.RLock()  # the output pump's thread and the runner's take observations
        self.watch = MetricWatch(spec.metric_name, collector_spec.describe())  # a metric that is not coming
        self.progress = ProgressProfiler(
            gpu,
            monitor,
            batch_size=batch_size,
            cost_rate=spec.cost_model.rate,
            options=options,
            reuse=reuse,
            on_training_start=self._restart_trial_window,
        )

    def claim(self, aside: Path) -> None:
        """Before the script starts: the collector's source becomes the trial's own (raises CollectorError)."""
        self.notes_before = self.collector.claim(aside)

    def _restart_trial_window(self) -> None:
        """Training started (the first report; zeus_kfp.train.progress): the trial is measured from here."""
        if self.monitor.is_open(TRIAL_WINDOW):
            self.monitor.cancel_window(TRIAL_WINDOW)
        self.monitor.begin_window(TRIAL_WINDOW)
        self._cost_at_last_epoch = 0.0

    def on_line(self, line: str) -> None:
        """A line of output as it arrives (the pump's thread): taken at once (the module docstring)."""
        with self._lock:
            self.watch.on_line(line)
            if isinstance(self.collector, StdoutCollector):
                self.collector.feed(line)
                self._take(self.collector.poll())

    def _cost(self) -> float:
        measured = self.monitor.peek(TRIAL_WINDOW)
        return self.spec.cost_model.cost(measured.total_energy_j, measured.time_s)

    def stop(self, status: TrialStatus, reason: str = "") -> None:
        if self.status is None:
            self.status, self.reason = status, reason

    # -- while the script runs ---------------------------------------------------------------------
    def poll(self) -> TrialStatus | None:
        """Take what the collector has; returns the status once the trial should end."""
        with self._lock:
            try:
                self._take(self.collector.poll())
            except CollectorError as exc:
                self.stop(TrialStatus.FAILED, str(exc))
            settled = self.progress.settled  # before the first step or evaluation, startup is not yet charged
            if self.status is None and self.threshold is not None and settled:
                cost = self._cost()
                if cost > self.threshold:
                    self.stop(
                        TrialStatus.COST_EXCEEDED, f"stopped: cost {cost:.1f} passed the threshold {self.threshold:.1f}"
                    )
            return self.status

    def _take(self, observations: list[Observation]) -> None:
        for report in reports(observations):  # a line's observations together (zeus_kfp.train.progress)
            if self.status is not None:
                return
            for observation in report:
                self.watch.on_observation(observation)
            self.progress.report(Report.of(report, self.spec.metric_name))
            for observation in report:
                if observation.metric == self.spec.metric_name and self.status is None:
                    self._on_metric(observation.value)
        missing = self.watch.missing() if self.status is None and not self.metrics else None
        if missing:
            self.stop(TrialStatus.FAILED, missing)  # two epochs of output and no metric: not after the whole trial

    def _on_metric(self, value: float) -> None:
        self.metrics.append(value)
        self.threshold = current_threshold(
            self.dispatched_threshold, self.threshold_file
        )  # zeus_kfp.train.live_threshold
        cost = self._cost()
        self.epoch_costs.append(cost - self._cost_at_last_epoch)
        self._cost_at_last_epoch = cost
        if len(self.metrics) > 1 or self.progress.exact:  # on a meter the first holds what came before training
            self.epoch_prices.append(self.epoch_costs[-1])
        predicted = cost + self.epoch_prices[-1] if self.epoch_prices else None
        if self.spec.reached(value):
            self.stop(TrialStatus.REACHED)
        elif len(self.metrics) >= self.spec.max_epochs:
            self.stop(TrialStatus.NOT_REACHED, f"target not reached in {self.spec.max_epochs} epochs")
        elif self.threshold is not None and predicted is not None and predicted > self.threshold:
            self.stop(
                TrialStatus.COST_EXCEEDED,
                f"stopped before epoch {len(self.metrics) + 1}: predicted cost {predicted:.1f} "
                f"would pass the threshold {self.threshold:.1f}",
            )

    # -- after the script exited -------------------------------------------------------------------
    def finish(self, returncode: int, oom: bool, stderr: str) -> None:
        """The collector's last read, then the status of a script that ended by itself. Restores limits."""
        collector_error = ""
        try:
            with self._lock:
                self._take(self.collector.finish())
        except CollectorError as exc:
            collector_error = str(exc)
        self.close()
        if returncode != 0:
            self.stop(TrialStatus.OOM if oom else TrialStatus.FAILED, f"exit code {returncode}: {stderr}")
        elif collector_error:
            self.stop(TrialStatus.FAILED, collector_error)
        elif not self.metrics:
            self.stop(TrialStatus.FAILED, self.watch.reason())
        else:
            self.stop(
                TrialStatus.NOT_REACHED,
                f"the script ended after {len(self.metrics)} epochs without reaching the target",
            )

    def close(self) -> None:
        self.progress.close()

    def notes(self) -> list[str]:
        notes = [*self.notes_before, *self.progress.notes()]
        if not self.gpu.can_set_limits:
            notes.append(measure_only_note(self.gpu))
        return notes

    def power_limit(self) -> float:
        limit = self.progress.power_limit()
        return limit if limit is not None else self.gpu.get_power_limit(0)
