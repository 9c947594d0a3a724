"""The train step: one trial of an attempt, what the KFP component of the same name calls (the attempt's
bandit step before it, zeus_kfp.steps.bandit; its feedback step after it, zeus_kfp.steps.feedback).

Train reads the store, for a script on its own machine, to follow the job's early stop while the trial runs
(zeus_kfp.steps.threshold_feed: the mid-trial early stop, written for the script to read: a file, or for a
cluster trial a ConfigMap its pods mount; a store it cannot read changes nothing). Its result goes to feedback
through KFP, which records it. It writes the store once, only when it is stopped (SIGTERM, SIGINT: a run
cancelled, a pod evicted, a Ctrl-C): the steps after it will not run then, so it records its own trial,
failed, with the energy and time measured up to the stop and the profile measured so far, as feedback
would (the same result twice is a no-op, so a feedback that does run changes nothing). A stopped run may have
closed the step's output already: what it prints then is lost, and never fails the step.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Protocol

from zeus_kfp.errors import FieldError
from zeus_kfp.job import JobSpec, TrialResult
from zeus_kfp.launch.trial_runner import ClusterRunner, ScriptRunner, TrialRunner, launch_runner
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.signals import Interrupted, interruptible, stop_children
from zeus_kfp.steps.abandoned import (
    abandoned_result,
)
from zeus_kfp.steps.inputs import check_trial_inputs
from zeus_kfp.steps.keep import DELETED_NOTE, copy_kept, deleted_note, kept_files, left_behind
from zeus_kfp.steps.params import (
    PROFILE_KIND,
    PYTHON_TOKEN,
    resolve_store_uri,
    threshold_from_param,
)
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.threshold_feed import ThresholdFeed
from zeus_kfp.steps.trial_files import TRIAL_OUTPUT_FILES, FileArtifact, finish_log, keep_trial_log, say_where
from zeus_kfp.store import open_store
from zeus_kfp.train.runner import LOG_SUBDIR, RUNNER_FILES


class MetricsSink(Protocol):
    """What train logs numbers to (a KFP Metrics artifact has this shape)."""

    def log_metric(self, metric: str, value: float) -> None: ...


@reported("train", attempt=lambda request, **kwargs: request.attempt)
def train(
    request: TrialRequest,
    *,
    data_dir: str,
    profile: FileArtifact,
    metrics: MetricsSink,
    model: FileArtifact,
    trial_log: FileArtifact | None = None,
    reuse_profile_path: str = "",
    gpu: str = "auto",
) -> TrialResult:
    """Run the trial `request` asks for, write its profile, metrics, model and log, and return its result.

    trial_backend "script" runs the user's `command` (which may use "{python}" for this step's
    interpreter, besides run_trial's {batch_size}, {data_dir}, {log_dir} and {work_dir}; the script
    gets ZEUS_SEED=`seed`, see zeus_kfp.train.env); "trace:<workload>/<gpu>" replays the trial from the
    NSDI'23 traces with `seed` (zeus_kfp.simulate.trace_trial), the same code the simulator runs.
    `reuse_profile_path` holds the stored profile to train at (the bandit step's choice), or an
    empty table: profile this trial. `metrics_collector` is a plain script's collector spec (JSON or
    YAML text in the shape of Katib's metricsCollectorSpec, zeus_kfp.train.collectors; "" for stdout with
    Katib's pattern, or `metric_pattern` when given).

    `launcher` (local | torchrun | trainjob | pytorchjob), `num_nodes`, `gpus_per_node` and `trainjob_runtime`
    say where the script runs (zeus_kfp.launch); a cluster launcher hands files over through the store at
    `store_uri`, under the trial's `recurrence_id` and `attempt`, which also label its Kubernetes job.
    Whichever it is, the trial runs through one zeus_kfp.launch.trial_runner.TrialRunner call, in a temporary work
    directory.

    `trial_log` (a directory) receives the trial's log: the script's stdout and stderr, result.json,
    profile.parquet, what the metrics collector read and whatever else the script wrote to {log_dir}
    except the model (which goes to `model`); the step prints where both went.

    Never raises for a failing script or for bad inputs (zeus_kfp.steps.inputs names the field): the trial
    comes back FAILED with the script's error or the input's as its reason, so feedback records it and
    the recurrence ends there. SIGINT or SIGTERM (a stopped pod, a Ctrl-C) stops the script and its
    children and returns the trial FAILED, "interrupted by SIGTERM".
    """
    spec = JobSpec.from_dict(json.loads(request.spec_json))
    batch_size = int(request.batch_size)
    log_dir = Path(trial_log.path) if trial_log is not None else None
    started, cpu_before = time.perf_counter(), _children_cpu_s()
    measured: PowerProfile | None = None
    reuse: PowerProfile | None = None
    try:
        runner = _runner(request, data_dir=data_dir, gpu=gpu)
        reuse = _read_reuse(reuse_profile_path)
        with interruptible():
            result, measured = _run(
                runner,
                spec,
                model,
                log_dir,
                batch_size=batch_size,
                cost_threshold=threshold_from_param(request.cost_threshold),
                seed=request.seed,
                reuse=reuse,
                feed=_feed(runner, request, spec),
                keep=request.keep,
            )
    except Interrupted as sig:  # the pod or the local run is stopping: end the script, record the trial failed
        stop_children()
        outcome = getattr(sig, "outcome", None)  # the runner's, measured up to the stop (zeus_kfp.train.runner)
        if outcome is None:
            result, measured = abandoned_result(spec, batch_size, f"interrupted by {sig.signal_name}"), None
        else:
            result = outcome.result
            measured = outcome.profile if _measured_more(outcome.profile, reuse) else None
        _record_stopped(request, result, measured)
        _write_model(None, model)
        _say(f"train: interrupted by {sig.signal_name}: the script was stopped; the trial is recorded failed")
    except FieldError as err:  # an input the step refuses: the trial fails with it, nothing ran
        result, measured = abandoned_result(spec, batch_size, f"invalid input, the trial did not run: {err}"), None
        _write_model(None, model)
        print(f"train: {result.reason}")
    wall_s, cpu_s = time.perf_counter() - started, _children_cpu_s() - cpu_before
    _write_profile(measured if measured is not None else PowerProfile.empty(), profile, reused=reuse)
    if trial_log is not None:
        finish_log(trial_log, result)
    say_where(model, trial_log)
    for name, value in (
        ("time_s", result.time_s),
        ("energy_j", result.energy_j),
        ("cost", result.cost),
        ("epochs", result.num_epochs),
        ("batch_size", result.batch_size),
        ("reached", float(result.reached)),
        ("simulated", float(result.simulated)),  # 1.0: energy and time are simulated (see result.source)
        ("wall_s", wall_s),  # real seconds of the trial (time_s is simulated without a GPU)
        ("script_cpu_s", cpu_s),  # CPU seconds of the script: lets benchmarks split off orchestration
    ):
        metrics.log_metric(name, float(value))
    if result.metric is not None:
        metrics.log_metric(spec.metric_name, float(result.metric))
    if result.power_limit_w is not None:
        metrics.log_metric("power_limit_w", float(result.power_limit_w))
    return result


def _record_stopped(request: TrialRequest, result: TrialResult, measured: PowerProfile | None) -> None:
    """The stopped trial's result (and the profile it measured) in the store, as feedback would record them (the
    module docstring); a store that cannot take them is said, not raised: the step is stopping."""
    try:
        store = open_store(resolve_store_uri(request.store_uri))
        job_id = JobSpec.from_dict(json.loads(request.spec_json)).job_id
        store.finish_trial(job_id, request.recurrence_id, int(request.attempt), result)
        if measured is not None and not measured.is_empty:
            store.write_profile(job_id, request.recurrence_id, int(request.attempt), measured)
    except Exception as exc:  # the step is stopping: what it could not record, the run's own cleanup does
        _say(f"train: could not record the stopped trial in the store: {exc}")


def _say(line: str) -> None:
    """Print a line of a stopping step: a run that stopped may have closed the step's output (module docstring)."""
    with contextlib.suppress(OSError):
        print(line, flush=True)


