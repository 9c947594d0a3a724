"""The YAML `zeus-kfp compile --kfp-backend X` writes, loaded back with
kfp.components.load_component_from_file and run end to end through kfp.local against the S3
server: what a cluster would run, minus the cluster.

One full run (3 recurrences, the first needing a retry) of the 2.5 YAML, the most constrained
target (no nested retries, no secretAsEnv.optional). The 2.15 and 2.17 YAMLs are loaded here
too; test_kfp_backends.test_targets_differ_only_in_what_the_backend_needs shows they are the
2.5 pipeline plus retry policies and the Secret's `optional` field, which kfp.local ignores,
so a second and third 30-second run would add time and no evidence.
"""

from __future__ import annotations

import pytest
import yaml
from kfp import components
from test_kfp_local import SPEC
from typer.testing import CliRunner

from pipelines.local import portable_command, run_recurrence
from zeus.cli import app
from zeus.job import TrialStatus
from zeus.steps import spec_to_params
from zeus.store import open_store
from zeus.train import example_command

ATTEMPTS = 3


def compile_with_cli(tmp_path, backend: str, endpoint: str):
    out = tmp_path / f"zeus_pipeline_{backend}.yaml"
    args = ["compile", "-o", str(out), "--kfp-backend", backend, "--attempts", str(ATTEMPTS), "--gpus", "0"]
    args += ["--minio-secret", "mlpipeline-minio-artifact", "--s3-endpoint", endpoint]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"for KFP {backend}" in result.output
    return out


@pytest.mark.parametrize("backend", ["2.15", "2.17"])
def test_the_other_targets_yaml_loads(tmp_path, backend):
    path = compile_with_cli(tmp_path, backend, "http://127.0.0.1:9")
    loaded = components.load_component_from_file(str(path))
    assert loaded.name == "zeus-recurrence"
    assert {"job_id", "batch_sizes", "store_uri", "train_command"} <= set(loaded.component_spec.inputs)


@pytest.mark.slow
def test_the_compiled_2_5_yaml_runs_three_recurrences_with_a_retry(s3_server, s3_store_uri, tmp_path):
    path = compile_with_cli(tmp_path, "2.5", s3_server.url)
    docs = list(yaml.safe_load_all(path.read_text()))
    assert all(
        "optional" not in str(c) for c in docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
    )
    pipeline = components.load_component_from_file(str(path))

    spec = SPEC.with_changes(job_id="e2e-compiled", max_attempts=ATTEMPTS)
    params = spec_to_params(spec)
    params.pop("max_attempts")  # fixed at compile time
    arguments = dict(params, store_uri=s3_store_uri, train_command=portable_command(example_command("zeus")))
    recurrences = [f"compiled-{i}" for i in range(3)]
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
    assert first["batch_size"].iloc[0] == 1024 and first["status"].iloc[0] == TrialStatus.NOT_REACHED.value
    assert len(first) >= 2, "the missed target was retried with another batch size"
    for recurrence_id, rows in by_recurrence.items():
        assert list(rows["status"])[-1] == TrialStatus.REACHED.value, recurrence_id
        # the report ran once, after the last attempt that ran
        reports = sorted(
            p.parent.name for p in (tmp_path / "runs" / recurrence_id).rglob("report-after-attempt-*/markdown")
        )
        assert reports == [f"report-after-attempt-{len(rows)}"], recurrence_id
    assert spec.job_id in set(store.list_jobs(phase="completed")["job_id"])
