"""Katib-compatible metric collectors for plain scripts: stdout, a file, TFEvent files, Prometheus.

Each collector yields `Observation`s (metric, value, epoch, step, time) while the script runs;
the runner (zeus_kfp.train.runner, zeus_kfp.train.plain) turns them into the trial's metric, its stop
rules and, through the progress counters, the external power profiler (zeus_kfp.train.progress).
The spec (`CollectorSpec`) has Katib's metricsCollectorSpec shape; see spec.py.

Distributed trials: only rank 0's observations count. The runner runs on the master (rank 0)
and collects from there: stdout lines marked by the launcher as another rank's are dropped
(`master_line`, see stdout.py); file and tfEvent paths are the master's (its working directory,
its {log_dir}); the Prometheus endpoint is 127.0.0.1 in the master's pod. A launcher that starts
ranks itself needs no other hook than to keep rank 0's output on the runner's stdout (torchrun
`--local-ranks-filter 0`, or `--tee 3`, whose marks `master_line` reads) and to give rank 0 the
paths and port of the spec.
"""

from __future__ import annotations

from pathlib import Path

from zeus_kfp.train.collectors.collector import Collector, CollectorError
from zeus_kfp.train.collectors.observation import Observation, json_observations, make_observations, text_observations
from zeus_kfp.train.collectors.spec import (
    AUTO_PORT,
    COLLECTOR_KINDS,
    PARAM,
    CollectorSpec,
    CollectorSpecError,
)
from zeus_kfp.train.collectors.stdout import StdoutCollector, master_line

__all__ = [
    "AUTO_PORT",
    "COLLECTOR_KINDS",
    "PARAM",
    "Collector",
    "CollectorError",
    "CollectorSpec",
    "CollectorSpecError",
    "Observation",
    "StdoutCollector",
    "json_observations",
    "make_observations",
    "master_line",
    "open_collector",
    "resolve_path",
    "text_observations",
]


def resolve_path(path: str, placeholders: dict[str, str], work_dir: Path) -> Path:
    """A spec path with {log_dir}/{work_dir} filled in; relative to the script's working directory."""
    for key, value in placeholders.items():
        path = path.replace("{" + key + "}", value)
    resolved = Path(path).expanduser()
    return resolved if resolved.is_absolute() else work_dir / resolved


def open_collector(
    spec: CollectorSpec,
    *,
    work_dir: Path,
    placeholders: dict[str, str],
    port: int | None = None,
    metric_name: str = "",
) -> Collector | None:
    """The collector `spec` describes for one trial (None for kind "none"); `port` replaces port 0;
    `metric_name` is the job's (a tfEvent collector finds it in every subdirectory, as Katib's does)."""
    if spec.kind == "stdOut":
        return StdoutCollector(spec.patterns())
    if spec.kind == "file":
        from zeus_kfp.train.collectors.file import FileCollector

        return FileCollector(resolve_path(spec.path or "", placeholders, work_dir), spec.file_format, spec.patterns())
    if spec.kind == "tfEvent":
        from zeus_kfp.train.collectors.tfevent import TFEventCollector

        return TFEventCollector(resolve_path(spec.path or "", placeholders, work_dir), metric_name)
    if spec.kind == "prometheus":
        from zeus_kfp.train.collectors.prometheus import PrometheusCollector

        return PrometheusCollector(port or spec.http_port, spec.http_path, spec.interval_s)
    return None
