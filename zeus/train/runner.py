"""Run one trial of a user's training command and turn whatever happens into a TrialResult.

Two kinds of script:

- Zeus-aware (uses ZeusDataLoader): the runner sets the ZEUS_* environment, the script
  profiles power limits, stops itself on target / max epochs / cost, and leaves result.json
  and profile.csv in its log dir, which the runner reads back.
- Plain (Katib-style): the runner reads metrics from stdout (Katib's pattern or the user's)
  or from a JSON-lines file, measures energy from outside over the whole run, and stops the
  process (SIGTERM, then SIGKILL) when the target is reached, max epochs pass or the cost
  passes the threshold.

Never raises for what the script does: a crash is status failed with the stderr tail in
`reason`, an out-of-memory death is status oom. Bad *arguments* do raise, naming the field.

Command arguments may contain {batch_size}, {data_dir}, {log_dir} and {work_dir}, replaced
per trial (a plain script learns its batch size this way, as with Katib's trial parameters).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from zeus.job import JobSpec, JobSpecError, TrialResult, TrialStatus
from zeus.power.gpu import GPU, GPU_KINDS, GPUKindError, gpu_source, open_gpu
from zeus.power.monitor import EnergyMonitor, Measurement
from zeus.power.profiler import MIN_WINDOW_ALLOWED, profile_frame, valid_min_window_s
from zeus.power.simulated import SimulatedGPU
from zeus.train import artifacts
from zeus.train.env import TrialEnv
from zeus.train.metrics import JsonLinesTail, compile_patterns, parse_line
from zeus.train.process import CapturedProcess, looks_like_oom

log = logging.getLogger(__name__)

LOG_SUBDIR = "logs"


@dataclass(frozen=True)
class TrialOutcome:
    """A finished trial: its result, the power profile (may be empty), the saved model, the output tail."""

    result: TrialResult
    profile: pd.DataFrame
    model_path: Path | None
    log_tail: str


def _substitute(command: Sequence[str], values: Mapping[str, str]) -> list[str]:
    out = []
    for arg in command:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        out.append(arg)
    return out


# zeus.launch fills the same placeholders for a cluster trial's pods (with the pods' own directories).
substitute_placeholders = _substitute


def _open_parent_gpu(kind: str, num_gpus: int) -> GPU:
    """The runner's own view of the GPUs; a simulated GPU here runs on wall time (it watches another process)."""
    gpu = open_gpu(kind)
    if gpu.simulated:
        gpu.close()
        return SimulatedGPU(num_devices=num_gpus, clock="wall")
    return gpu


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
    env: Mapping[str, str] | None = None,
    warmup_iters: int = 10,
    profile_iters: int = 40,
    min_window_s: float | None = None,
    reuse_profile: pd.DataFrame | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
    term_grace_s: float = 5.0,
    poll_s: float = 0.05,
) -> TrialOutcome:
    """Run `command` as one trial of `spec` at `batch_size`; see the module docstring."""
    _validate(spec, batch_size, cost_threshold, command, gpu)
    if not valid_min_window_s(min_window_s):
        raise JobSpecError("min_window_s", min_window_s, MIN_WINDOW_ALLOWED)
    patterns = compile_patterns(metric_patterns)
    data_dir = str(data_dir) if data_dir else None
    work_dir = Path(work_dir).resolve()
    log_dir = work_dir / LOG_SUBDIR
    log_dir.mkdir(parents=True, exist_ok=True)
    profile_path = None
    if reuse_profile is not None and not reuse_profile.empty:
        profile_path = str(work_dir / "reuse_profile.csv")
        profile_frame(reuse_profile.to_dict("records")).to_csv(profile_path, index=False)
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
    )
    child_env = {**os.environ, **trial_env.to_env(), **(env or {})}
    argv = _substitute(
        command,
        {"batch_size": str(batch_size), "data_dir": data_dir or "", "log_dir": str(log_dir), "work_dir": str(work_dir)},
    )
    parent_gpu = _open_parent_gpu(gpu, spec.num_gpus)
    try:
        return _Run(spec, batch_size, cost_threshold, zeus_aware, patterns, metrics_file, parent_gpu, log_dir).run(
            argv, work_dir, child_env, timeout_s, term_grace_s, poll_s
        )
    finally:
        parent_gpu.close()


