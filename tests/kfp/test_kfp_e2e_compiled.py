"""The YAML `zeus-kfp compile --kfp-backend X` writes, loaded back with
kfp.components.load_component_from_file and run end to end through kfp.local against the S3
server: what a cluster would run, minus the cluster.

Each target's YAML (2.5, 2.15, 2.17) runs its first recurrence, which needs a retry: every task of the DAG runs,
the retry's branch included. The newest target's runs two more, whose gate, bandit and report read the history
the earlier ones stored; what differs between targets is the YAML, which the first recurrence runs whole. The
trials are trace-backed (imagenet on the V100 trace, its default batch size set to 64, which never reaches the
target in the trace), so a run takes seconds and the retry is certain; the training script's own path through
the train step is run end to end by test_kfp_local.
"""

from __future__ import annotations

import pytest
import yaml
from kfp import components
from typer.testing import CliRunner

from zeus_kfp.cli import app
from zeus_kfp.job import TrialStatus
from zeus_kfp.pipelines.local import run_recurrence
from zeus_kfp.simulate.trace_trial import TraceBackend
from zeus_kfp.steps import spec_to_params
from zeus_kfp.store import open_store

ATTEMPTS = 3
RECURRENCES = {"2.5": 1, "2.15": 1, "2.17": 3}


def compile_with_cli(tmp_path, backend: str, endpoint: str):
    out = tmp_path / f"zeus_pipeline_{backend}.yaml"
    args = ["compile", "-o", str(out), "--kfp-backend", backend, "--attempts", str(ATTEMPTS), "--gpus", "0"]
    args += ["--minio-secret", "mlpipeline-minio-artifact", "--s3-endpoint", endpoint]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"for KFP {backend}" in result.output
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["2.5", "2.15", "2.17"])
def test_each_targets_compiled_yaml_runs_its_recurrences_with_a_retry(s3_server, s3_store_uri, tmp_path, backend):
    path = compile_with_cli(tmp_path, backend, s3_server.url)
    docs = list(yaml.safe_load_all(path.read_text()))
    executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
    assert all("optional" not in str(c) for c in executors) == (backend == "2.5")
    pipeline = components.load_component_from_file(str(path))
    assert pipeline.name == "zeus-recurrence"

    trace = TraceBackend("imagenet", "v100")
    spec = trace.spec(f"e2e-compiled-{backend.replace('.', '-')}", default_batch_size=64, max_attempts=ATTEMPTS)
    params = spec_to_params(spec)
    params.pop("max_attempts")  # fixed at compile time
    arguments = dict(params, store_uri=s3_store_uri, trial_backend=trace.name, preprocess_ref="")
    recurrences = [f"compiled-{i}" for i in range(RECURRENCES[backend])]
    for recurrence_id in recurrences:
        run_recurrence(
            pipeline,
            dict(arguments, recurrence_id=recurrence_id),
            outputs_dir=tmp_path / "runs" / recurrence_id,
            log_path=tmp_path / "runs" / f"{recurrence_id}.log",
        )

    store = open_store(s3_store_uri)
    assert store.get_job(spec.job_id) == spec, "the compiled attempt count is the job's max_attempts"
    trials = store.trials(spec.job_id)
    by_recurrence = {r: trials[trials["recurrence_id"] == r].sort_values("attempt") for r in recurrences}
    first = by_recurrence[recurrences[0]]
    assert first["batch_size"].iloc[0] == 64 and first["status"].iloc[0] == TrialStatus.NOT_REACHED.value
    assert len(first) >= 2, "the missed target was retried with another batch size"
    for recurrence_id, rows in by_recurrence.items():
        assert list(rows["status"])[-1] == TrialStatus.REACHED.value, recurrence_id
        # the report ran once, after the last attempt that ran
        reports = sorted(
            p.parent.name for p in (tmp_path / "runs" / recurrence_id).rglob("report-after-attempt-*/markdown")
        )
        assert reports == [f"report-after-attempt-{len(rows)}"], recurrence_id
    assert spec.job_id in set(store.list_jobs(phase="completed")["job_id"])
