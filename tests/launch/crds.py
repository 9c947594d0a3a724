"""JSON-schema validators made from the shipped Kubeflow CRDs (tests/data/crds), for the launcher's manifests.

A CRD's OpenAPI v3 schema is JSON schema plus `x-kubernetes-*` annotations. Two things the API
server enforces are not constraints a plain validator sees, so they are added here:
- unknown fields: the API server refuses them under strict field validation (kubectl's default, and
  what the launcher asks for), so every object schema that lists its properties gets
  `additionalProperties: false` (unless it says x-kubernetes-preserve-unknown-fields); without strict
  validation it drops them instead (`prune`), which is how a Trainer v2.2 TrainJob loses its runtimePatches
  on a v2.1 cluster;
- the CRDs' CEL rules on the object's name (RFC 1035 label, at most 63 characters).

The TrainJob CRD exists in three versions (TRAINER_VERSIONS: what Kubeflow 1.11 ships, v2.2.0 and the latest,
v2.3.0); every function takes the version, default the latest.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = Path(__file__).resolve().parents[1] / "data" / "crds"
CRD_FILES = {"TrainJob": "trainer.kubeflow.org_trainjobs.yaml", "PyTorchJob": "kubeflow.org_pytorchjobs.yaml"}
TRAINER_VERSIONS = ("v2.1.0", "v2.2.0", "v2.3.0")
LATEST = TRAINER_VERSIONS[-1]
RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _strict(value) for key, value in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _path(kind: str, trainer: str) -> Path:
    if kind == "TrainJob" and trainer != LATEST:
        return CRD_DIR / trainer / CRD_FILES[kind]
    return CRD_DIR / CRD_FILES[kind]


@cache
def crd(kind: str, trainer: str = LATEST) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRDs are 0.3-0.6 MB each
    docs = [d for d in yaml.load_all(_path(kind, trainer).read_text(), Loader=loader) if d]
    return docs[0]


def schema(kind: str, trainer: str = LATEST) -> dict[str, Any]:
    version = next(v for v in crd(kind, trainer)["spec"]["versions"] if v.get("storage"))
    return version["schema"]["openAPIV3Schema"]


@cache
def validator(kind: str, trainer: str = LATEST) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(_strict(schema(kind, trainer)))


def api_version(kind: str) -> str:
    spec = crd(kind)["spec"]
    return f"{spec['group']}/{next(v['name'] for v in spec['versions'] if v.get('storage'))}"


def plural(kind: str) -> str:
    return crd(kind)["spec"]["names"]["plural"]


def errors(manifest: dict[str, Any], trainer: str = LATEST) -> list[str]:
    """What the API server (with `trainer`'s TrainJob CRD) would refuse in `manifest` under strict field
    validation (empty: valid), each as 'path: message'."""
    kind = manifest.get("kind")
    if kind not in CRD_FILES:
        return [f"kind: {kind!r} is not one of {sorted(CRD_FILES)}"]
    found = [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator(kind, trainer).iter_errors(manifest)
    ]
    if manifest.get("apiVersion") != api_version(kind):
        found.append(f"apiVersion: {manifest.get('apiVersion')!r} is not {api_version(kind)!r}")
    name = (manifest.get("metadata") or {}).get("name", "")
    if not (isinstance(name, str) and RFC1035.match(name) and len(name) <= 63):
        found.append(f"metadata/name: {name!r} must be an RFC 1035 label of at most 63 characters")
    return found


def _prune(node: Any, node_schema: dict[str, Any]) -> Any:
    if isinstance(node, dict) and "properties" in node_schema:
        if node_schema.get("x-kubernetes-preserve-unknown-fields"):
            return node
        return {k: _prune(v, node_schema["properties"][k]) for k, v in node.items() if k in node_schema["properties"]}
    if isinstance(node, dict) and isinstance(node_schema.get("additionalProperties"), dict):
        return {k: _prune(v, node_schema["additionalProperties"]) for k, v in node.items()}
    if isinstance(node, list) and isinstance(node_schema.get("items"), dict):
        return [_prune(item, node_schema["items"]) for item in node]
    return node


def prune(manifest: dict[str, Any], trainer: str = LATEST) -> dict[str, Any]:
    """`manifest` as the API server stores it without strict field validation: fields the CRD does not know
    are dropped, silently (metadata is the API server's own object meta and kept whole)."""
    kind = manifest["kind"]
    out = copy.deepcopy(manifest)
    out["spec"] = _prune(out.get("spec", {}), schema(kind, trainer)["properties"]["spec"])
    return out


def openapi_document(trainer: str = LATEST) -> dict[str, Any]:
    """What the API server serves at /openapi/v3/apis/trainer.kubeflow.org/v1alpha1 for `trainer`'s CRD: its
    structural schema as a component, tagged with its group, version and kind."""
    spec = crd("TrainJob", trainer)["spec"]
    version = next(v for v in spec["versions"] if v.get("storage"))
    gvk = {"group": spec["group"], "version": version["name"], "kind": spec["names"]["kind"]}
    component = dict(schema("TrainJob", trainer), **{"x-kubernetes-group-version-kind": [gvk]})
    name = f"org.kubeflow.trainer.{version['name']}.{gvk['kind']}"
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "components": {"schemas": {name: component}},
    }
