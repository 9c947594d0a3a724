"""ConfigMaps in the STAND-IN Kubernetes API server (kube_api_server.py): created, patched, deleted, as the API
server answers them, and delivered to the pods that mount them. No cluster is used.

What the API server does and the stand-in does too: create (409 when the name is taken), get, delete (404
when gone), and PATCH in the three body types the kubernetes client sends: a JSON patch (a list of
operations; the client's choice for a list body), a strategic merge patch (its choice for a dict body: on a
ConfigMap's `data`, a plain merge of keys) and a JSON merge patch. A refusal by RBAC is a 403 for every
verb, when the test says the step's service account has no rights on configmaps.

What the kubelet does, at each of its syncs (about a minute apart on a real node): write the keys of every
ConfigMap a running pod mounts as a directory into that directory (stand_in_kubelet.PodProcesses.sync). Here
the sync is an event, not a period: the stand-in syncs every pod right after each change of a ConfigMap,
before it answers the change, so a test's outcome never waits on a clock.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable
from typing import Any

from .kube_objects import status_body

JSON_PATCH = "application/json-patch+json"


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def json_patch(obj: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902's add, replace and remove on object members (all the launcher sends)."""
    out = copy.deepcopy(obj)
    for op in operations:
        *parents, last = [_unescape(t) for t in op["path"].lstrip("/").split("/")]
        node = out
        for key in parents:
            node = node[key]  # a KeyError is the API server's 422: the path does not exist
        if op["op"] in ("add", "replace"):
            if op["op"] == "replace" and last not in node:
                raise KeyError(op["path"])
            node[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del node[last]
        else:
            raise KeyError(f"operation {op['op']!r}")
    return out


def merge_patch(obj: Any, patch: Any) -> Any:
    """RFC 7386 (a strategic merge patch of a ConfigMap's data and metadata maps is the same): maps merge key by
    key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class ConfigMaps:
    """The namespace-scoped ConfigMaps of the stand-in, and the kubelet's sync after each change (`on_change`)."""

    def __init__(self, record: Callable[..., None], on_change: Callable[[str], None]) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.forbidden = False  # RBAC: the caller may do nothing with configmaps (403 for every verb)
        self.record, self.on_change = record, on_change
        self.ever: list[dict[str, Any]] = []  # every ConfigMap as created
        self._versions: list[tuple[str, str, dict[str, str]]] = []  # (namespace, name, data) after each change

    def versions(self, namespace: str, name: str) -> list[dict[str, str]]:
        """A ConfigMap's data as it was after each create and patch, in order."""
        return [data for ns, n, data in self._versions if (ns, n) == (namespace, name)]

    def data(self, namespace: str, name: str) -> dict[str, str] | None:
        found = self.objects.get((namespace, name))
        return None if found is None else dict(found.get("data") or {})

    def serve(self, verb: str, namespace: str, name: str | None, body: Any, content_type: str) -> tuple[int, dict]:
        """(status, body) of one request, as the API server answers it."""
        call = {"POST": "create", "GET": "get", "PATCH": "patch", "DELETE": "delete"}.get(verb, verb.lower())
        if not name and isinstance(body, dict):
            name = (body.get("metadata") or {}).get("name", "")
        name = name or ""
        self.record(call, "ConfigMap", name)
        if self.forbidden:
            message = (
                f'configmaps "{name}" is forbidden: User "system:serviceaccount:{namespace}:pipeline-runner" cannot '
                f'{call} resource "configmaps" in API group "" in the namespace "{namespace}"'
            )
            return 403, status_body(403, "Forbidden", message)
        key, found = (namespace, name), self.objects.get((namespace, name))
        if call == "create":
            if found is not None:
                return 409, status_body(409, "AlreadyExists", f'configmaps "{name}" already exists')
            created = copy.deepcopy(body)
            created["metadata"].update(
                namespace=namespace,
                uid=str(uuid.uuid4()),
                resourceVersion="1",
                creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            self.objects[key] = created
            self.ever.append(copy.deepcopy(created))
        elif found is None:
            return 404, status_body(404, "NotFound", f'configmaps "{name}" not found')
        elif call == "patch":
            try:
                patched = json_patch(found, body) if content_type == JSON_PATCH else merge_patch(found, body)
            except (KeyError, TypeError) as exc:
                return 422, status_body(422, "Invalid", f"the patch does not apply: {exc}")
            patched["metadata"]["resourceVersion"] = str(int(found["metadata"]["resourceVersion"]) + 1)
            self.objects[key] = patched
        elif call == "delete":
            del self.objects[key]
            self.on_change(namespace)
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        elif call != "get":
            return 405, status_body(405, "MethodNotAllowed", verb)
        if call != "get":
            self._versions.append((namespace, name, dict(self.objects[key].get("data") or {})))
            self.on_change(namespace)
        return (201 if call == "create" else 200), copy.deepcopy(self.objects[key])
