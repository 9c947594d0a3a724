"""The fleet pipeline (every job of a store in one report) on the KFP backends people have: compiled through
`zeus-kfp compile --fleet` for every target, with and without the store's Secret, it parses strictly against that
backend's protos and trips none of its hazards, as the recurrence pipeline does (test_kfp_backends.py); and it can
be scheduled."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from backend_protos import load_schema
from typer.testing import CliRunner
from ux.conftest import kfp_client  # noqa: F401  (the recorded kfp.Client fixture)

from zeus_kfp.cli import app
from zeus_kfp.pipelines.backends import TARGETS
from zeus_kfp.pipelines.compat import check

SECRET = "mlpipeline-minio-artifact"
CASES = [(target, secret) for target in TARGETS for secret in (None, SECRET)]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[tuple[str, str | None], list[dict]]:
    root = tmp_path_factory.mktemp("fleet")
    out = {}
    for target, secret in CASES:
        path = root / f"fleet-{target}-{bool(secret)}.yaml"
        args = ["compile", "--fleet", "-o", str(path), "--kfp-backend", target]
        result = CliRunner().invoke(app, args + (["--minio-secret", secret] if secret else []))
        assert result.exit_code == 0, result.output
        assert f"the fleet pipeline for KFP {target}" in result.output
        out[(target, secret)] = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
    return out


@pytest.fixture(scope="module")
def schemas(tmp_path_factory):
    work = tmp_path_factory.mktemp("protoc")
    return {name: load_schema(backend.release, work) for name, backend in TARGETS.items()}


@pytest.mark.parametrize(("target", "secret"), CASES)
def test_the_fleet_pipeline_parses_strictly_against_its_targets_protos(compiled, schemas, target, secret):
    assert schemas[target].problems(compiled[(target, secret)]) == []


@pytest.mark.parametrize(("target", "secret"), CASES)
def test_the_fleet_pipeline_trips_no_hazard_of_its_target(compiled, target, secret):
    assert check(compiled[(target, secret)], TARGETS[target].version) == []


def test_the_2_17_fleet_pipeline_with_the_secret_is_refused_by_2_5s_protos(compiled, schemas):
    """The check can fail: 2.17's YAML carries secretAsEnv.optional, which 2.5 does not know."""
    problems = schemas["2.5"].problems(compiled[("2.17", SECRET)])
    assert problems and all('no field named "optional"' in p for p in problems)


@pytest.mark.parametrize("target", list(TARGETS))
def test_one_uncached_store_step_with_the_store_secret_endpoint_and_namespace(compiled, target):
    spec, platform = compiled[(target, SECRET)]
    assert list(spec["deploymentSpec"]["executors"]) == ["exec-fleet-report"]
    (task,) = spec["root"]["dag"]["tasks"].values()
    assert not task.get("cachingOptions", {}).get("enableCache")
    container = spec["deploymentSpec"]["executors"]["exec-fleet-report"]["container"]
    assert {e["name"] for e in container["env"]} == {"ZEUS_S3_ENDPOINT"}
    assert container["env"][0]["value"].endswith(TARGETS[target].store_endpoint)
    (executor,) = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"].values()
    assert executor["secretAsEnv"][0]["secretName"] == SECRET
    assert executor["fieldPathAsEnv"][0]["fieldPath"] == "metadata.namespace"  # {namespace} in the store URI
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["store_uri"]["defaultValue"] == "s3://mlpipeline/private/{namespace}/zeus-kfp"
    assert set(params) == {"store_uri", "jobs", "since", "until", "carbon_intensity", "namespace"}


def test_the_fleet_pipeline_can_be_scheduled_with_its_own_parameters(kfp_client, compiled, tmp_path):  # noqa: F811
    path = tmp_path / "fleet.yaml"
    assert CliRunner().invoke(app, ["compile", "--fleet", "-o", str(path)]).exit_code == 0
    args = ["schedule", "--host", "http://kfp.test", "--cron", "0 0 6 * * MON", "--name", "zeus-kfp-fleet",
            "--package", str(path), "--param", "since=7d", "--param", "carbon_intensity=350"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    call = kfp_client.only("create_recurring_run")
    assert call["params"] == {"since": "7d", "carbon_intensity": 350.0}
    assert call["pipeline_package_path:pipeline_name"] == "zeus-kfp-fleet"
    wrong = CliRunner().invoke(app, [*args[:-4], "--param", "target_metric=0.9"])
    assert wrong.exit_code == 2, wrong.output  # a parameter of the recurrence pipeline, not of this one


def test_the_component_is_a_few_lines_that_call_zeus_kfp():
    source = (Path(__file__).resolve().parents[2] / "components" / "fleet.py").read_text()
    body = source.split('"""', 4)[-1]  # after the docstrings: the call
    assert "from zeus_kfp.steps.fleet import fleet_report" in body and len(body.strip().splitlines()) <= 5
