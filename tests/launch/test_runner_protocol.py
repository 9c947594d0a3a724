"""One protocol for every way a trial runs (zeus_kfp.launch.trial_runner.TrialRunner): the script runner (local,
torchrun), the cluster runner (trainjob, pytorchjob) and the trace replay take one `run` call, and the train
step picks each from what it was asked for."""

from __future__ import annotations

import inspect

import pytest

from zeus_kfp.job import JobSpec
from zeus_kfp.launch.config import LaunchConfig, LaunchError
from zeus_kfp.launch.trial_runner import ClusterRunner, ScriptRunner, TrialRunner, launch_runner
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps.request import TrialRequest
from zeus_kfp.steps.train import _runner


def run_parameters(method) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize("runner", [ScriptRunner, ClusterRunner, TraceBackend])
def test_every_runner_takes_the_protocols_run_call(runner) -> None:
    assert run_parameters(runner.run) == run_parameters(TrialRunner.run)


def request(**changes) -> TrialRequest:
    fields = dict(
        spec_json="{}",
        batch_size=8,
        cost_threshold=-1.0,
        command=["{python}", "train.py"],
        zeus_aware=True,
        metric_pattern="",
        metrics_collector="",
        trial_backend="script",
        seed=3,
    )
    return TrialRequest(**(fields | changes))


def test_the_train_step_picks_the_runner_its_request_names() -> None:
    assert _runner(request(trial_backend="trace:librispeech/a40"), data_dir="", gpu="auto") == TraceBackend(
        "librispeech", "a40"
    )
    local = _runner(request(), data_dir="/data", gpu="simulated")
    assert isinstance(local, ScriptRunner) and local.config.launcher == "local"
    assert (local.data_dir, local.gpu, local.command[1]) == ("/data", "simulated", "train.py")
    assert local.command[0] != "{python}"  # this step's interpreter
    cluster = _runner(
        request(launcher="pytorchjob", num_nodes=2, store_uri="s3://b/p", recurrence_id="r", attempt=4),
        data_dir="/data",
        gpu="auto",
    )
    assert isinstance(cluster, ClusterRunner) and cluster.config.num_nodes == 2
    assert (cluster.command[0], cluster.store_uri, cluster.recurrence_id, cluster.attempt) == (
        "python",
        "s3://b/p",
        "r",
        4,
    )


def test_a_cluster_runner_refuses_a_plain_script_naming_zeus_aware(tmp_path) -> None:
    spec = JobSpec(job_id="plain", batch_sizes=(8,), default_batch_size=8, target_metric=0.9, max_epochs=1)
    runner = launch_runner(LaunchConfig("trainjob"), command=["python", "t.py"], zeus_aware=False, store_uri="s3://b")
    with pytest.raises(LaunchError, match="zeus_aware"):
        runner.run(spec, batch_size=8, cost_threshold=None, seed=0, reuse=None, work_dir=tmp_path)