def _runner(request: TrialRequest, *, data_dir: str, gpu: str) -> TrialRunner:
    """Where the request's trial runs: the trace it replays, or the user's command where its launcher says,
    "{python}" in it this step's interpreter (`python` in a cluster trial's pods). FieldError (naming the field)
    for an input the step refuses."""
    inputs = check_trial_inputs(
        command=request.command,
        zeus_aware=request.zeus_aware,
        metric_pattern=request.metric_pattern,
        metrics_collector=request.metrics_collector,
        trial_backend=request.trial_backend,
        launcher=request.launcher,
        num_nodes=request.num_nodes,
        gpus_per_node=request.gpus_per_node,
        runtime=request.trainjob_runtime,
        keep=request.keep,
    )
    if inputs.backend is not None:
        return inputs.backend
    python = "python" if inputs.launch.cluster else sys.executable
    return launch_runner(
        inputs.launch,
        command=[str(part).replace(PYTHON_TOKEN, python) for part in request.command],
        zeus_aware=request.zeus_aware,
        collector=inputs.collector,
        data_dir=data_dir or None,
        gpu=gpu,
        store_uri=resolve_store_uri(request.store_uri),
        recurrence_id=request.recurrence_id,
        attempt=int(request.attempt),
    )


def _run(
    runner: TrialRunner,
    spec: JobSpec,
    model: FileArtifact,
    keep_log: Path | None,
    *,
    batch_size: int,
    cost_threshold: float | None,
    seed: int,
    reuse: PowerProfile | None,
    feed: Callable[[float | None, Path], ThresholdFeed] | None = None,
    keep: str = "",
) -> tuple[TrialResult, PowerProfile | None]:
    """One trial through `runner`: its result and the profile to store (None when it trained at a reused
    final profile, which is not stored again; an unfinished one it continued is, grown: `_measured_more`).
    The trial's work directory is temporary: its log is copied to
    `keep_log` first (None: not kept); its model, if it saved one, to `model`. `feed(dispatched, work_dir)` keeps
    the trial's live threshold while it runs."""
    with tempfile.TemporaryDirectory(prefix="zeus-trial-") as work_dir:
        try:
            with feed(cost_threshold, Path(work_dir)) if feed else nullcontext():
                outcome = runner.run(
                    spec,
                    batch_size=batch_size,
                    cost_threshold=cost_threshold,
                    seed=seed,
                    reuse=reuse,
                    work_dir=Path(work_dir),
                )
            _keep_model(Path(work_dir), keep, outcome.model_path, model)
        finally:
            if keep_log is not None:
                keep_trial_log(Path(work_dir), keep_log)
    return outcome.result, (outcome.profile if _measured_more(outcome.profile, reuse) else None)


