"""A trial as a Kubeflow TrainJob or PyTorchJob: create (or adopt), watch, stream, read back, delete.

The train step becomes the trial's controller:

1. **Create or adopt.** The job's name is fixed by (job, recurrence, attempt). If a job of that name
   exists (the step was retried after a crash or a lost node), its digest annotation says whether it
   runs this very trial: then it is adopted (watched, its result read), else it is deleted and
   replaced. A second job for one attempt is never created.
2. **Watch.** The job object is watched; after every event and every quiet watch window the pods are
   checked. The master pod's log is streamed into the step's log once it starts.
3. **Fail, recorded.** A failed or evicted pod, a job the operator marks Failed, a job whose pods have
   not all started within `pending_timeout_s` (with why: unschedulable, image pull...), or the
   trial's timeout: the trial ends `failed` with that reason, never as a lost step.
4. **Read back.** Rank 0's node handed result.json, profile.parquet and the model over through the store
   (zeus_kfp.launch.handoff); the result is re-priced under the job's cost function.
5. **Delete.** The job (and its pods) is deleted when the trial ends, fails, or the step is stopped
   (SIGTERM, as when KFP cancels a run), and so is the trial's live-threshold ConfigMap (which the job
   owns besides). A step killed outright leaves the job to its retry, and the trial's timeout (a day
   unless ZEUS_LAUNCH_TIMEOUT_S says otherwise) bounds it regardless: the job's
   activeDeadlineSeconds, and the pod command's own deadline (the only bound Trainer v2.1 knows).

A TrainJob is built in the shape the cluster's Trainer accepts (zeus_kfp.launch.trainer_api: v2.1 or v2.2+).

The live threshold (a job with an early stop): once the job exists the launcher creates the trial's ConfigMap,
owned by the job, which the pods mount and the step's feed patches (zeus_kfp.launch.threshold_sink); a cluster that
refuses it leaves the trial at its dispatched threshold, said once in the step's log.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from zeus_kfp.job import JobSpec, TrialOutcome, TrialResult, TrialStatus
from zeus_kfp.launch.config import ENV, LaunchConfig, LaunchError
from zeus_kfp.launch.handoff import Handoff
from zeus_kfp.launch.kube import (
    FAILED,
    SUCCEEDED,
    KubeJobs,
    LogFollower,
    is_master,
    job_phase,
    pending_reasons,
    pod_failure,
    started,
)
from zeus_kfp.launch.manifests import (
    DIGEST_ANNOTATION,
    KINDS,
    POD_LOG_DIR,
    RUN_ANNOTATION,
    THRESHOLD_PATH,
    TrialJob,
    configmap_name,
    digest,
    fill_placeholders,
    job_name,
    manifest,
)
from zeus_kfp.launch.threshold_sink import ThresholdConfigMap
from zeus_kfp.launch.trainer_api import detect
from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store.keys import check_recurrence_id
from zeus_kfp.train.artifacts import MODEL_FILE, result_from_json
from zeus_kfp.train.env import TrialEnv

log = logging.getLogger(__name__)

GONE_WAIT_S = 120.0


class StepStopped(BaseException):
    """The step got SIGTERM/SIGINT (KFP cancelled the run): unwind, deleting the job on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


@dataclass(frozen=True)
class Ending:
    """How the job ended, as the launcher saw it."""

    phase: str  # Succeeded | Failed
    reason: str = ""


