"""One attempt of a recurrence: the bandit step (choose), the training step (train) and the
feedback step (feedback). Each is what one KFP component calls.

State lives in the store only: choose re-derives the policy's decision from the job's
history, train touches no store at all (so a GPU pod needs no store credentials beyond
what it is given), and feedback writes the finished trial, its power profile and a
bandit-state snapshot, each under a key unique to (recurrence, attempt), so a retried
step rewrites the same objects.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from zeus.job import JobSpec, TrialResult
from zeus.steps.params import PROFILE_KIND, PYTHON_TOKEN, decision_seed, threshold_from_param, threshold_to_param


class MetricsSink(Protocol):
    """What train logs numbers to (a KFP Metrics artifact has this shape)."""

    def log_metric(self, metric: str, value: float) -> None: ...


class FileArtifact(Protocol):
    """An output file with metadata (a KFP Artifact has this shape); zeus never imports kfp."""

    path: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Choice:
    """The bandit step's outputs. cost_threshold is NO_THRESHOLD (-1.0) for "no early stop"."""

    batch_size: int
    cost_threshold: float
    trial: int
    stage: str
    reason: str


@dataclass(frozen=True)
class TrainOutputs:
    """The train step's outputs, in the order of the component's NamedTuple."""

    status: str
    reached: bool
    time_s: float
    energy_j: float
    cost: float
    epochs: int
    result_json: str


def choose(
    *, store_uri: str, job_id: str, recurrence_id: str, attempt: int, policy: str, kfp_run_id: str = ""
) -> Choice:
    """Ask the policy for this attempt's batch size given the job's history; record it as dispatched."""
    from zeus.policy import get_policy
    from zeus.store import open_store

    store = open_store(store_uri or None)
    existing = store.get_dispatch(job_id, recurrence_id, attempt)
    if existing is not None:  # a retried bandit step: hand out the decision already recorded
        trial, decision = existing
    else:
        spec = store.get_job(job_id)
        seed = decision_seed(spec, recurrence_id, attempt)
        decision = get_policy(policy).decide(spec, store.history(job_id), seed)
        trial = store.dispatch_trial(job_id, recurrence_id, attempt, decision, kfp_run_id=kfp_run_id)
    return Choice(
        batch_size=int(decision.batch_size),
        cost_threshold=threshold_to_param(decision.cost_threshold),
        trial=int(trial),
        stage=decision.stage,
        reason=decision.reason,
    )


def train(
    *,
    spec_json: str,
    batch_size: int,
    cost_threshold: float,
    command: list[str],
    data_dir: str,
    profile: FileArtifact,
    metrics: MetricsSink,
    model: FileArtifact,
    zeus_aware: bool = True,
    metric_pattern: str = "",
    gpu: str = "auto",
) -> TrainOutputs:
    """Run one trial of the user's script and write its profile, metrics and model.

    `command` may use "{python}" for this step's interpreter, besides run_trial's {batch_size},
    {data_dir}, {log_dir} and {work_dir}.

    Never raises for a failing script: the trial comes back FAILED with the script's error as
    its reason, so feedback records it and the run goes on.
    """
    from zeus.train import run_trial

    spec = JobSpec.from_dict(json.loads(spec_json))
    with tempfile.TemporaryDirectory(prefix="zeus-trial-") as work_dir:
        started, cpu_before = time.perf_counter(), _children_cpu_s()
        outcome = run_trial(
            spec,
            batch_size=int(batch_size),
            cost_threshold=threshold_from_param(cost_threshold),
            command=[str(part).replace(PYTHON_TOKEN, sys.executable) for part in command],
            work_dir=Path(work_dir),
            zeus_aware=zeus_aware,
            data_dir=data_dir or None,
            gpu=gpu,
            metric_patterns=[metric_pattern] if metric_pattern else None,
        )
        wall_s, cpu_s = time.perf_counter() - started, _children_cpu_s() - cpu_before
        _write_model(outcome.model_path, model)
    result = outcome.result
    _write_profile(outcome.profile, profile)
    for name, value in (
        ("time_s", result.time_s),
        ("energy_j", result.energy_j),
        ("cost", result.cost),
        ("epochs", result.num_epochs),
        ("batch_size", result.batch_size),
        ("reached", float(result.reached)),
        ("simulated", float(result.simulated)),  # 1.0: energy and time come from a simulated GPU
        ("wall_s", wall_s),  # real seconds in the script (time_s is simulated without a GPU)
        ("script_cpu_s", cpu_s),  # CPU seconds of the script: lets benchmarks split off orchestration
    ):
        metrics.log_metric(name, float(value))
    if result.metric is not None:
        metrics.log_metric(spec.metric_name, float(result.metric))
    if result.power_limit_w is not None:
        metrics.log_metric("power_limit_w", float(result.power_limit_w))
    return TrainOutputs(
        status=result.status.value,
        reached=result.reached,
        time_s=result.time_s,
        energy_j=result.energy_j,
        cost=result.cost,
        epochs=result.num_epochs,
        result_json=json.dumps(result.to_dict()),
    )


def feedback(
    *, store_uri: str, job_id: str, recurrence_id: str, attempt: int, result_json: str, profile_path: str, policy: str
) -> bool:
    """Record the finished trial, its profile and the bandit's new state; return whether it reached."""
    from zeus.policy import get_policy
    from zeus.store import open_store

    data = json.loads(result_json)
    data.pop("reached", None)
    result = TrialResult.from_dict(data)
    store = open_store(store_uri or None)
    store.finish_trial(job_id, recurrence_id, attempt, result)
    profile = pd.read_parquet(profile_path) if Path(profile_path).is_file() else pd.DataFrame()
    if not profile.empty:
        store.write_profile(job_id, recurrence_id, attempt, profile)
    spec = store.get_job(job_id)
    history = store.history(job_id)
    arms = get_policy(policy).arm_states(spec, history)
    reached_costs = [r.cost for r in history if r.status.value == "reached" and r.cost is not None]
    store.write_bandit_state(job_id, recurrence_id, attempt, arms, min(reached_costs) if reached_costs else None)
    return result.reached


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _write_profile(profile_df: pd.DataFrame, artifact: FileArtifact) -> None:
    """The JIT profile as Parquet, marked simulated when any row is (figures from no real GPU)."""
    profile_df.to_parquet(artifact.path, index=False)
    simulated = bool(profile_df["simulated"].any()) if "simulated" in profile_df and len(profile_df) else False
    artifact.metadata["kind"] = PROFILE_KIND
    artifact.metadata["rows"] = len(profile_df)
    artifact.metadata["simulated"] = simulated


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
