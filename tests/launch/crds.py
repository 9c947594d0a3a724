"""JSON-schema validators made from the shipped Kubeflow CRDs (tests/data/crds), for the launcher's manifests.

A CRD's OpenAPI v3 schema is JSON schema plus `x-kubernetes-*` annotations. Two things the API
server enforces are not constraints a plain validator sees, so they are added here:
- unknown fields: the API server refuses them under strict field validation (kubectl's default),
  so every object schema that lists its properties gets `additionalProperties: false` (unless it
  says x-kubernetes-preserve-unknown-fields);
- the CRDs' CEL rules on the object's name (RFC 1035 label, at most 63 characters).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = Path(__file__).resolve().parents[1] / "data" / "crds"
CRD_FILES = {"TrainJob": "trainer.kubeflow.org_trainjobs.yaml", "PyTorchJob": "kubeflow.org_pytorchjobs.yaml"}
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


@cache
def crd(kind: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRDs are 0.5-0.6 MB each
    return yaml.load((CRD_DIR / CRD_FILES[kind]).read_text(), Loader=loader)


@cache
def validator(kind: str) -> jsonschema.Draft7Validator:
    version = next(v for v in crd(kind)["spec"]["versions"] if v.get("storage"))
    return jsonschema.Draft7Validator(_strict(version["schema"]["openAPIV3Schema"]))


def api_version(kind: str) -> str:
    spec = crd(kind)["spec"]
    return f"{spec['group']}/{next(v['name'] for v in spec['versions'] if v.get('storage'))}"


def plural(kind: str) -> str:
    return crd(kind)["spec"]["names"]["plural"]


def errors(manifest: dict[str, Any]) -> list[str]:
    """What the API server would refuse in `manifest` (empty: valid), each as 'path: message'."""
    kind = manifest.get("kind")
    if kind not in CRD_FILES:
        return [f"kind: {kind!r} is not one of {sorted(CRD_FILES)}"]
    found = [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator(kind).iter_errors(manifest)
    ]
    if manifest.get("apiVersion") != api_version(kind):
        found.append(f"apiVersion: {manifest.get('apiVersion')!r} is not {api_version(kind)!r}")
    name = (manifest.get("metadata") or {}).get("name", "")
    if not (isinstance(name, str) and RFC1035.match(name) and len(name) <= 63):
        found.append(f"metadata/name: {name!r} must be an RFC 1035 label of at most 63 characters")
    return found