class ClusterTrial:
    """One trial's Kubernetes job, from creation (or adoption) to deletion."""

    def __init__(
        self,
        jobs: KubeJobs,
        trial: TrialJob,
        name: str,
        out: TextIO,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float | None = None,
    ) -> None:
        self.jobs, self.trial, self.name, self.out, self.clock = jobs, trial, name, out, clock
        self.config = trial.config
        self.timeout_s = timeout_s or self.config.timeout_s
        self.log: LogFollower | None = None
        self.job: dict[str, Any] = {}  # the job as the API server last returned it (created or adopted)
        self.began = clock()

    # -- 1. create or adopt -------------------------------------------------------------------
    def start(self, reuse_profile: PowerProfile | None) -> None:
        """Adopt the predecessor's job if it runs this trial, else (re)create it; sets self.trial's run."""
        # deferred: kubernetes takes 0.7 s to import; only a cluster trial uses it
        from kubernetes.client.exceptions import ApiException

        wanted = digest(self.trial)
        existing = self.jobs.get(self.name)
        if existing is not None and not existing["metadata"].get("deletionTimestamp"):
            notes = existing["metadata"].get("annotations") or {}
            if notes.get(DIGEST_ANNOTATION) == wanted and notes.get(RUN_ANNOTATION):
                self._use_run(notes[RUN_ANNOTATION])
                self.job = existing
                self.say(f"adopting {self.jobs.kind.kind} {self.name} (a previous try of this step created it)")
                return
            self.say(f"replacing {self.jobs.kind.kind} {self.name}: it runs a different trial")
            self.jobs.delete(self.name)
        if existing is not None:
            self._wait_gone()
        self._use_run(uuid.uuid4().hex[:12])
        if reuse_profile is not None and not reuse_profile.is_empty:
            self.trial.handoff.upload_reuse(reuse_profile)
        try:
            self.job = self.jobs.create(manifest(self.trial, self.name, self.jobs.namespace))
        except ApiException as exc:
            if exc.status != 409:  # 409: another try created it this instant; take that one
                raise
            self.start(reuse_profile)
            return
        self.say(f"created {self.jobs.kind.kind} {self.jobs.namespace}/{self.name}")

    def _use_run(self, run: str) -> None:
        self.trial = replace(self.trial, handoff=replace(self.trial.handoff, run=run))

    def _wait_gone(self) -> None:
        deadline = self.clock() + GONE_WAIT_S
        while self.jobs.get(self.name) is not None:
            if self.clock() > deadline:
                raise RuntimeError(f"{self.jobs.kind.kind} {self.name} is still being deleted after {GONE_WAIT_S:g} s")
            time.sleep(0.5)

    # -- 2-3. watch ---------------------------------------------------------------------------------
    def follow(self) -> Ending:
        """Watch the job until it ends or the trial has to be failed."""
        while True:
            for event, job in self.jobs.watch(self.name, self.config.watch_s):
                if event == "DELETED":
                    return Ending(FAILED, f"the {self.jobs.kind.kind} was deleted by someone else")
                ending = self._check(job)
                if ending is not None:
                    return ending
            job = self.jobs.get(self.name)
            if job is None:
                return Ending(FAILED, f"the {self.jobs.kind.kind} is gone (deleted by someone else)")
            ending = self._check(job)
            if ending is not None:
                return ending

    def _check(self, job: dict[str, Any]) -> Ending | None:
        pods = self.jobs.pods(self.trial.handoff.run)
        master = next((p for p in pods if is_master(self.jobs.kind, p)), None)
        if master is not None and started(master) and self.log is None:
            self.say(f"streaming the log of {master['metadata']['name']} (rank 0's node)")
            self.log = self.jobs.follow_log(master["metadata"]["name"], self.out)
        phase, message = job_phase(self.jobs.kind, job)
        if phase == SUCCEEDED:
            return Ending(SUCCEEDED)
        if phase == FAILED:
            detail = pod_failure(pods)
            return Ending(FAILED, f"the {self.jobs.kind.kind} failed: {message}" + (f"; {detail}" if detail else ""))
        failure = pod_failure(pods)
        if failure:
            return Ending(FAILED, failure)
        elapsed = self.clock() - self.began
        all_started = len(pods) >= self.config.num_nodes and all(started(p) for p in pods)
        if not all_started and elapsed > self.config.pending_timeout_s:
            why = pending_reasons(pods) or f"{len(pods)} of {self.config.num_nodes} pods exist"
            return Ending(FAILED, f"stuck Pending for more than {self.config.pending_timeout_s:g} s: {why}")
        if self.timeout_s is not None and elapsed > self.timeout_s:
            return Ending(FAILED, f"timed out after {self.timeout_s:g} s")
        return None

    # -- 4. read back ------------------------------------------------------------------------------
    def outcome(self, spec: JobSpec, batch_size: int, ending: Ending, work_dir: Path) -> TrialOutcome:
        if self.log is not None:  # a finished master's log ends; a failing job's pods may still be writing
            self.log.join(30 if ending.phase == SUCCEEDED else 1)
        handoff = self.trial.handoff
        data = handoff.read_result()
        self.say(f"job ended {ending.phase}; rank 0's result {'read' if data else 'missing'} from the store")
        tail = "\n".join(self.log.tail) if self.log is not None else ""
        if data is not None:
            result = result_from_json(spec, json.loads(data))
            if ending.phase != SUCCEEDED:
                status = result.status if result.status in (TrialStatus.FAILED, TrialStatus.OOM) else TrialStatus.FAILED
                reason = "; ".join(part for part in (ending.reason, result.reason) if part)
                result = replace(result, status=status, reason=reason)
        else:
            why = ending.reason or "the job succeeded but rank 0 handed back no result (see the master's log)"
            result = TrialResult.build(
                spec,
                batch_size=batch_size,
                status=TrialStatus.FAILED,
                time_s=max(0.0, self.clock() - self.began),
                energy_j=0.0,
                num_epochs=0,
                reason=why,
                source="not measured: rank 0 reported nothing (time is the job's wall time)",
            )
        model = handoff.read_model(work_dir / MODEL_FILE)
        return TrialOutcome(result, handoff.read_profile(), model, tail)

    def say(self, text: str) -> None:
        print(f"zeus: {text}", file=self.out, flush=True)


