"""One protocol for every way a trial runs: `TrialRunner`, which the train step calls in one place
(zeus_kfp.steps.train.train) without caring where the trial runs.

Three implementations:
- `ScriptRunner` (launcher local or torchrun): the script runner on the step's own machine
  (zeus_kfp.train.runner); torchrun by wrapping the command in zeus_kfp.launch.torchrun, so timeouts, OOM detection
  and reading result.json stay the runner's;
- `ClusterRunner` (launcher trainjob or pytorchjob): a Kubeflow job, whose rank 0 hands its result back
  through the store (zeus_kfp.launch.cluster);
- zeus_kfp.simulate.trace_trial.TraceBackend (trial backend "trace:<workload>/<gpu>"): the trial replayed from the
  NSDI'23 traces, the simulator's own code.

What differs between them (the command, the collector, where the job runs) is the runner's configuration;
what a trial is (its batch size, threshold, seed, the profile it reuses, its work directory) is `run`'s
arguments; every one returns a zeus_kfp.job.TrialOutcome. The script and cluster runners also say where the
step's live-threshold feed writes while `run` runs (`threshold_sink`: the work directory's file, or the
trial's ConfigMap, zeus_kfp.launch.threshold_sink); a replayed trial has no such thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from zeus_kfp.job import JobSpec, TrialOutcome
from zeus_kfp.launch.cluster import run_cluster_trial, threshold_configmap
from zeus_kfp.launch.config import LaunchConfig, LaunchError
from zeus_kfp.launch.threshold_sink import FileSink, ThresholdConfigMap
from zeus_kfp.launch.torchrun import local_command
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.train.collectors import CollectorSpec
from zeus_kfp.train.live_threshold import LIVE_THRESHOLD_FILE
from zeus_kfp.train.runner import run_trial


class TrialRunner(Protocol):
    """Runs one trial of `spec` at `batch_size` in `work_dir` (its cwd; a replayed trial writes nothing),
    stopping early past `cost_threshold` (None: no early stop), the trial's own randomness seeded with
    `seed`, training at `reuse`'s stored profile (None: profile power limits first)."""

    def run(
        self,
        spec: JobSpec,
        *,
        batch_size: int,
        cost_threshold: float | None,
        seed: int | None,
        reuse: PowerProfile | None,
        work_dir: Path,
    ) -> TrialOutcome: ...


@dataclass(frozen=True)
class ScriptRunner:
    """The user's command on this machine (launcher local, or torchrun over its GPUs). `options`: more of
    run_trial's settings (warmup_iters, profile_iters, timeout_s, ...)."""

    config: LaunchConfig
    command: Sequence[str]
    zeus_aware: bool = True
    collector: CollectorSpec | None = None
    data_dir: str | None = None
    gpu: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)

    def threshold_sink(self, spec: JobSpec, work_dir: Path) -> FileSink:
        """The live threshold file in the trial's work directory (the script's cwd), handed to it by run_trial."""
        return FileSink(Path(work_dir) / LIVE_THRESHOLD_FILE)

    def run(
        self,
        spec: JobSpec,
        *,
        batch_size: int,
        cost_threshold: float | None,
        seed: int | None,
        reuse: PowerProfile | None,
        work_dir: Path,
    ) -> TrialOutcome:
        self.config.check_spec(spec)
        command = self.command
        if self.config.launcher == "torchrun":
            command = local_command(command, self.config.gpus_per_node)
        return run_trial(
            spec,
            batch_size=batch_size,
            cost_threshold=cost_threshold,
            command=command,
            work_dir=work_dir,
            zeus_aware=self.zeus_aware,
            data_dir=self.data_dir,
            gpu=self.gpu,
            collector=self.collector,
            reuse_profile=reuse,
            seed=seed,
            **self.options,
        )


@dataclass(frozen=True)
class ClusterRunner:
    """The user's command as a Kubeflow TrainJob or PyTorchJob, named after the trial's recurrence and
    attempt, its result handed back through the store at `store_uri`. `options`: more of
    run_cluster_trial's settings (warmup_iters, profile_iters, timeout_s, ...)."""

    config: LaunchConfig
    command: Sequence[str]
    store_uri: str
    recurrence_id: str
    attempt: int
    zeus_aware: bool = True
    gpu: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)
    _sinks: dict[str, ThresholdConfigMap] = field(default_factory=dict, compare=False, repr=False)

    def threshold_sink(self, spec: JobSpec, work_dir: Path) -> ThresholdConfigMap:
        """The trial's live-threshold ConfigMap: one object for the feed's writes and the launcher's create and
        delete (`run`), so a cluster that refuses it is said once, whichever meets the refusal first."""
        sink = threshold_configmap(self.config, spec, self.recurrence_id, self.attempt, self.options.get("api_client"))
        return self._sinks.setdefault(sink.name, sink)

    def run(
        self,
        spec: JobSpec,
        *,
        batch_size: int,
        cost_threshold: float | None,
        seed: int | None,
        reuse: PowerProfile | None,
        work_dir: Path,
    ) -> TrialOutcome:
        self.config.check_spec(spec)
        if not self.zeus_aware:
            raise LaunchError(
                "zeus_aware",
                self.zeus_aware,
                f"true for launcher {self.config.launcher!r}: on a cluster rank 0's ZeusDataLoader measures the "
                "trial (a plain script is measured from outside, which needs launcher local or torchrun)",
            )
        return run_cluster_trial(
            self.config,
            spec,
            batch_size=batch_size,
            cost_threshold=cost_threshold,
            command=self.command,
            store_uri=self.store_uri,
            recurrence_id=self.recurrence_id,
            attempt=self.attempt,
            work_dir=work_dir,
            gpu=self.gpu,
            reuse_profile=reuse,
            seed=seed,
            threshold=self.threshold_sink(spec, work_dir),
            **self.options,
        )


def launch_runner(
    config: LaunchConfig,
    *,
    command: Sequence[str],
    zeus_aware: bool = True,
    collector: CollectorSpec | None = None,
    data_dir: str | None = None,
    gpu: str = "auto",
    store_uri: str = "",
    recurrence_id: str = "",
    attempt: int = 1,
    **options: Any,
) -> ScriptRunner | ClusterRunner:
    """The runner of the user's command where `config` says. A cluster trial's runner takes no dataset path
    and no collector: the step's path means nothing in the pods (the script reads its own data), and a
    cluster trial is Zeus-aware (its run refuses a plain script), so there are no metrics to collect."""
    if not config.cluster:
        return ScriptRunner(
            config, command, zeus_aware=zeus_aware, collector=collector, data_dir=data_dir, gpu=gpu, options=options
        )
    return ClusterRunner(
        config,
        command,
        store_uri=store_uri,
        recurrence_id=recurrence_id,
        attempt=attempt,
        zeus_aware=zeus_aware,
        gpu=gpu,
        options=options,
    )
