"""`zeus-kfp upload|submit|schedule` at the kfp.Client boundary (see ux/fake_kfp.py for why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ux.fake_kfp import Recorder
from zeus_kfp.cli import app
from zeus_kfp.pipelines.client import ClusterInputError, parse_arguments, validate_cron

HOST = "http://kfp.example:8080"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_upload_sends_the_package_under_the_name(kfp_client: Recorder, pipeline_yaml) -> None:
    result = invoke("upload", "--host", HOST, "--name", "zeus-mnist", "--package", str(pipeline_yaml))
    assert result.exit_code == 0, result.output
    assert kfp_client.only("__init__") == {"host": HOST}
    assert kfp_client.only("get_pipeline_id") == {"name": "zeus-mnist"}
    call = kfp_client.only("upload_pipeline")
    assert call["pipeline_package_path"] == str(pipeline_yaml)
    assert call["pipeline_name"] == "zeus-mnist"
    assert call["pipeline_package_path:pipeline_name"] == "zeus-recurrence"
    assert f"{HOST}/#/pipelines/details/pipe-123" in result.output


def test_upload_of_an_existing_name_adds_a_version(kfp_client: Recorder, pipeline_yaml) -> None:
    kfp_client.existing_pipelines["zeus-kfp"] = "pipe-old"
    result = invoke("upload", "--host", HOST, "--package", str(pipeline_yaml))
    assert result.exit_code == 0, result.output
    assert kfp_client.named("upload_pipeline") == []
    call = kfp_client.only("upload_pipeline_version")
    assert call["pipeline_id"] == "pipe-old"
    assert call["pipeline_version_name"].startswith("zeus-kfp-")
    assert "pipeline_id=pipe-old version_id=ver-456" in result.output


def test_submit_types_the_arguments_and_keeps_the_token_out_of_them(
    kfp_client: Recorder, pipeline_yaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "tok-very-secret-1234"
    monkeypatch.setenv("KFP_HOST", HOST)
    monkeypatch.setenv("KFP_NAMESPACE", "team-a")
    monkeypatch.setenv("KFP_TOKEN", token)
    result = invoke(
        "submit", "--experiment", "nightly", "--package", str(pipeline_yaml),
        "--param", "max_epochs=3", "--param", "batch_sizes=[16, 32]", "--param", "eta_knob=0.3",
        "--param", "higher_is_better=false", "--param", "job_id=mnist-a", "--param", "default_batch_size=32",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert kfp_client.only("__init__") == {"host": HOST, "namespace": "team-a", "existing_token": token}
    call = kfp_client.only("create_run_from_pipeline_package")
    assert call["pipeline_file"] == str(pipeline_yaml)
    assert call["arguments"] == {
        "max_epochs": 3,
        "batch_sizes": [16, 32],
        "eta_knob": 0.3,
        "higher_is_better": False,
        "job_id": "mnist-a",
        "default_batch_size": 32,
    }
    assert call["experiment_name"] == "nightly"
    assert call["namespace"] == "team-a"
    assert call["enable_caching"] is False
    assert f"{HOST}/#/runs/details/run-789" in result.output
    # The token went to kfp.Client's constructor and nowhere else, and was never printed.
    assert token not in result.output
    assert all(token not in repr(kwargs) for method, kwargs in kfp_client.calls if method != "__init__")


def test_a_katib_collector_spec_file_is_checked_and_sent_as_json(
    kfp_client: Recorder, pipeline_yaml, tmp_path: Path
) -> None:
    katib = tmp_path / "collector.yaml"
    katib.write_text("metricsCollectorSpec:\n  collector: {kind: TensorFlowEvent}\n")
    result = invoke("submit", "--host", HOST, "--package", str(pipeline_yaml), "--param", f"metrics_collector=@{katib}")
    assert result.exit_code == 0, result.output
    sent = kfp_client.only("create_run_from_pipeline_package")["arguments"]["metrics_collector"]
    assert json.loads(sent) == {
        "kind": "tfEvent",
        "source": {"fileSystemPath": {"path": "/var/log/katib/tfevent/", "kind": "directory"}},
    }


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("metrics_collector={kind: Custom}", "metrics_collector.kind='Custom'"),
        ("max_epoch=3", "one of the pipeline's parameters"),
        ("max_epochs=three", "number_integer"),
        ("batch_sizes=32", "e.g. [32,64,128]"),
        ("higher_is_better=maybe", "true or false"),
        ("s3_secret_key=abc", "no credentials as parameters"),
        ("max_epochs", "KEY=VALUE"),
    ],
)
def test_submit_refuses_bad_arguments_before_calling_kfp(
    kfp_client: Recorder, pipeline_yaml, param: str, message: str
) -> None:
    result = runner.invoke(app, ["submit", "--host", HOST, "--package", str(pipeline_yaml), "--param", param])
    assert result.exit_code == 2
    assert message in result.output
    assert kfp_client.named("create_run_from_pipeline_package") == []


def test_schedule_creates_a_recurring_run_in_the_experiment(kfp_client: Recorder, pipeline_yaml) -> None:
    result = invoke(
        "schedule", "--host", HOST, "--cron", "0 0 2 * * *", "--max-concurrency", "3", "--no-catchup",
        "--experiment", "nightly", "--name", "mnist-nightly", "--package", str(pipeline_yaml),
        "--param", "target_metric=0.95",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert kfp_client.only("create_experiment") == {"name": "nightly", "namespace": None}
    call = kfp_client.only("create_recurring_run")
    assert call["experiment_id"] == "exp-42"
    assert call["job_name"] == "mnist-nightly"
    assert call["cron_expression"] == "0 0 2 * * *"
    assert call["max_concurrency"] == 3
    assert call["no_catchup"] is True
    assert call["params"] == {"target_metric": 0.95}
    assert call["pipeline_package_path"] == str(pipeline_yaml)
    assert call["pipeline_package_path:pipeline_name"] == "zeus-recurrence"
    assert call["enable_caching"] is False
    assert "recurring_run_id=rr-7" in result.output


def test_schedule_an_uploaded_pipeline_checks_params_against_that_pipeline(
    kfp_client: Recorder, pipeline_yaml, tmp_path: Path
) -> None:
    """--pipeline-id without --version-id schedules the newest version (kfp.Client itself refuses a pipeline id
    alone), and --param is checked against that version's own parameters, not against any other package:
    default_batch_size=512 is one of the example job's batch sizes and not the newest version's (ux.frames.SPEC)."""
    from zeus_kfp.pipelines.compile import compile_pipeline

    example = compile_pipeline(tmp_path / "example.yaml", attempts=2)
    kfp_client.add_version("pipe-1", "ver-old", example)
    kfp_client.add_version("pipe-1", "ver-new", pipeline_yaml)
    args = ["schedule", "--host", HOST, "--cron", "0 30 1 * * MON-FRI", "--pipeline-id", "pipe-1"]
    newest = runner.invoke(app, [*args, "--param", "default_batch_size=512"])
    assert newest.exit_code == 2 and "invalid default_batch_size=512" in newest.output, newest.output
    assert kfp_client.only("list_pipeline_versions")["sort_by"] == "created_at desc"
    assert kfp_client.named("create_recurring_run") == []
    assert invoke(*args, "--param", "default_batch_size=256").exit_code == 0
    call = kfp_client.only("create_recurring_run")
    assert (call["pipeline_id"], call["version_id"], call["pipeline_package_path"]) == ("pipe-1", "ver-new", None)
    assert call["params"] == {"default_batch_size": 256}
    assert call["max_concurrency"] == 1 and call["no_catchup"] is False

    assert invoke(*args, "--version-id", "ver-old", "--param", "default_batch_size=512").exit_code == 0
    assert kfp_client.named("create_recurring_run")[-1]["version_id"] == "ver-old"
    both = runner.invoke(app, [*args, "--package", str(pipeline_yaml)])
    assert both.exit_code == 2 and "no --package with --pipeline-id" in both.output


def test_a_package_compiled_for_another_backend_is_refused(kfp_client: Recorder, tmp_path: Path) -> None:
    """The cluster's healthz says KFP 2.15.0 (Kubeflow 1.11); a package compiled for 2.17 names SeaweedFS'
    endpoint, which 1.11 does not have: refused before anything is created, saying what to compile."""
    from zeus_kfp.pipelines.compile import compile_pipeline

    package = compile_pipeline(tmp_path / "p.yaml", kfp_backend="2.17", attempts=1)
    kfp_client.tag_name = "2.15.0"
    for command in (["submit"], ["upload"], ["schedule", "--cron", "0 0 2 * * *"]):
        result = runner.invoke(app, [*command, "--host", HOST, "--package", str(package)])
        assert result.exit_code == 2, result.output
        assert "runs KFP 2.15.0 (Kubeflow 1.11)" in result.output and "--kfp-backend 2.15" in result.output
    assert kfp_client.api_calls() == [] or set(kfp_client.api_calls()) == {"get_pipeline_id"}
    kfp_client.tag_name = "2.17.1"
    assert invoke("submit", "--host", HOST, "--package", str(package)).exit_code == 0


def test_a_five_field_cron_is_refused_with_an_example(kfp_client: Recorder) -> None:
    result = runner.invoke(app, ["schedule", "--host", HOST, "--cron", "0 2 * * *"])
    assert result.exit_code == 2
    assert "invalid cron='0 2 * * *'" in result.output
    assert "6 space-separated fields" in result.output and "'0 0 2 * * *'" in result.output
    assert kfp_client.calls == []  # refused before compiling or connecting


def test_max_concurrency_must_be_at_least_one(kfp_client: Recorder) -> None:
    result = runner.invoke(app, ["schedule", "--host", HOST, "--cron", "0 0 2 * * *", "--max-concurrency", "0"])
    assert result.exit_code == 2
    assert "invalid max_concurrency=0" in result.output and ">= 1" in result.output
    assert kfp_client.calls == []


def test_a_missing_package_or_host_names_the_option(kfp_client: Recorder, tmp_path, pipeline_yaml) -> None:
    missing = tmp_path / "nope.yaml"
    result = runner.invoke(app, ["submit", "--host", HOST, "--package", str(missing)])
    assert result.exit_code == 2 and "invalid package=" in result.output and "zeus-kfp compile" in result.output
    result = runner.invoke(app, ["upload", "--package", str(pipeline_yaml)])
    assert result.exit_code == 2 and "invalid host=''" in result.output and "KFP API URL" in result.output
    assert kfp_client.named("create_run_from_pipeline_package") == [] and kfp_client.named("upload_pipeline") == []


@pytest.mark.parametrize("cron", ["0 0 9 ? * 2-6", "*/30 * * * * *", "0 0 2 * * MON-FRI", "0 0,30 8-18/2 1 JAN *"])
def test_valid_crons(cron: str) -> None:
    assert validate_cron(cron) == cron


@pytest.mark.parametrize(
    ("cron", "field"),
    [
        ("60 * * * * *", "seconds"),
        ("0 0 24 * * *", "hours"),
        ("0 0 2 0 * *", "day of month"),
        ("0 0 2 * 13 *", "month"),
        ("0 0 2 * * 7", "day of week"),
        ("0 */0 * * * *", "minutes"),
        ("0 0 2 * * * 2030", "6 space-separated"),
    ],
)
def test_invalid_crons_name_the_field(cron: str, field: str) -> None:
    with pytest.raises(ClusterInputError, match=field) as err:
        validate_cron(cron)
    assert err.value.field == "cron"


def test_without_package_the_compiled_default_is_sent_as_it_is_and_nothing_is_compiled(
    kfp_client: Recorder, pipeline_yaml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """upload/submit/schedule send the file `zeus-kfp compile` wrote (./zeus_pipeline.yaml by default), byte
    for byte; without one they refuse, naming --package, and never compile a pipeline of their own."""
    from zeus_kfp.pipelines import compile as compile_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(compile_module, "compile_pipeline", None)  # whoever compiles now fails loudly
    for command in (["upload"], ["submit"], ["schedule", "--cron", "0 0 2 * * *"]):
        result = runner.invoke(app, [*command, "--host", HOST])
        assert result.exit_code == 2, result.output
        assert "invalid package=None" in result.output and "zeus_pipeline.yaml is not here" in result.output
    assert kfp_client.calls == []
    (tmp_path / "zeus_pipeline.yaml").write_bytes(pipeline_yaml.read_bytes())
    assert invoke("upload", "--host", HOST).exit_code == 0
    assert invoke("submit", "--host", HOST, "--param", "max_epochs=4").exit_code == 0
    assert invoke("schedule", "--host", HOST, "--cron", "0 0 2 * * *").exit_code == 0
    sent = [
        kfp_client.only("upload_pipeline")["pipeline_package_path:text"],
        kfp_client.only("create_run_from_pipeline_package")["pipeline_file:text"],
        kfp_client.only("create_recurring_run")["pipeline_package_path:text"],
    ]
    assert sent == [pipeline_yaml.read_text()] * 3


@pytest.mark.parametrize("option", ["--gpus", "--attempts", "--minio-secret", "--image", "--kfp-backend"])
def test_compile_options_are_compiles_alone(kfp_client: Recorder, pipeline_yaml, option: str) -> None:
    """A compile option on upload/submit/schedule would mean a pipeline other than the package: not an option."""
    result = runner.invoke(app, ["submit", "--host", HOST, "--package", str(pipeline_yaml), option, "2"])
    assert result.exit_code == 2 and "No such option" in result.output
    assert kfp_client.calls == []


def test_api_failures_say_what_to_check_without_the_token(
    kfp_client: Recorder, pipeline_yaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kfp_server_api.exceptions import ApiException

    monkeypatch.setenv("KFP_TOKEN", "tok-abc-999")
    kfp_client.fail_with = ApiException(status=401, reason="Unauthorized")
    result = runner.invoke(app, ["submit", "--host", HOST, "--package", str(pipeline_yaml)])
    assert result.exit_code == 1
    assert f"the KFP API at {HOST} failed with HTTP 401 Unauthorized" in result.output
    assert "$KFP_TOKEN" in result.output and "tok-abc-999" not in result.output


@pytest.mark.parametrize("name", ["s3_secret_key", "API-TOKEN", "password", "aws_access_key_id", "credentials"])
def test_credential_like_parameter_names_are_refused(name: str) -> None:
    with pytest.raises(ClusterInputError, match="Kubernetes Secret"):
        parse_arguments([f"{name}=x"], {name: {"parameterType": "STRING"}})


def test_a_word_that_merely_contains_token_is_a_normal_parameter() -> None:
    assert parse_arguments(["tokenizer=bpe"], {"tokenizer": {"parameterType": "STRING"}}) == {"tokenizer": "bpe"}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["job_id=../x"], "invalid job_id='../x'"),
        (["batch_sizes=[16,32]"], "invalid default_batch_size=128: allowed one of batch_sizes [16, 32]"),
        (["max_epochs=0"], "invalid max_epochs=0"),
        (
            ["policy=greedy"],
            "invalid policy='greedy': allowed one of turning-walk, zeus-nsdi23, default (= turning-walk)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_run_arguments_are_checked_against_the_job_rules_before_any_network_call(
    kfp_client: Recorder, pipeline_yaml, command: str, params: list[str], message: str
) -> None:
    """The job model's own rules (zeus_kfp.steps.spec_from_params, as preprocess applies them), with the
    package's defaults filled in: refused before kfp.Client is even constructed."""
    args = [command, "--host", HOST, "--package", str(pipeline_yaml)]
    args += ["--cron", "0 0 2 * * *"] if command == "schedule" else []
    for param in params:
        args += ["--param", param]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert kfp_client.calls == []


