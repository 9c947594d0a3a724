"""`zeus-kfp doctor` against the local stand-in of the KFP API (ux/kfp_api_server.py) and the S3
server: the stand-in plays backends of several versions and modes; nothing leaves 127.0.0.1."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ux.kfp_api_server import KfpApiServer
from zeus_kfp.cli import app
from zeus_kfp.pipelines.compile import compile_pipeline

TOKEN = "tok-doctor-secret-7"


@pytest.fixture
def kfp_api(tmp_path, monkeypatch: pytest.MonkeyPatch):
    for name in ("KFP_HOST", "KFP_NAMESPACE", "ZEUS_S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with KfpApiServer() as server:
        server.state.token = TOKEN
        yield server


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("doctor")
    return {b: compile_pipeline(root / f"{b}.yaml", kfp_backend=b, attempts=2) for b in ("2.5", "2.15")}


def doctor(*args: str):
    return CliRunner().invoke(app, ["doctor", *args])


def lines(result, status: str) -> list[str]:
    return [ln for ln in result.output.splitlines() if ln.startswith(status)]


def test_a_matching_backend_and_namespace_pass_and_the_rest_is_named_unchecked(kfp_api, packages):
    kfp_api.state.tag_name, kfp_api.state.multi_user, kfp_api.state.namespaces = "2.15.0", True, {"team-a"}
    result = doctor("--host", kfp_api.url, "--namespace", "team-a", "--package", str(packages["2.15"]))
    assert result.exit_code == 0, result.output
    ok = "\n".join(lines(result, "ok"))
    assert "backend version: KFP 2.15.0 (Kubeflow 1.11), the pipeline's compiled target 2.15" in ok
    assert "backend hazards" in ok and "namespace: team-a reachable with the token" in ok
    unchecked = "\n".join(lines(result, "not checked"))
    assert "s3://mlpipeline/private/team-a/zeus-kfp: set ZEUS_S3_ENDPOINT" in unchecked
    assert "zeusd" in unchecked and "Secret" in unchecked
    assert TOKEN not in result.output
    experiments = [r for r in kfp_api.state.requests if r.path.endswith("/experiments")]
    assert experiments and experiments[0].query["namespace"] == "team-a"


def test_a_package_for_another_backend_fails_saying_what_to_compile(kfp_api, packages):
    kfp_api.state.tag_name = "2.5.0"
    result = doctor("--host", kfp_api.url, "--package", str(packages["2.15"]))
    assert result.exit_code == 1
    (failure,) = [ln for ln in lines(result, "FAIL") if "backend version" in ln]
    assert "KFP 2.5.0, but the pipeline was compiled for 2.15: compile with --kfp-backend 2.5" in failure
    hazards = "\n".join(ln for ln in lines(result, "FAIL") if "backend hazards" in ln)
    assert "hazard 6" in hazards and "attempt-2-bandit" in hazards  # nested retries 2.5 would ignore


@pytest.mark.parametrize(("tag", "target"), [("2.16.0", "2.16"), ("2.16.3", "2.16"), ("2.17.1", "2.17")])
def test_a_2_16_backend_is_told_to_compile_for_2_16_whose_store_is_seaweedfs(kfp_api, packages, tag, target):
    """KFP 2.16's manifests have no minio-service any more: the 2.15 YAML's store endpoint would not resolve
    there, so doctor names 2.16 (SeaweedFS), never 2.15, for it."""
    from zeus_kfp.pipelines.backends import SEAWEEDFS_ENDPOINT, TARGETS, closest_target, parse_version

    kfp_api.state.tag_name = tag
    result = doctor("--host", kfp_api.url, "--package", str(packages["2.15"]))
    assert result.exit_code == 1
    (failure,) = [ln for ln in lines(result, "FAIL") if "backend version" in ln]
    assert f"compile with --kfp-backend {target}" in failure
    assert closest_target(parse_version(tag)).store_endpoint == SEAWEEDFS_ENDPOINT == TARGETS[target].store_endpoint


def test_an_old_backend_is_refused(kfp_api, packages):
    kfp_api.state.tag_name = "2.3.0"
    result = doctor("--host", kfp_api.url, "--package", str(packages["2.5"]))
    assert result.exit_code == 1
    assert any("KFP 2.3.0 is older than every supported backend" in ln for ln in lines(result, "FAIL"))


def test_a_backend_that_does_not_say_its_version_is_reported_unchecked(kfp_api, packages):
    kfp_api.state.tag_name = None
    result = doctor("--host", kfp_api.url, "--package", str(packages["2.5"]))
    assert result.exit_code == 0, result.output
    assert any("backend version: the KFP API did not say its version" in ln for ln in lines(result, "not checked"))


@pytest.mark.parametrize(
    ("namespace", "token", "message"),
    [
        ("team-b", TOKEN, "team-b refused the token with HTTP 403"),
        ("team-a", "wrong-token", "team-a refused the token with HTTP 401"),
        (None, TOKEN, "multi-user: give --namespace"),
    ],
)
def test_the_namespace_check_fails_on_a_refusal(kfp_api, packages, monkeypatch, namespace, token, message):
    kfp_api.state.tag_name, kfp_api.state.multi_user, kfp_api.state.namespaces = "2.17.0", True, {"team-a"}
    monkeypatch.setenv("KFP_TOKEN", token)
    args = ["--host", kfp_api.url, "--kfp-backend", "2.17"] + (["--namespace", namespace] if namespace else [])
    result = doctor(*args)
    assert result.exit_code == 1
    assert any(message in ln for ln in lines(result, "FAIL")), result.output
    assert "wrong-token" not in result.output


def test_the_store_is_checked_from_here_and_its_prefix_against_multi_user_rules(kfp_api, s3_store_uri):
    kfp_api.state.tag_name, kfp_api.state.multi_user = "2.17.0", False
    result = doctor("--host", kfp_api.url, "--kfp-backend", "2.17", "--store", s3_store_uri)
    assert result.exit_code == 0, result.output
    assert any(f"store: {s3_store_uri} usable from here (0 job(s))" in ln for ln in lines(result, "ok"))

    kfp_api.state.multi_user = True
    result = doctor(
        "--host", kfp_api.url, "--namespace", "team-a", "--kfp-backend", "2.17", "--store", "s3://mlpipeline/zeus"
    )
    (failure,) = [ln for ln in lines(result, "FAIL") if "store prefix" in ln]
    assert "mlpipeline/private-artifacts/team-a/*" in failure and "mlpipeline/shared/*" in failure


def test_an_unreachable_api_is_one_clear_failure(tmp_path, monkeypatch):
    import socket

    monkeypatch.delenv("ZEUS_S3_ENDPOINT", raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = doctor("--host", url, "--kfp-backend", "2.5", "--store", str(tmp_path / "store"))
    assert result.exit_code == 1
    assert any(f"KFP API: {url} did not answer" in ln for ln in lines(result, "FAIL"))
    assert any("store:" in ln and "usable from here" in ln for ln in lines(result, "ok")), "a local store still checks"