def _stop_on_signals() -> Callable[[], None]:
    """SIGTERM/SIGINT raise StepStopped (main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: object) -> None:
        raise StepStopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    return lambda: [signal.signal(sig, handler) for sig, handler in previous.items()]  # type: ignore[func-returns-value]


def _check_store(config: LaunchConfig, store_uri: str) -> None:
    if not store_uri.startswith("s3://") and not config.allow_local_store:
        raise LaunchError(
            "store_uri",
            store_uri,
            f"an s3:// store for launcher {config.launcher!r}: the trial's pods hand their result back through it "
            f"(or set {ENV['allow_local_store']}=1 when the pods mount this directory too)",
        )


def trial_job(
    config: LaunchConfig,
    spec: JobSpec,
    *,
    batch_size: int,
    cost_threshold: float | None,
    command: Sequence[str],
    store_uri: str,
    recurrence_id: str,
    attempt: int,
    gpu: str = "auto",
    reuse: bool = False,
    seed: int | None = None,
    warmup_iters: int = 10,
    profile_iters: int = 40,
    min_window_s: float | None = None,
    step_env: dict[str, str] | None = None,
) -> TrialJob:
    """Everything the trial's manifest says (zeus_kfp.launch.manifests builds it): what run_cluster_trial creates,
    and what `zeus-kfp dry-run` prints. `step_env`: the train step's environment (default: this process's)."""
    _check_store(config, store_uri)
    check_recurrence_id(recurrence_id)
    if not config.image:
        raise LaunchError(ENV["image"], config.image, "the train image for the trial's pods")
    early_stop = spec.beta_knob is not None  # only then a live threshold: its file, mounted from its ConfigMap
    trial_env = TrialEnv.for_trial(
        spec,
        batch_size=batch_size,
        log_dir=POD_LOG_DIR,
        cost_threshold=cost_threshold,
        warmup_iters=warmup_iters,
        profile_iters=profile_iters,
        min_window_s=min_window_s,
        gpu=gpu,
        seed=seed,
        threshold_file=THRESHOLD_PATH if early_stop else None,
    ).to_env()
    return TrialJob(
        config=config,
        handoff=Handoff(store_uri, spec.job_id, recurrence_id, attempt, run="pending"),
        command=fill_placeholders(command, batch_size),
        trial_env=trial_env,
        step_env=dict(os.environ) if step_env is None else step_env,
        reuse=reuse,
        threshold_configmap=_threshold_name(spec, recurrence_id, attempt) if early_stop else "",
    )


def threshold_configmap(
    config: LaunchConfig, spec: JobSpec, recurrence_id: str, attempt: int, api_client: Any = None
) -> ThresholdConfigMap:
    """The live-threshold ConfigMap of the trial (`spec`'s job, recurrence, attempt) that `config` launches: the
    sink the step's feed writes to, and what run_cluster_trial creates and deletes."""
    return ThresholdConfigMap(config.resolved_namespace(), _threshold_name(spec, recurrence_id, attempt), api_client)


def _threshold_name(spec: JobSpec, recurrence_id: str, attempt: int) -> str:
    """The trial's live-threshold ConfigMap name, from its Kubeflow job's: what its pods mount (`trial_job`) and
    what the step's feed writes to (`threshold_configmap`) must be one name."""
    return configmap_name(job_name(spec.job_id, recurrence_id, attempt))


def with_trainer_api(config: LaunchConfig, api_client: Any) -> LaunchConfig:
    """`config` with the TrainJob shape the cluster's Trainer accepts (read from it unless set)."""
    if config.launcher != "trainjob" or config.trainer_api is not None:
        return config

    return replace(config, trainer_api=detect(api_client))


def run_cluster_trial(
    config: LaunchConfig,
    spec: JobSpec,
    *,
    batch_size: int,
    cost_threshold: float | None,
    command: Sequence[str],
    store_uri: str,
    recurrence_id: str,
    attempt: int,
    work_dir: Path,
    gpu: str = "auto",
    reuse_profile: PowerProfile | None = None,
    seed: int | None = None,
    warmup_iters: int = 10,
    profile_iters: int = 40,
    min_window_s: float | None = None,
    timeout_s: float | None = None,
    api_client: Any = None,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    threshold: ThresholdConfigMap | None = None,
) -> TrialOutcome:
    """Run one trial as the configured Kubeflow job; see the module docstring. Returns the runner's outcome.
    `threshold`: the trial's live-threshold ConfigMap as the step's feed writes to it (`threshold_configmap`;
    default: one of its own, which nothing writes to); only a job with an early stop has one."""
    reuse = reuse_profile is not None and not reuse_profile.is_empty
    trial = trial_job(
        config,
        spec,
        batch_size=batch_size,
        cost_threshold=cost_threshold,
        command=command,
        store_uri=store_uri,
        recurrence_id=recurrence_id,
        attempt=attempt,
        gpu=gpu,
        reuse=reuse,
        seed=seed,
        warmup_iters=warmup_iters,
        profile_iters=profile_iters,
        min_window_s=min_window_s,
    )
    jobs = KubeJobs(KINDS[config.launcher], config.resolved_namespace(), api_client)
    trial = replace(trial, config=with_trainer_api(config, jobs.api_client))
    cluster = ClusterTrial(
        jobs, trial, job_name(spec.job_id, recurrence_id, attempt), out or sys.stdout, clock, timeout_s
    )
    if not trial.threshold_configmap:
        threshold = None  # no early stop: nothing to mount or write
    elif threshold is None:  # the name the pods mount, from the manifest itself
        threshold = ThresholdConfigMap(config.resolved_namespace(), trial.threshold_configmap, jobs.api_client)
    undo = _stop_on_signals()
    try:
        cluster.start(reuse_profile if reuse else None)
        if threshold is not None:
            threshold.create(cluster.job)  # never raises: a refusal leaves the trial at its dispatched threshold
        ending = cluster.follow()
        return cluster.outcome(spec, batch_size, ending, Path(work_dir))
    finally:
        try:
            if jobs.delete(cluster.name):
                cluster.say(f"deleted {jobs.kind.kind} {cluster.name}")
            if threshold is not None and threshold.delete():
                cluster.say(f"deleted ConfigMap {threshold.name}")
        finally:
            undo()
