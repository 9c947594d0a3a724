"""The fleet as Prometheus metrics (`zeus-kfp fleet --serve PORT`), for the team that watches Grafana.

Names follow Prometheus' conventions: the `zeus_kfp_` prefix, base units in the name (joules, seconds, grams),
`_total` only on counters, labels `job` and `namespace`. What only grows is a counter (recurrences, energy used,
failed trials and their energy: a deleted job is the one reset, which rate() handles). A saving is a gauge: it
falls while a job explores (a new batch size costs its profiling epoch), and a counter that falls reads as a
reset to rate() and increase(), which would turn a dip into a spike. docs/fleet.md lists every series.

Each scrape serves the fleet as last read; the store is read again when that is older than `refresh_s`, so a
Prometheus scraping every 15 s does not read every job's history four times a minute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from zeus_kfp.fleet.figures import Fleet

PREFIX = "zeus_kfp_"
LABELS = ["job", "namespace"]


@dataclass(frozen=True)
class Series:
    """One metric: its name (without PREFIX; a counter's without `_total`), kind, help, and the JobFigures field
    it reads with a factor (None: the job has no value and gets no sample, rather than a false 0)."""

    name: str
    counter: bool
    help: str
    field: str
    factor: float = 1.0


SERIES = [
    Series("recurrences", True, "Finished recurrences of the job.", "recurrences"),
    Series("energy_used_joules", True, "GPU energy of the job's finished trials, failed ones included.",
           "energy_used_j"),
    Series("energy_saved_joules", False, "GPU energy saved against the default configuration (negative while "
           "exploring costs more).", "energy_saved_j"),
    Series("default_cost_joules", False, "What the counted recurrences would have cost at the default configuration "
           "(Zeus's cost): sum(cost_saved) / sum(this) is the fleet's saving.", "default_cost_j"),
    Series("cost_saved_joules", False, "Zeus's cost (eta * energy + (1 - eta) * max power * time) saved against the "
           "default configuration.", "cost_saved_j"),
    Series("gpu_time_saved_seconds", False, "GPU time saved against the default configuration (time x GPUs).",
           "gpu_hours_saved", 3600.0),
    Series("co2_avoided_grams", False, "CO2 avoided: energy saved x the grid's carbon intensity.", "co2_avoided_g"),
    Series("saving_ratio", False, "The job's cumulative saving, 1 - cost / the default configuration's (as `zeus-kfp "
           "show`).", "saving"),
    Series("failed_trials", True, "Trials that failed for reasons of their own (no model; waste).", "failed_trials"),
    Series("failed_energy_joules", True, "GPU energy of the failed trials (waste, apart from the saving).",
           "failed_energy_j"),
]  # fmt: skip
STAGE = "bandit_stage"
STAGES = ("not started", "exploration", "exploitation")


def families(fleet: Fleet) -> list[Metric]:
    """The fleet's metric families, one sample per job (and series) that has a value."""
    out: list[Metric] = []
    for series in SERIES:
        kind = CounterMetricFamily if series.counter else GaugeMetricFamily
        family = kind(PREFIX + series.name, series.help, labels=LABELS)
        for job in fleet.jobs:
            value = getattr(job, series.field)
            if value is not None:
                family.add_metric([job.job_id, fleet.namespace], float(value) * series.factor)
        out.append(family)
    stage = GaugeMetricFamily(PREFIX + STAGE, "1 for the stage the job's bandit is in, 0 for the others.",
                              labels=[*LABELS, "stage"])  # fmt: skip
    for job in fleet.jobs:
        for name in sorted({*STAGES, job.stage}):
            stage.add_metric([job.job_id, fleet.namespace, name], 1.0 if job.stage == name else 0.0)
    out.append(stage)
    intensity = GaugeMetricFamily(PREFIX + "carbon_intensity_grams_per_kwh", "The grid intensity CO2 avoided is "
                                  "priced at (--carbon-intensity).", labels=["namespace"])  # fmt: skip
    intensity.add_metric([fleet.namespace], fleet.carbon_intensity)
    out.append(intensity)
    return out


class FleetCollector(Collector):
    """Serves `read()`'s fleet, read again at a scrape when the last read is older than `refresh_s`. A read that
    fails keeps serving the last fleet and counts the failure (zeus_kfp_fleet_read_errors_total), so one store
    hiccup does not blank every panel."""

    def __init__(
        self,
        read: Callable[[], Fleet],
        refresh_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        first: Fleet | None = None,
    ):
        self._read, self._refresh_s, self._clock = read, refresh_s, clock
        self._lock = threading.Lock()
        # The first read (unless the caller has just made it) fails loudly: a wrong store must not serve an empty fleet.
        self._fleet = read() if first is None else first
        self._read_at = clock()
        self._read_wall = time.time()
        self._errors = 0

    def latest(self) -> Fleet:
        with self._lock:
            if self._clock() - self._read_at >= self._refresh_s:
                try:
                    self._fleet = self._read()
                    self._read_wall = time.time()
                except Exception:  # served stale and counted; the next scrape tries again
                    self._errors += 1
                self._read_at = self._clock()
            return self._fleet

    def collect(self) -> Iterator[Metric]:
        fleet = self.latest()
        yield from families(fleet)
        read_at = GaugeMetricFamily(PREFIX + "fleet_read_timestamp_seconds", "When the store was last read (Unix).")
        read_at.add_metric([], self._read_wall)
        yield read_at
        yield CounterMetricFamily(PREFIX + "fleet_read_errors", "Store reads that failed (the last fleet was served).",
                                  value=self._errors)  # fmt: skip


def serve(collector: FleetCollector, port: int, address: str = "127.0.0.1") -> tuple[object, threading.Thread]:
    """Serve `collector` at http://address:port/metrics on a daemon thread; returns (server, thread): the
    server's `server_port` is the port the OS chose when `port` is 0."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return start_http_server(port, addr=address, registry=registry)
