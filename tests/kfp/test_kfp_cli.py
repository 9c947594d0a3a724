"""`zeus-kfp compile` and `zeus-kfp run` as a user types them (Typer's runner, real pipeline)."""

import pytest
from kfp import components
from typer.testing import CliRunner

from zeus.cli import app
from zeus.store import open_store

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
    assert "zeus-minio" in out.read_text() and "nvidia.com/gpu" not in out.read_text()


def test_compile_refuses_bad_options(tmp_path):
    result = runner.invoke(app, ["compile", "-o", str(tmp_path / "x.yaml"), "--attempts", "0"])
    assert result.exit_code != 0
    assert "invalid attempts=0" in result.output


@pytest.mark.slow
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
    said = " ".join(result.output.replace("│", " ").split())  # rich wraps the message in a box
    assert "file collector (/var/log/katib/metrics.log): invalid metrics_collector.source.filter.metricsFormat" in said
    assert not store.exists()


def test_compile_declares_the_collector_parameter(tmp_path):
    out = tmp_path / "p.yaml"
    assert runner.invoke(app, ["compile", "-o", str(out), "--gpus", "0"]).exit_code == 0
    assert "metrics_collector" in components.load_component_from_file(str(out)).component_spec.inputs


def test_run_prints_each_recurrence_the_bandit_and_the_saving(tmp_path):
    store = tmp_path / "store"
    args = ["run", "-r", "1", "--store", str(store), "--attempts", "2", "--job-id", "cli-run"]
    result = runner.invoke(app, [*args, "--plots-dir", str(tmp_path / "plots"), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    trials = open_store(str(store)).trials("cli-run")
    first = trials.iloc[0]
    assert "recurrence 1" in result.output
    assert f"{int(first['batch_size'])}" in result.output and first["status"] in result.output
    assert "where the bandit stands" in result.output
    assert "default config" in result.output
    assert "simulated" in result.output
    assert sorted(p.name for p in (tmp_path / "plots" / "cli-run").glob("*.png"))


def test_run_refuses_a_changed_job(tmp_path):
    store = str(tmp_path / "store")
    from zeus.train import example_spec

    open_store(store).ensure_job(example_spec("cli-changed").with_changes(max_attempts=5))
    result = runner.invoke(app, ["run", "--store", store, "--job-id", "cli-changed", "--attempts", "3"])
    assert result.exit_code == 2
    assert "max_attempts: 5 -> 3" in result.output
