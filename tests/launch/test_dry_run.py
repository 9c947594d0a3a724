"""`zeus-kfp dry-run` prints the job one trial of a compiled pipeline would create, for each Trainer version.

The printed manifests are validated against the CRD of the version they were asked for (and refused by the
other shape's), sent to the STAND-IN API server with strict field validation as `kubectl apply
--dry-run=server` would, and, without --trainer-version, the version is the stand-in cluster's own.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml
from typer.testing import CliRunner

from zeus_kfp.cli import app

from . import crds
from .kube_api_server import StandInServer

runner = CliRunner()
# (launcher, --trainer-version, the CRD versions its TrainJob must fit)
CASES = [
    ("trainjob", "2.1", ("v2.1.0",)),
    ("trainjob", "2.2", ("v2.2.0", "v2.3.0")),
    ("trainjob", "2.3", ("v2.2.0", "v2.3.0")),
    ("pytorchjob", None, (None,)),
]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("dry-run") / "zeus_pipeline.yaml"
    args = ["compile", "-o", str(out), "--kfp-backend", "2.15", "--launcher", "trainjob", "--image-pull-secret",
            "regcred", "--minio-secret", "mlpipeline-minio-artifact", "--train-node-selector", "pool=h100"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return str(out)


def dry_run(package: str, *args: str) -> tuple[list[str], dict]:
    result = runner.invoke(app, ["dry-run", "--package", package, "--namespace", "team-a", *args])
    assert result.exit_code == 0, result.output
    comments = [ln for ln in result.output.splitlines() if ln.startswith("#")]
    return comments, yaml.safe_load(result.output)


@pytest.mark.parametrize(("launcher", "version", "fits"), CASES)
def test_the_printed_manifest_is_the_one_that_version_accepts(package, launcher, version, fits):
    comments, m = dry_run(
        package, "--param", f"launcher={launcher}", *(["--trainer-version", version] if version else [])
    )
    assert m["kind"] == {"trainjob": "TrainJob", "pytorchjob": "PyTorchJob"}[launcher]
    assert m["metadata"]["namespace"] == "team-a" and m["metadata"]["name"].startswith("zeus-example-")
    if launcher == "pytorchjob":
        assert crds.errors(m) == []
    for trainer in crds.TRAINER_VERSIONS if launcher == "trainjob" else ():
        assert (crds.errors(m, trainer) == []) == (trainer in fits), trainer
    text = json.dumps(m)
    assert '"regcred"' in text and '"pool": "h100"' in text and "sidecar.istio.io/inject" in text
    assert "s3://mlpipeline/private/team-a/zeus-kfp" in text  # the run's namespace, not "{namespace}"
    assert any("gpu-power step reads at run time" in c for c in comments)


@pytest.mark.parametrize("trainer", crds.TRAINER_VERSIONS)
def test_without_a_version_the_clusters_own_is_used_and_the_server_accepts_it(package, tmp_path, monkeypatch, trainer):
    with StandInServer() as api:
        api.trainer = trainer
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "stand-in",
            "clusters": [{"name": "stand-in", "cluster": {"server": api.url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "u"}}],
        }))  # fmt: skip
        monkeypatch.setenv("KUBECONFIG", str(config))
        comments, m = dry_run(package)  # the package's own launcher: trainjob
        assert ("v2.1" if trainer == "v2.1.0" else "v2.2 or later") in comments[0]
        url = f"{api.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs?fieldValidation=Strict"
        request = urllib.request.Request(url, data=json.dumps(m).encode(), method="POST")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request) as response:  # kubectl apply --dry-run=server -f -, in effect
            assert response.status == 201
    assert api.created[0]["spec"] == m["spec"]  # stored as printed: nothing dropped


def test_a_launcher_that_creates_no_job_is_refused(package):
    result = runner.invoke(app, ["dry-run", "--package", package, "--param", "launcher=local"])
    assert result.exit_code == 2 and "invalid launcher='local'" in result.output


def test_without_a_kubeconfig_a_trainjob_dry_run_says_to_give_the_trainer_version(package, tmp_path, monkeypatch):
    """A laptop with no cluster configured (a newcomer saw 'unexpected ConfigException'): one line, the fix in it."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    result = runner.invoke(app, ["dry-run", "--package", package])
    assert result.exit_code == 2
    assert "invalid trainer_version" in result.output and "give --trainer-version" in result.output
    assert "2.1 (Kubeflow 1.11)" in result.output