def _measured_more(measured: PowerProfile | None, reuse: PowerProfile | None) -> bool:
    """Whether the trial measured a profile to store: always when it reused none; when it continued an
    unfinished one (zeus_kfp.power.search), the grown profile (the stored rows and its own) is stored as its
    own, so the next trial continues from there; a trial that trained at a final profile stores nothing; one on
    another GPU model than the stored profile's profiled afresh, and stores its own."""
    if measured is None or reuse is None:
        return measured is not None
    if measured.gpu != reuse.gpu:  # measured on another GPU model than the stored one: a profile of its own
        return not measured.is_empty
    return int(measured.train_rows().sum()) > int(reuse.train_rows().sum())


def _feed(runner: TrialRunner, request: TrialRequest, spec: JobSpec) -> Callable | None:
    """The live threshold feed (zeus_kfp.steps.threshold_feed), which reads the job's store at `store_uri` itself and
    writes where the runner says: the work directory's file for a script on this machine, the trial's ConfigMap
    for a cluster trial. None for a replayed trial (its outcome is computed at once: the simulator models the
    live stop)."""
    if not isinstance(runner, (ScriptRunner, ClusterRunner)):
        return None

    def feed(dispatched: float | None, work_dir: Path) -> ThresholdFeed:
        sink = runner.threshold_sink(spec, work_dir)
        return ThresholdFeed(request.store_uri, spec, dispatched, sink, policy=request.policy)

    return feed


def _read_reuse(path: str) -> PowerProfile | None:
    """The stored profile the bandit step handed over, with the recurrence and trial that measured it, or None
    (no file, or an empty table: profile)."""
    if not path or not Path(path).is_file():
        return None
    reuse = PowerProfile.read_parquet(path)
    return None if reuse.is_empty else reuse


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _write_profile(measured: PowerProfile, artifact: FileArtifact, reused: PowerProfile | None) -> None:
    """The JIT profile the trial measured as Parquet, marked simulated when any row is (figures from no
    real GPU); empty when the trial trained at a reused stored profile (metadata "reused": True)."""
    measured.to_parquet(artifact.path)
    artifact.metadata["kind"] = PROFILE_KIND
    artifact.metadata["rows"] = len(measured)
    artifact.metadata["simulated"] = measured.simulated
    artifact.metadata["reused"] = reused is not None


def _keep_model(work_dir: Path, keep: str, model_path: Path | None, artifact: FileArtifact) -> None:
    """The Model artifact: what `keep` matches in the work directory (zeus_kfp.steps.keep), else the model the
    script wrote to {log_dir}/model.pt; with neither, the files about to be deleted are named (the trial's
    log has them in deleted-files.txt, which `run` reads back)."""
    kept = kept_files(work_dir, keep)
    if kept:
        copy_kept(kept, work_dir, Path(artifact.path))
        artifact.metadata["written"] = True
        print(f"train: kept {', '.join(p.relative_to(work_dir).as_posix() for p in kept)} as the model")
        return
    _write_model(model_path, artifact)
    stray = left_behind(work_dir, kept, {*RUNNER_FILES, *TRIAL_OUTPUT_FILES})
    if not artifact.metadata["written"] and stray:
        note = deleted_note(stray)
        print(f"train: {note}")
        (work_dir / LOG_SUBDIR).mkdir(exist_ok=True)
        (work_dir / LOG_SUBDIR / DELETED_NOTE).write_text(note + "\n")


def _write_model(model_path: Path | None, artifact: FileArtifact) -> None:
    """Copy the model the script wrote; without one, leave a note (an output must exist on a cluster)."""
    target = Path(artifact.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if model_path is not None and Path(model_path).exists():
        if Path(model_path).is_dir():
            shutil.copytree(model_path, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(model_path, target)
        artifact.metadata["written"] = True
    else:
        target.write_text("the training script wrote no model\n")
        artifact.metadata["written"] = False
