"""Run one trial of a user's training command and turn whatever happens into a TrialResult.

Two kinds of script:

- Zeus-aware (uses ZeusDataLoader): the runner sets the ZEUS_* environment, the script
  profiles power limits, stops itself on target / max epochs / cost, and leaves result.json
  and profile.parquet in its log dir, which the runner reads back.
- Plain (Katib-style): a collector (zeus_kfp.train.collectors: stdout and stderr, a file, TFEvent files or a
  Prometheus endpoint, in Katib's metricsCollectorSpec shape) reads its metrics; the runner
  measures energy from outside, profiles power limits from outside when the metrics carry a
  step or epoch counter (zeus_kfp.train.progress), and stops the process (SIGTERM, then SIGKILL)
  when the target is reached, max epochs pass or the cost passes the threshold (zeus_kfp.train.plain).

Never raises for what the script does: a crash is status failed with the stderr tail in
`reason`, an out-of-memory death is status oom. Bad *arguments* do raise, naming the field.

Command arguments may contain {batch_size}, {data_dir}, {log_dir}, {work_dir} and
{metrics_port} (a prometheus collector's port), replaced per trial (a plain script learns its
batch size this way, as with Katib's trial parameters).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from zeus_kfp.job import JobSpec, JobSpecError, TrialOutcome, TrialResult, TrialStatus
from zeus_kfp.power.devices import open_gpu
from zeus_kfp.power.gpu import GPU, GPU_KINDS, GPUKindError, gpu_source, rest_limits
from zeus_kfp.power.monitor import EnergyMonitor, Measurement
from zeus_kfp.power.profile_params import MIN_WINDOW_ALLOWED, valid_min_window_s
from zeus_kfp.power.simulated import PowerModel, SimulatedGPU, epoch_samples_from_env
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train import artifacts
from zeus_kfp.train.artifacts import REUSE_PROFILE_FILE
from zeus_kfp.train.collectors import AUTO_PORT, CollectorError, CollectorSpec, open_collector
from zeus_kfp.train.env import TrialEnv
from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE
from zeus_kfp.train.plain import PlainTrial
from zeus_kfp.train.process import CapturedProcess, looks_like_oom
from zeus_kfp.train.progress import ProfilingOptions
from zeus_kfp.train.session import TRIAL_WINDOW

log = logging.getLogger(__name__)

LOG_SUBDIR = "logs"
RUNNER_FILES = frozenset({LOG_SUBDIR, REUSE_PROFILE_FILE, LIVE_THRESHOLD_FILE})  # what the runner puts in work_dir
METRICS_PORT_ENV = "ZEUS_METRICS_PORT"
UNBUFFERED_ENV = "PYTHONUNBUFFERED"  # a plain Python script's stdout, line by line into the pipe
PLAIN_KINDS_ALLOWED = "stdOut, file, tfEvent or prometheus for a plain script (none: a Zeus-aware script only)"
COMMAND_PLACEHOLDERS = ("batch_size", "data_dir", "log_dir", "work_dir", "metrics_port")  # what run_trial fills


def _substitute(command: Sequence[str], values: Mapping[str, str]) -> list[str]:
    out = []
    for arg in command:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        out.append(arg)
    return out


# zeus_kfp.launch fills the same placeholders for a cluster trial's pods (with the pods' own directories).
substitute_placeholders = _substitute


def _open_parent_gpu(kind: str, num_gpus: int) -> GPU:
    """The runner's own view of the GPUs. The simulated GPU here runs its model clock: it charges the work a
    plain script reports and nothing else (zeus_kfp.power.simulated, "Plain scripts"), so a script that never
    reports is charged nothing on it, as start-up is not: the model has no meter to read (a real GPU's
    counter measures such a trial whole)."""
    gpu = open_gpu(kind)
    if isinstance(gpu, SimulatedGPU):
        gpu.close()
        model = PowerModel(epoch_samples=epoch_samples_from_env())
        return SimulatedGPU(num_devices=num_gpus, model=model, clock="model")
    return gpu


def _free_port() -> int:
    """A port free on 127.0.0.1 now, for a prometheus collector with port 0 (the script binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _collector_spec(
    collector: CollectorSpec | Mapping | str | None, metric_patterns: Sequence[str] | None, metrics_file: str | None
) -> CollectorSpec:
    """The collector spec; the older `metric_patterns` / `metrics_file` arguments are shorthands for one."""
    if collector is not None:
        return CollectorSpec.parse(collector)
    if metrics_file:
        return CollectorSpec.parse(
            {"kind": "file", "source": {"fileSystemPath": {"path": metrics_file, "format": "json"}}}
        )
    return CollectorSpec.parse({"source": {"filter": {"metricsFormat": list(metric_patterns or [])}}})


def _validate(spec: JobSpec, batch_size: int, cost_threshold: float | None, command: Sequence[str], gpu: str) -> None:
    if batch_size not in spec.batch_sizes:
        raise JobSpecError("batch_size", batch_size, f"one of the job's batch_sizes {list(spec.batch_sizes)}")
    if cost_threshold is not None and not (isinstance(cost_threshold, (int, float)) and cost_threshold > 0):
        raise JobSpecError("cost_threshold", cost_threshold, "a positive number, or None for no early stop")
    if isinstance(command, str) or not command or not all(isinstance(a, str) for a in command):
        raise JobSpecError("command", command, "a non-empty list of strings (program and arguments)")
    if gpu not in GPU_KINDS:
        raise GPUKindError(gpu)


def run_trial(
    spec: JobSpec,
    *,
    batch_size: int,
    cost_threshold: float | None,
    command: Sequence[str],
    work_dir: Path,
    zeus_aware: bool = True,
    data_dir: str | os.PathLike[str] | None = None,
    gpu: str = "auto",
    metric_patterns: Sequence[str] | None = None,
    metrics_file: str | None = None,
    collector: CollectorSpec | Mapping | str | None = None,
    env: Mapping[str, str] | None = None,
    warmup_iters: int = 10,
    profile_iters: int = 40,
    min_window_s: float | None = None,
    reuse_profile: PowerProfile | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
    term_grace_s: float = 5.0,
    poll_s: float = 0.05,
) -> TrialOutcome:
    """Run `command` as one trial of `spec` at `batch_size`; see the module docstring.

    Args:
        spec: The job: its target, max_epochs and cost function.
        batch_size: The trial's batch size ({batch_size}, ZEUS_BATCH_SIZE).
        cost_threshold: Stop once the next epoch would pass this cost in joules (None: no early stop).
        command: Program and arguments, with the placeholders of the module docstring.
        work_dir: The trial's directory (its cwd); {log_dir} is work_dir/logs.
        zeus_aware: The script uses ZeusDataLoader and reports by itself (False: a plain script).
        data_dir: The recurrence's data ({data_dir}, ZEUS_DATA_DIR).
        gpu: The GPU backend: auto, nvml, zeusd or simulated.
        metric_patterns: Shorthand for the stdOut collector with these patterns.
        metrics_file: Shorthand for the file collector over this JSON-lines file.
        collector: How a plain script's metrics are collected: a CollectorSpec, or its dict / JSON / YAML
            (Katib's metricsCollectorSpec; default stdout with Katib's name=value pattern).
        env: More environment variables for the script.
        warmup_iters: Warm-up steps per power limit (Zeus: 10).
        profile_iters: Measured steps per power limit (Zeus: 40).
        min_window_s: Shortest measurement window in seconds (None: the GPU backend's).
        reuse_profile: A stored power profile to train at instead of profiling.
        seed: The trial's own seed (ZEUS_SEED).
        timeout_s: Stop the script after this many seconds (None: no limit); the trial is failed.
        term_grace_s: Seconds between SIGTERM and SIGKILL when the script is stopped.
        poll_s: How often the runner looks at the script (its exit, the stop conditions, the timeout).

    Returns:
        The TrialOutcome: the result, the measured profile, the saved model and the output's tail.
    """
    _validate(spec, batch_size, cost_threshold, command, gpu)
    if not valid_min_window_s(min_window_s):
        raise JobSpecError("min_window_s", min_window_s, MIN_WINDOW_ALLOWED)
    collector_spec = _collector_spec(collector, metric_patterns, metrics_file)
    if not zeus_aware and collector_spec.kind == "none":
        raise JobSpecError("metrics_collector.kind", "none", PLAIN_KINDS_ALLOWED)
    data_dir = str(data_dir) if data_dir else None
    work_dir = Path(work_dir).resolve()
    log_dir = work_dir / LOG_SUBDIR
    log_dir.mkdir(parents=True, exist_ok=True)
    profile_path = None
    if reuse_profile is not None and not reuse_profile.is_empty:
        profile_path = str(work_dir / REUSE_PROFILE_FILE)
        reuse_profile.to_parquet(profile_path)
    trial_env = TrialEnv.for_trial(
        spec,
        batch_size=batch_size,
        log_dir=str(log_dir),
        cost_threshold=cost_threshold,
        warmup_iters=warmup_iters,
        profile_iters=profile_iters,
        min_window_s=min_window_s,
        data_dir=data_dir,
        gpu=gpu,
        profile_path=profile_path,
        seed=seed,
        threshold_file=str(work_dir / LIVE_THRESHOLD_FILE),
    )
    port = _free_port() if collector_spec.kind == "prometheus" and collector_spec.http_port == AUTO_PORT else None
    child_env = {**os.environ, **trial_env.to_env(), **({METRICS_PORT_ENV: str(port)} if port else {}), **(env or {})}
    if not zeus_aware:  # its metrics must arrive as it prints them, not when a pipe's buffer fills (8 KiB)
        child_env.setdefault(UNBUFFERED_ENV, "1")
    placeholders = {"log_dir": str(log_dir), "work_dir": str(work_dir)}
    argv = _substitute(
        command,
        {"batch_size": str(batch_size), "data_dir": data_dir or "", **placeholders, "metrics_port": str(port or "")},
    )
    parent_gpu = _open_parent_gpu(gpu, spec.num_gpus)
    if rest_limits(parent_gpu):  # a trial killed mid-profile left it throttled (zeus_kfp.power.gpu.resting_limits)
        log.warning("zeus: the GPU was not at its resting power limit when the trial started; it is now")
    monitor = EnergyMonitor(parent_gpu, indices=range(min(spec.num_gpus, parent_gpu.device_count())))
    plain = None
    if not zeus_aware:
        plain = PlainTrial(
            spec,
            batch_size=batch_size,
            cost_threshold=cost_threshold,
            collector_spec=collector_spec,
            collector=open_collector(  # type: ignore[arg-type]
                collector_spec, work_dir=work_dir, placeholders=placeholders, port=port, metric_name=spec.metric_name
            ),
            gpu=parent_gpu,
            monitor=monitor,
            options=ProfilingOptions(warmup_iters, profile_iters, min_window_s),
            reuse=reuse_profile,
            threshold_file=trial_env.threshold_file,
        )
    try:
        return _Run(spec, batch_size, plain, parent_gpu, monitor, log_dir).run(
            argv, work_dir, child_env, timeout_s, term_grace_s, poll_s
        )
    finally:
        if plain is not None:
            plain.close()
        rest_limits(parent_gpu)  # whatever ended the script: a SIGKILLed Zeus-aware one could not restore
        parent_gpu.close()


class _Run:
    """One trial's supervision loop (kept as an object so the stop rules read top to bottom)."""

    def __init__(
        self, spec: JobSpec, batch_size: int, plain: PlainTrial | None, gpu: GPU, monitor: EnergyMonitor, log_dir: Path
    ) -> None:
        self.spec, self.batch_size, self.log_dir = spec, batch_size, log_dir
        self.plain = plain  # None: a Zeus-aware script, which reports by itself
        self.zeus_aware = plain is None
        self.monitor = monitor
        self.gpu = gpu
        self.status: TrialStatus | None = None
        self.reason = ""

    def _on_line(self, line: str) -> None:
        """A line of the script's stdout or stderr (both: zeus_kfp.train.collectors.stdout)."""
        if self.plain is not None:
            self.plain.on_line(line)

    def run(
        self,
        argv: list[str],
        work_dir: Path,
        child_env: dict[str, str],
        timeout_s: float | None,
        grace_s: float,
        poll_s: float,
    ) -> TrialOutcome:
        self.monitor.begin_window(TRIAL_WINDOW)
        started = time.monotonic()
        try:
            if self.plain is not None:
                self.plain.claim(self.log_dir)  # the collector's source becomes this trial's own
            proc = CapturedProcess(argv, cwd=work_dir, env=child_env, on_line=self._on_line)
        except (OSError, CollectorError) as exc:
            measured = self.monitor.end_window(TRIAL_WINDOW)
            return self._outcome(TrialStatus.FAILED, f"could not start {argv[0]!r}: {exc}", measured, "")
        try:
            while proc.poll() is None:
                if self.plain is not None and self.plain.poll() is not None:
                    proc.stop(grace_s)
                    break
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    self.status, self.reason = TrialStatus.FAILED, f"timed out after {timeout_s:g} s"
                    proc.stop(grace_s)
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt as stop:  # SIGINT or SIGTERM (zeus_kfp.signals.Interrupted): measured like any end
            self.status, self.reason = TrialStatus.FAILED, f"interrupted by {getattr(stop, 'signal_name', 'SIGINT')}"
            proc.stop(grace_s)
            stop.outcome = self._end(proc)  # type: ignore[attr-defined]  (the caller records it)
            raise
        return self._end(proc)

    def _end(self, proc: CapturedProcess) -> TrialOutcome:
        """The script has ended (or been stopped): its outcome, measured up to its end."""
        if self.zeus_aware:
            measured = self.monitor.end_window(TRIAL_WINDOW)
        returncode = proc.wait()
        proc.join_output()
        tail = proc.tail_text()
        oom = looks_like_oom(tail, returncode, proc.killed_by_us)
        if self.plain is None:
            return self._zeus_outcome(returncode, oom, proc, measured, tail)
        if self.status is not None:
            self.plain.stop(self.status, self.reason)
        self.plain.finish(returncode, oom, proc.stderr_text())  # the collector's last read: before the window ends
        measured = self.monitor.end_window(TRIAL_WINDOW)
        self.plain.collector.keep(self.log_dir)  # what was read, in the trial's log
        return self._outcome(self.plain.status or TrialStatus.FAILED, self.plain.reason, measured, tail)

    def _zeus_outcome(
        self, returncode: int, oom: bool, proc: CapturedProcess, measured: Measurement, tail: str
    ) -> TrialOutcome:
        data = artifacts.read_result_json(self.log_dir)
        if data is None:  # no result written: what the runner measured from outside
            status = self.status or (TrialStatus.OOM if oom else TrialStatus.FAILED)
            reason = self.reason or f"exit code {returncode}, no result.json: {proc.stderr_text()}"
            return self._outcome(status, reason, measured, tail)
        result = artifacts.result_from_json(self.spec, data)
        if self.status is not None:  # we stopped it (timeout, interrupted): its own figures, our reason
            reason = "; ".join(part for part in (self.reason, result.reason) if part)
            result = dataclasses.replace(result, status=self.status, reason=reason)
        elif result.status is TrialStatus.FAILED or returncode != 0:
            status = TrialStatus.OOM if oom else TrialStatus.FAILED
            reason = f"{result.reason}; exit code {returncode}: {proc.stderr_text()}".strip("; ")
            result = dataclasses.replace(result, status=status, reason=reason)  # same time/energy, same cost
        return TrialOutcome(result, artifacts.read_profile(self.log_dir), artifacts.model_path(self.log_dir), tail)

    def _outcome(self, status: TrialStatus, reason: str, measured: Measurement, tail: str) -> TrialOutcome:
        plain = self.plain
        metrics = plain.metrics if plain is not None else []
        notes = [reason, *(plain.notes() if plain is not None else [])]
        result = TrialResult.build(
            self.spec,
            batch_size=self.batch_size,
            status=status,
            time_s=measured.time_s,
            energy_j=measured.total_energy_j,
            num_epochs=len(metrics),
            power_limit_w=plain.power_limit() if plain is not None else self.gpu.get_power_limit(0),
            metric=metrics[-1] if metrics else None,
            simulated=self.gpu.simulated,
            reason="; ".join(note for note in notes if note),
            source=gpu_source(self.gpu),
        )
        profiling = plain.progress.summary() if plain is not None else None
        artifacts.write_result(self.log_dir, result, metrics=metrics, gpu_kind=self.gpu.kind, profiling=profiling)
        profile = plain.progress.profile() if plain is not None else artifacts.read_profile(self.log_dir)
        return TrialOutcome(result, profile, artifacts.model_path(self.log_dir), tail)