class _Run:
    """One trial's supervision loop (kept as an object so the stop rules read top to bottom)."""

    def __init__(
        self,
        spec: JobSpec,
        batch_size: int,
        cost_threshold: float | None,
        zeus_aware: bool,
        patterns: list[re.Pattern[str]],
        metrics_file: str | None,
        gpu: GPU,
        log_dir: Path,
    ) -> None:
        self.spec, self.batch_size, self.threshold = spec, batch_size, cost_threshold
        self.zeus_aware, self.patterns, self.log_dir = zeus_aware, patterns, log_dir
        self.metrics_tail = JsonLinesTail(log_dir.parent / metrics_file) if metrics_file else None
        self.monitor = EnergyMonitor(gpu, indices=range(min(spec.num_gpus, gpu.device_count())))
        self.gpu = gpu
        self.values: queue.Queue[float] = queue.Queue()
        self.metrics: list[float] = []
        self.status: TrialStatus | None = None
        self.reason = ""

    def _on_line(self, line: str) -> None:
        if self.metrics_tail is None:
            for name, value in parse_line(line, self.patterns):
                if name == self.spec.metric_name:
                    self.values.put(value)

    def _drain(self) -> None:
        if self.metrics_tail is not None:
            for name, value in self.metrics_tail.read():
                if name == self.spec.metric_name:
                    self.values.put(value)
        while self.status is None and not self.values.empty():
            value = self.values.get()
            self.metrics.append(value)
            if self.spec.reached(value):
                self.status = TrialStatus.REACHED
            elif len(self.metrics) >= self.spec.max_epochs:
                self.status = TrialStatus.NOT_REACHED
                self.reason = f"target not reached in {self.spec.max_epochs} epochs"

    def _check_cost(self) -> None:
        if self.status is None and self.threshold is not None:
            m = self.monitor.peek("trial")
            cost = self.spec.cost(m.total_energy_j, m.time_s)
            if cost > self.threshold:
                self.status = TrialStatus.COST_EXCEEDED
                self.reason = f"stopped: cost {cost:.1f} passed the threshold {self.threshold:.1f}"

    def run(
        self,
        argv: list[str],
        work_dir: Path,
        child_env: dict[str, str],
        timeout_s: float | None,
        grace_s: float,
        poll_s: float,
    ) -> TrialOutcome:
        self.monitor.begin_window("trial")
        started = time.monotonic()
        try:
            proc = CapturedProcess(argv, cwd=work_dir, env=child_env, on_stdout_line=self._on_line)
        except OSError as exc:
            measured = self.monitor.end_window("trial")
            return self._outcome(TrialStatus.FAILED, f"could not start {argv[0]!r}: {exc}", measured, "")
        while proc.poll() is None:
            if not self.zeus_aware:
                self._drain()
                self._check_cost()
                if self.status is not None:
                    proc.stop(grace_s)
                    break
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                self.status, self.reason = TrialStatus.FAILED, f"timed out after {timeout_s:g} s"
                proc.stop(grace_s)
                break
            time.sleep(poll_s)
        measured = self.monitor.end_window("trial")
        returncode = proc.wait()
        proc.join_output()
        if not self.zeus_aware:
            self._drain()
        tail = proc.tail_text()
        oom = looks_like_oom(tail, returncode, proc.killed_by_us)
        if self.zeus_aware:
            return self._zeus_outcome(returncode, oom, proc, measured, tail)
        if self.status is None:
            if returncode != 0:
                self.status = TrialStatus.OOM if oom else TrialStatus.FAILED
                self.reason = f"exit code {returncode}: {proc.stderr_text()}"
            elif not self.metrics:
                self.status = TrialStatus.FAILED
                self.reason = f"the script printed no {self.spec.metric_name!r} values"
            else:
                self.status = TrialStatus.NOT_REACHED
                self.reason = f"the script ended after {len(self.metrics)} epochs without reaching the target"
        return self._outcome(self.status, self.reason, measured, tail)

    def _zeus_outcome(
        self, returncode: int, oom: bool, proc: CapturedProcess, measured: Measurement, tail: str
    ) -> TrialOutcome:
        data = artifacts.read_result_json(self.log_dir)
        if data is None or self.status is not None:  # no result written, or we had to stop it (timeout)
            status = self.status or (TrialStatus.OOM if oom else TrialStatus.FAILED)
            reason = self.reason or f"exit code {returncode}, no result.json: {proc.stderr_text()}"
            return self._outcome(status, reason, measured, tail)
        result = artifacts.result_from_json(self.spec, data)
        if result.status is TrialStatus.FAILED or returncode != 0:
            status = TrialStatus.OOM if oom else TrialStatus.FAILED
            reason = f"{result.reason}; exit code {returncode}: {proc.stderr_text()}".strip("; ")
            result = dataclasses.replace(result, status=status, reason=reason)  # same time/energy, same cost
        return TrialOutcome(result, artifacts.read_profile(self.log_dir), artifacts.model_path(self.log_dir), tail)

    def _outcome(self, status: TrialStatus, reason: str, measured: Measurement, tail: str) -> TrialOutcome:
        result = TrialResult.build(
            self.spec,
            batch_size=self.batch_size,
            status=status,
            time_s=measured.time_s,
            energy_j=measured.total_energy_j,
            num_epochs=len(self.metrics),
            power_limit_w=self.gpu.get_power_limit(0),
            metric=self.metrics[-1] if self.metrics else None,
            simulated=self.gpu.simulated,
            reason=reason,
            source=gpu_source(self.gpu),
        )
        artifacts.write_result(self.log_dir, result, metrics=self.metrics, gpu_kind=self.gpu.kind)
        profile = artifacts.read_profile(self.log_dir) if self.zeus_aware else profile_frame([])
        return TrialOutcome(result, profile, artifacts.model_path(self.log_dir), tail)
