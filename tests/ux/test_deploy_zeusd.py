"""deploy/zeusd: every manifest loads into the kubernetes client's typed models, and the DaemonSet
opens zeusd where the compiled train step looks for it (the node's IP, zeusd's port)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient

from pipelines.platform import ZEUSD_HOST_ENV
from zeus.power.zeusd import DEFAULT_PORT

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "zeusd"


def kustomization() -> dict:
    return yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


def manifests() -> list[Path]:
    return sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")


class _Response:
    """What ApiClient.deserialize reads: a body as the API server would send it."""

    def __init__(self, obj: dict) -> None:
        self.data = json.dumps(obj)


def typed(obj: dict):
    """The object as the kubernetes client's model (V1DaemonSet, ...). Unknown fields are dropped
    by the client, so the round trip must give back exactly what the file says."""
    group_version = obj["apiVersion"].rsplit("/", 1)[-1]
    model = ApiClient().deserialize(_Response(obj), f"{group_version.capitalize()}{obj['kind']}")
    assert ApiClient().sanitize_for_serialization(model) == obj, f"fields the API does not know in {obj['kind']}"
    return model


def test_kustomization_lists_every_manifest():
    assert sorted(kustomization()["resources"]) == [p.name for p in manifests()]


@pytest.mark.parametrize("path", manifests(), ids=lambda p: p.name)
def test_every_manifest_loads_into_the_typed_models(path):
    for obj in yaml.safe_load_all(path.read_text()):
        model = typed(obj)
        assert model.metadata.name


def test_a_misspelt_field_fails_the_round_trip():
    obj = yaml.safe_load((DEPLOY / "serviceaccount.yaml").read_text())
    obj["automountServiceAcountToken"] = False
    with pytest.raises(AssertionError, match="fields the API does not know"):
        typed(obj)


def test_daemonset_runs_on_gpu_nodes_with_the_port_the_train_step_calls(tmp_path):
    ds = typed(yaml.safe_load((DEPLOY / "daemonset.yaml").read_text()))
    pod = ds.spec.template.spec
    (term,) = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [
        ("nvidia.com/gpu.present", "In", ["true"])
    ]
    assert any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.tolerations)
    (container,) = pod.containers
    (port,) = container.ports
    assert port.host_port == port.container_port == DEFAULT_PORT
    assert container.args[-1] == f"0.0.0.0:{DEFAULT_PORT}" and "tcp" in container.args
    assert container.security_context.capabilities.add == ["SYS_ADMIN"]
    assert not container.security_context.privileged
    assert container.image == kustomization()["images"][0]["name"]
    assert not pod.automount_service_account_token

    # ... and the compiled train step gets the node's IP under the name zeus.power.zeusd reads
    from pipelines.compile import compile_pipeline

    path = compile_pipeline(tmp_path / "p.yaml", attempts=1, gpus=1)
    executors = list(yaml.safe_load_all(path.read_text()))[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert {"fieldPath": "status.hostIP", "name": ZEUSD_HOST_ENV} in executors["exec-attempt-1-train"]["fieldPathAsEnv"]
