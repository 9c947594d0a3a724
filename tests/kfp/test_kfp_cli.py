"""`zeus-kfp compile` and `zeus-kfp run` as a user types them (Typer's runner, real pipeline)."""

import pytest
import yaml
from kfp import components
from typer.testing import CliRunner

from zeus_kfp.cli import app
from zeus_kfp.store import open_store

runner = CliRunner()


def test_compile_writes_a_yaml_kfp_loads_back(tmp_path):
    out = tmp_path / "zeus_pipeline.yaml"
    result = runner.invoke(
        app, ["compile", "-o", str(out), "--attempts", "2", "--gpus", "0", "--minio-secret", "zeus-minio"]
    )
    assert result.exit_code == 0, result.output
    assert "2 attempts" in result.output
    loaded = components.load_component_from_file(str(out))
    assert "job_id" in loaded.component_spec.inputs
    assert "zeus-minio" in out.read_text()
    executors = next(yaml.safe_load_all(out.read_text()))["deploymentSpec"]["executors"]
    assert not [label for label, e in executors.items() if "accelerator" in e["container"].get("resources", {})]


def test_compile_refuses_bad_options(tmp_path):
    result = runner.invoke(app, ["compile", "-o", str(tmp_path / "x.yaml"), "--attempts", "0"])
    assert result.exit_code != 0
    assert "invalid attempts=0" in result.output


def test_run_refuses_a_bad_collector_spec_before_any_recurrence(tmp_path):
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        [
            "run",
            "--script",
            "plain",
            "--store",
            str(store),
            "--metrics-collector",
            '{"kind": "file", "source": {"filter": {"metricsFormat": ["(x"]}}}',
        ],
    )
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "file collector (/var/log/katib/metrics.log): invalid metrics_collector.source.filter.metricsFormat" in said
    assert not store.exists()


def test_compile_declares_the_collector_parameter(tmp_path):
    out = tmp_path / "p.yaml"
    assert runner.invoke(app, ["compile", "-o", str(out), "--gpus", "0"]).exit_code == 0
    assert "metrics_collector" in components.load_component_from_file(str(out)).component_spec.inputs


@pytest.mark.slow
def test_run_prints_each_recurrence_and_the_job_against_default_oracle_and_simulator(tmp_path):
    store = tmp_path / "store"
    args = ["run", "-r", "2", "--store", str(store), "--job-id", "cli-run", "--trace", "squad/v100"]
    result = runner.invoke(app, [*args, "--plots-dir", str(tmp_path / "plots"), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    trials = open_store(str(store)).trials("cli-run")
    assert set(trials["recurrence"]) == {1, 2}
    assert "recurrence 1" in result.output and "recurrence 2" in result.output
    assert f"{int(trials['batch_size'].iloc[0])}" in result.output and trials["status"].iloc[0] in result.output
    for line in ("this job (kfp.local)", "simulator, seed 0", "default config", "oracle"):
        assert line in result.output
    assert "the simulator produced the same trials" in result.output
    assert "simulated (trace: squad/v100)" in result.output
    assert set(trials["source"]) == {"simulated (trace: squad/v100)"}
    assert sorted(p.name for p in (tmp_path / "plots" / "cli-run").glob("*.png"))


def test_run_refuses_a_changed_job_once_a_trial_reached(tmp_path):
    """A reached trial settles the job's spec: a changed one is refused, naming what helps (a job none of whose
    trials reached takes a changed spec instead: tests/ux/test_first_week.py)."""
    store = str(tmp_path / "store")
    from zeus_kfp.job import Decision, TrialResult
    from zeus_kfp.simulate.trace_trial import TraceBackend

    spec = TraceBackend("cifar100", "v100").spec("cli-changed", max_attempts=5)
    opened = open_store(store)
    opened.ensure_job(spec)
    opened.begin_recurrence(spec.job_id, "r1")
    opened.dispatch_trial(spec.job_id, "r1", 1, Decision(spec.default_batch_size, None, "exploration", "test"))
    opened.finish_trial(spec.job_id, "r1", 1, TrialResult.build(spec, batch_size=spec.default_batch_size,
                        status="reached", time_s=1.0, energy_j=1.0, num_epochs=3))  # fmt: skip
    result = runner.invoke(app, ["run", "--store", store, "--job-id", "cli-changed", "--attempts", "3"])
    assert result.exit_code == 2
    assert "max_attempts: 5 -> 3" in result.output and "zeus-kfp delete cli-changed" in result.output


def test_run_refuses_an_unknown_trace(tmp_path):
    result = runner.invoke(app, ["run", "--store", str(tmp_path / "s"), "--trace", "mnist/v100"])
    assert result.exit_code == 2
    assert "trial_backend" in result.output and "cifar100" in result.output
