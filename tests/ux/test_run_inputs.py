"""Inputs that would burn or fake a job, refused before anything is stored; commands that only read create
nothing; and the small things a person runs into. The console script as a real
process where the process matters (pipes, terminal width), in this process (CliRunner) elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ux.cli_process import ZEUS_KFP, cli_env, run_cli
from zeus_kfp.cli import app
from zeus_kfp.job import JobSpec
from zeus_kfp.store import open_store

TRAIN = "import sys\nprint('epoch=1 accuracy=0.95')\n"
JOB = "job_id: my-model\nbatch_sizes: [16, 32, 64, 128]\ndefault_batch_size: 64\ntarget_metric: 0.9\nmax_epochs: 5\n"
OWN = ["--spec", "job.yaml"]
CASES = [  # (the options after `run`, what the one line on stderr names)
    (["--command", "{python} train.py --batch-size {batch_size}", "--metric-pattern", "(acc", *OWN],
     "invalid metric_pattern='(acc': allowed a regex with 2 groups"),
    (["--command", "{python} train.py --batch-size {batchsize}", *OWN],
     "invalid command='{batchsize}': allowed placeholders {python}, {batch_size}"),
    (["--command", "{python} trian.py --batch-size {batch_size}", *OWN], "invalid command='trian.py'"),
    (["--command", "{python} train.py --batch-size {batch_size}", *OWN, "--metrics-collector",
      '{"kind": "prometheus", "source": {"httpGet": {"path": "not/valid/path"}}}'],
     "invalid metrics_collector.source.httpGet.path='not/valid/path'"),
    (["--command", "{python} train.py --batch-size {batch_size}", *OWN, "--metrics-collector",
      '{"kind": "file", "source": {"fileSystemPath": {"path": "/m.json", "format": "json"}, "filter": {}}}'],
     "invalid metrics_collector.source.filter={}: allowed no filter with format json"),
    (["--command", "{python} train.py --batch-size {batch_size}", *OWN, "--metrics-collector",
      '{"kind": "file", "source": {"fileSystemPath": {"path": "{logdir}/m.log"}}}'],
     "invalid metrics_collector.source.fileSystemPath.path='{logdir}/m.log'"),
    (["--attempts", "1000"], "invalid max_attempts=1000: allowed 1-32"),
    (["--job-id", ""], "invalid job_id=''"),  # `--job-id "$JOB"` with JOB unset: not the example job
    (["--store", "s3//mybucket/zeus"], "invalid store='s3//mybucket/zeus'"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "named"), CASES)
def test_what_a_step_would_refuse_is_refused_before_anything_is_stored(tmp_path, monkeypatch, args, named) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "job.yaml").write_text(JOB)
    before = sorted(p.name for p in tmp_path.iterdir())
    store = [] if "--store" in args else ["--store", "store"]
    result = CliRunner().invoke(app, ["run", *args, *store, "--runs-dir", "runs", "-r", "1"])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no store, no runs, no ./s3 directory


def tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


def test_commands_that_only_read_create_nothing(tmp_path) -> None:
    store = tmp_path / "store"
    spec = JobSpec(job_id="my-model", batch_sizes=(16, 32), default_batch_size=16, target_metric=0.9, max_epochs=3)
    open_store(str(store)).ensure_job(spec)
    before = tree(store)
    for args in (["jobs"], ["jobs", "--json"], ["show", "my-model"], ["show", "my-model", "--json"]):
        result = CliRunner().invoke(app, [*args, "--store", str(store)])
        assert result.exit_code == 0, (args, result.output)
    assert CliRunner().invoke(app, ["show", "nobody", "--store", str(store)]).exit_code == 2
    assert CliRunner().invoke(app, ["jobs", "--store", str(tmp_path / "typo")]).exit_code == 2
    assert tree(store) == before and not (tmp_path / "typo").exists()


def test_a_read_only_command_never_creates_a_bucket(tmp_path, s3_store_uri, s3_server) -> None:
    """ZEUS_S3_CREATE_BUCKET=true is set (the fixture's), which lets a writer create a missing bucket: `jobs`
    with a mistyped bucket still answers that it does not exist, and creates nothing."""
    from minio import Minio

    env = {**s3_server.env, "ZEUS_S3_CREATE_BUCKET": "true"}
    proc = run_cli("jobs", "--store", "s3://typo-bucket-zeus/x", cwd=tmp_path, **env)
    assert proc.returncode == 1 and "bucket 'typo-bucket-zeus' does not exist" in proc.stderr
    client = Minio(s3_server.endpoint, access_key="k", secret_key="s", secure=False, region="us-east-1")
    assert "typo-bucket-zeus" not in {b.name for b in client.list_buckets()}


def test_a_junk_job_can_be_deleted_and_nothing_else_is(tmp_path) -> None:
    store = open_store(str(tmp_path / "store"))
    for job in ("my-model", "my-modle"):
        spec = JobSpec(job_id=job, batch_sizes=(16, 32), default_batch_size=16, target_metric=0.9, max_epochs=3)
        store.ensure_job(spec)
        store.set_phase(job, "completed")
    store.set_phase("my-model", "running")
    kept = tree(tmp_path / "store" / "jobs" / "my-model")
    invoke = CliRunner().invoke
    refused = invoke(app, ["delete", "my-model", "--store", str(tmp_path / "store"), "--yes"])
    assert refused.exit_code == 2 and "its phase is running; --force deletes it anyway" in refused.output
    deleted = invoke(app, ["delete", "my-modle", "--store", str(tmp_path / "store"), "--yes"])
    assert deleted.exit_code == 0 and deleted.output.startswith("deleted job my-modle: 0 trial(s)")
    listed = json.loads(invoke(app, ["jobs", "--store", str(tmp_path / "store"), "--json"]).output)
    assert [j["job_id"] for j in listed["jobs"]] == ["my-model"]
    assert tree(tmp_path / "store" / "jobs" / "my-model") == kept and not (tmp_path / "store/jobs/my-modle").exists()
    assert invoke(app, ["delete", "my-modle", "--store", str(tmp_path / "store"), "--yes"]).exit_code == 2


def test_help_at_80_columns_cuts_nothing(tmp_path) -> None:
    for command in ("run", "compile", "show", "submit"):
        proc = run_cli(command, "--help", cwd=tmp_path, COLUMNS="80")
        assert proc.returncode == 0 and "…" not in proc.stdout
        assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    compiled = run_cli("compile", "--help", cwd=tmp_path, COLUMNS="80").stdout
    for whole in ("mlpipeline-minio-artifact", "minio-service.kubeflow:9000", "$ZEUS_KFP_TRAIN_IMAGE"):
        assert whole in compiled  # defaults and names are whole
    wide = run_cli("compile", "--help", cwd=tmp_path, COLUMNS="140").stdout
    assert "╭─ Your own job" in wide and "…" not in wide  # wide enough: rich's panels


@pytest.mark.parametrize("args", [["compile", "--help"], ["version"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, args) -> None:
    """`zeus-kfp compile --help | head` used to end in "Broken pipe": the reader's end is closed before the
    command writes (so the write must fail), and the command stops without a word on stderr."""
    read, write = os.pipe()
    os.close(read)
    with open(write, "w") as out:
        proc = subprocess.run([ZEUS_KFP, *args], cwd=tmp_path, env=cli_env(COLUMNS="120"), stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.stderr == "" and proc.returncode == 1
