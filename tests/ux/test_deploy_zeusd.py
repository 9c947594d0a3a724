"""deploy/zeusd: every manifest loads into the kubernetes client's typed models, the DaemonSet opens zeusd
where the compiled train step looks for it (the node's IP, zeusd's port), it schedules on the GPU nodes of
GPU-Operator, GKE, EKS and AKS clusters alike, and each overlay's patch applies to it (jsonpatch, as kustomize
applies a JSON 6902 patch) and gives a DaemonSet the API accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient

from zeus_kfp.pipelines.platform import ZEUSD_HOST_ENV
from zeus_kfp.power.zeusd import DEFAULT_PORT

ROOT = Path(__file__).resolve().parents[2] / "deploy" / "zeusd"
DEPLOY = ROOT / "base"
OVERLAYS = sorted(p.parent for p in (ROOT / "overlays").glob("*/kustomization.yaml"))


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
    terms = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [[(e.key, e.operator, e.values) for e in t.match_expressions] for t in terms] == [
        [("nvidia.com/gpu.present", "In", ["true"])],  # GPU feature discovery / the GPU Operator
        [("cloud.google.com/gke-accelerator", "Exists", None)],  # GKE
        [("k8s.amazonaws.com/accelerator", "Exists", None)],  # EKS
        [("kubernetes.azure.com/accelerator", "Exists", None)],  # AKS
    ]  # node selector terms are ORed: any GPU node of any of these
    assert pod.runtime_class_name is None  # a RuntimeClass only the GPU Operator installs would be refused elsewhere
    assert any(t.key == "nvidia.com/gpu" and t.effect == "NoSchedule" for t in pod.tolerations)
    (container,) = pod.containers
    (port,) = container.ports
    assert port.host_port == port.container_port == DEFAULT_PORT
    assert container.args[-1] == f"0.0.0.0:{DEFAULT_PORT}" and "tcp" in container.args
    assert container.security_context.capabilities.add == ["SYS_ADMIN"]
    assert not container.security_context.privileged
    assert container.image == kustomization()["images"][0]["name"]
    assert not pod.automount_service_account_token

    # ... and the compiled train step gets the node's IP under the name zeus_kfp.power.zeusd reads
    from zeus_kfp.pipelines.compile import compile_pipeline

    path = compile_pipeline(tmp_path / "p.yaml", attempts=1, gpus=1)
    executors = list(yaml.safe_load_all(path.read_text()))[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert {"fieldPath": "status.hostIP", "name": ZEUSD_HOST_ENV} in executors["exec-attempt-1-train"]["fieldPathAsEnv"]


def overlay(path: Path) -> dict:
    """The base DaemonSet with the overlay's JSON 6902 patches applied."""
    import jsonpatch

    kustomization = yaml.safe_load((path / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../../base"]
    ds = yaml.safe_load((DEPLOY / "daemonset.yaml").read_text())
    for patch in kustomization["patches"]:
        assert patch["target"] == {"kind": "DaemonSet", "name": "zeusd"}
        ds = jsonpatch.apply_patch(ds, yaml.safe_load(patch["patch"]))
    return ds


def test_the_default_kustomization_is_the_base_and_every_overlay_patches_it_into_a_valid_daemonset():
    assert yaml.safe_load((ROOT / "kustomization.yaml").read_text())["resources"] == ["base"]
    assert [p.name for p in OVERLAYS] == ["gke", "nvidia-runtime-class"]
    for path in OVERLAYS:
        typed(overlay(path))


def test_the_runtime_class_overlay_names_the_gpu_operators_runtime():
    pod = typed(overlay(ROOT / "overlays" / "nvidia-runtime-class")).spec.template.spec
    assert pod.runtime_class_name == "nvidia"


def test_the_gke_overlay_reaches_the_hosts_driver_on_gke_gpu_nodes():
    pod = typed(overlay(ROOT / "overlays" / "gke")).spec.template.spec
    (volume,) = pod.volumes
    assert volume.host_path.path == "/home/kubernetes/bin/nvidia"  # where GKE installs the driver
    (container,) = pod.containers
    (mount,) = container.volume_mounts
    env = {e.name: e.value for e in container.env}
    assert env["LD_LIBRARY_PATH"] == f"{mount.mount_path}/lib64" and mount.read_only
    assert container.security_context.privileged  # every /dev/nvidia* of the node, without requesting a GPU
    assert not container.resources.limits.get("nvidia.com/gpu")
    (term,) = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [(e.key, e.operator) for e in term.match_expressions] == [("cloud.google.com/gke-accelerator", "Exists")]


def test_zeusd_is_the_pinned_build_the_makefile_makes():
    """The DaemonSet's image is the one `make image-zeusd` builds from a fixed ml-energy/zeus commit, never a
    moving tag (latest is zeusd v0.5.0 at best, which lists no PCI address; master moves)."""
    import subprocess

    (image,) = kustomization()["images"]
    built = subprocess.run(["make", "-n", "image-zeusd"], cwd=ROOT.parents[1], capture_output=True, text=True,
                           check=True).stdout  # fmt: skip
    assert f"-t {image['newName']}:{image['newTag']} " in built
    commit = built.split("zeus.git#", 1)[1].split(":", 1)[0]
    assert len(commit) == 40 and commit.startswith(image["newTag"]) and image["newTag"] not in ("latest", "master")
