"""The cluster commands with the real kfp.Client against a local KFP API (ux/kfp_api_server.py)."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from ux.kfp_api_server import API, KfpApiServer
from zeus_kfp.cli import app

TOKEN = "tok-http-secret-42"


@pytest.fixture
def kfp_api(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # kfp.Client reads ~/.config/kfp/context.json
    for name in ("KFP_HOST", "KFP_NAMESPACE", "KF_PIPELINES_ENDPOINT", "KF_PIPELINES_UI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with KfpApiServer() as server:
        yield server


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_submit_and_schedule_on_the_wire(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    invoke("submit", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--experiment", "nightly",
           "--param", "max_epochs=4", "--param", "batch_sizes=[32,64]", "--param", "default_batch_size=64")  # fmt: skip
    invoke("schedule", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--experiment", "nightly",
           "--cron", "0 0 2 * * *", "--max-concurrency", "2", "--no-catchup", "--name", "mnist-nightly")  # fmt: skip
    state = kfp_api.state
    unknown = [(r.method, r.path) for r in state.requests if not r.path.startswith(API)]
    assert unknown == []
    # One experiment, created once and found the second time.
    assert [r.body["display_name"] for r in state.posts("/experiments")] == ["nightly"]
    (run,) = state.posts("/runs")
    assert run.body["experiment_id"] == "exp-1"
    assert run.body["runtime_config"]["parameters"] == {
        "max_epochs": 4,
        "batch_sizes": [32, 64],
        "default_batch_size": 64,
    }
    assert run.body["pipeline_spec"]["pipeline_spec"]["pipelineInfo"]["name"] == "zeus-recurrence"
    assert "zeus-minio" in json.dumps(run.body["pipeline_spec"]["platform_spec"])  # the Secret's name, by reference
    (recurring,) = state.posts("/recurringruns")
    body = recurring.body
    assert body["display_name"] == "mnist-nightly" and body["experiment_id"] == "exp-1"
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * *"}}
    assert int(body["max_concurrency"]) == 2 and body["no_catchup"] is True
    assert body["mode"] == "ENABLE"
    # The token travels as a bearer header on every request, and nowhere else.
    for request in state.requests:
        assert (
            request.headers.get("authorization") == f"Bearer {TOKEN}"
            or request.headers.get("Authorization") == f"Bearer {TOKEN}"
        )
        assert TOKEN not in json.dumps(request.body) + json.dumps(request.query)


def test_upload_sends_the_yaml_and_then_a_version(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    first = invoke("upload", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--name", "zeus-mnist")
    assert "pipeline_id=pipe-1" in first.output
    second = invoke("upload", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--name", "zeus-mnist")
    assert "version_id=ver-1" in second.output
    (upload,) = kfp_api.state.posts("/pipelines/upload")
    assert upload.query["name"] == "zeus-mnist"
    assert upload.body["file"][0]["pipelineInfo"]["name"] == "zeus-recurrence"
    (version,) = kfp_api.state.posts("/pipelines/upload_version")
    assert version.query["pipelineid"] == "pipe-1" and version.query["name"].startswith("zeus-mnist-")


def test_an_unreachable_host_exits_1_saying_what_to_check(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    args = ["submit", "--host", url, "--namespace", "team-a", "--package", str(pipeline_yaml)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert f"error: the KFP API at {url} failed" in result.output and "Check --host" in result.output
    assert TOKEN not in result.output


def test_invalid_run_arguments_send_nothing(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    """job_id=../x would fail in the preprocess pod; it fails here, and the API server sees nothing."""
    for command in (["submit"], ["schedule", "--cron", "0 0 2 * * *"]):
        args = [*command, "--host", kfp_api.url, "--package", str(pipeline_yaml), "--param", "job_id=../x"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "invalid job_id='../x'" in result.output
    assert kfp_api.state.requests == []


def test_the_real_kfp_client_adds_no_future_warning_to_the_output(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    """kfp.Client warns on every construction that it needs KFP >= 2.0.0-beta.2; we filter it where we
    construct it (pipelines.client.connect), so upload/submit/schedule print only their own lines."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = invoke("upload", "--host", kfp_api.url, "--package", str(pipeline_yaml))
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
    assert "FutureWarning" not in result.output
    assert [r for r in kfp_api.state.requests if r.path.endswith("/pipelines/upload")]  # the client did talk


def test_schedule_an_uploaded_pipeline_by_id_alone_on_the_wire(kfp_api: KfpApiServer, pipeline_yaml) -> None:
    """After two uploads, --pipeline-id alone schedules the newest version: the real kfp.Client lists the
    versions (newest first), reads that version's spec to check --param, and names both ids in the recurring run."""
    invoke("upload", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--name", "zeus-mnist")
    invoke("upload", "--host", kfp_api.url, "--package", str(pipeline_yaml), "--name", "zeus-mnist")
    invoke("schedule", "--host", kfp_api.url, "--pipeline-id", "pipe-1", "--cron", "0 0 2 * * *",
           "--param", "max_epochs=4")  # fmt: skip
    (recurring,) = kfp_api.state.posts("/recurringruns")
    assert recurring.body["pipeline_version_reference"] == {"pipeline_id": "pipe-1", "pipeline_version_id": "ver-1"}
    assert recurring.body["runtime_config"]["parameters"] == {"max_epochs": 4}
    listed = [r for r in kfp_api.state.requests if r.path == f"{API}/pipelines/pipe-1/versions"]
    assert listed and listed[0].query["sort_by"] == "created_at desc"
    bad = CliRunner().invoke(app, ["schedule", "--host", kfp_api.url, "--pipeline-id", "pipe-1",
                                   "--cron", "0 0 2 * * *", "--param", "max_epoch=4"])  # fmt: skip
    assert bad.exit_code == 2 and "one of the pipeline's parameters" in bad.output
    assert len(kfp_api.state.posts("/recurringruns")) == 1