def test_schedule_sends_the_recurrence_gates_settings_as_run_parameters(kfp_client: Recorder, pipeline_yaml) -> None:
    """Hourly ticks that open a recurrence daily or on drift, one at a time: the gate's settings travel as the
    pipeline's own run parameters, checked like any --param."""
    result = invoke(
        "schedule", "--host", HOST, "--cron", "0 0 * * * *", "--package", str(pipeline_yaml),
        "--period-s", "86400", "--drift-detector", "psi", "--drift-data", "/data/in.parquet", "--max-running", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert kfp_client.only("create_recurring_run")["params"] == {
        "period_s": 86400.0, "drift_detector": "psi", "drift_data": "/data/in.parquet", "max_running": 2,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--max-running", "-1"],
            "invalid max_running=-1: allowed an integer from 0 to 9223372036854775807 (0: no cap)",
        ),
        (["--period-s", "-5"], "invalid period_s=-5.0: allowed a number of seconds >= 0"),
        (["--drift-detector", "kl"], "invalid drift_detector='kl': allowed one of none, fingerprint, rows, psi, ks"),
        (["--drift-detector", "ks"], "invalid drift_data='': allowed a Parquet or CSV file or directory"),
    ],
)
def test_schedule_refuses_bad_gate_settings_naming_the_field(kfp_client: Recorder, pipeline_yaml, args, message):
    base = ["schedule", "--host", HOST, "--cron", "0 0 * * * *", "--package", str(pipeline_yaml)]
    result = runner.invoke(app, [*base, *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert kfp_client.named("create_recurring_run") == []


def test_submit_force_is_the_runs_force_parameter(kfp_client: Recorder, pipeline_yaml) -> None:
    assert invoke("submit", "--host", HOST, "--package", str(pipeline_yaml), "--force").exit_code == 0
    assert kfp_client.only("create_run_from_pipeline_package")["arguments"] == {"force": True}
