"""A stand-in for kfp.Client: there is no KFP cluster here, so the tests stop at the client.

Every call is bound to the real kfp.Client method's signature (a misspelt or missing argument
fails as it would against kfp), and every pipeline package is parsed with kfp's own package
reader at the moment of the call (so the file must exist then and be a pipeline kfp accepts).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kfp.client import Client as RealClient
from kfp.client.client import _extract_pipeline_yaml


class Recorder:
    """Collects the calls of every client the code under test constructs."""

    def __init__(self, existing_pipelines: dict[str, str] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.existing_pipelines = existing_pipelines or {}
        self.fail_with: Exception | None = None  # raised by every API call after __init__, like a down server
        self.tag_name: str | None = None  # the backend version healthz reports (None: it says none)
        # Uploaded pipelines' versions, oldest first: {pipeline_id: [(version_id, pipeline_spec as the API returns it)]}
        self.versions: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    def add_version(self, pipeline_id: str, version_id: str, package: Path) -> None:
        """A version of an uploaded pipeline holding `package`, its spec shaped as the KFP API returns it
        ({pipeline_spec, platform_spec} for a package with a PlatformSpec)."""
        import yaml

        docs = list(yaml.safe_load_all(Path(package).read_text()))
        spec = {"pipeline_spec": docs[0], "platform_spec": docs[1]} if len(docs) > 1 else docs[0]
        self.versions.setdefault(pipeline_id, []).append((version_id, spec))

    def api_calls(self) -> list[str]:
        """The methods called, in order, without the constructor and the backend version check."""
        return [method for method, _ in self.calls if method not in ("__init__", "get_kfp_healthz")]

    def factory(self, *args: Any, **kwargs: Any) -> FakeKfpClient:
        return FakeKfpClient(self, *args, **kwargs)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for method, kwargs in self.calls if method == name]

    def only(self, name: str) -> dict[str, Any]:
        found = self.named(name)
        assert len(found) == 1, f"expected one {name} call, got {self.calls}"
        return found[0]


def _canned(method: str, **reply: str) -> Callable[..., SimpleNamespace]:
    """A FakeKfpClient method that records the call (bound to kfp.Client's own `method`) and answers
    with the fixed ids in `reply`: the calls differ only in their name and their answer."""

    def call(self: FakeKfpClient, *args: Any, **kwargs: Any) -> SimpleNamespace:
        self._record(method, args, kwargs)
        return SimpleNamespace(**reply)

    call.__name__ = method
    return call


class FakeKfpClient:
    def __init__(self, recorder: Recorder, *args: Any, **kwargs: Any) -> None:
        self._recorder = recorder
        self._record("__init__", args, kwargs)

    def _record(self, method: str, args: tuple, kwargs: dict) -> dict[str, Any]:
        bound = inspect.signature(getattr(RealClient, method)).bind(None, *args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop("self")
        for key in ("pipeline_package_path", "pipeline_file"):
            if arguments.get(key):
                doc = _extract_pipeline_yaml(arguments[key])
                arguments[f"{key}:pipeline_name"] = doc.pipeline_spec.pipeline_info.name
                arguments[f"{key}:parameters"] = sorted(doc.pipeline_spec.root.input_definitions.parameters)
                arguments[f"{key}:text"] = Path(arguments[key]).read_text()
        self._recorder.calls.append((method, arguments))
        if self._recorder.fail_with is not None and method != "__init__":
            raise self._recorder.fail_with
        return arguments

    def get_pipeline_id(self, *args: Any, **kwargs: Any) -> str | None:
        return self._recorder.existing_pipelines.get(self._record("get_pipeline_id", args, kwargs)["name"])

    def get_kfp_healthz(self, *args: Any, **kwargs: Any) -> SimpleNamespace:
        self._record("get_kfp_healthz", args, kwargs)
        return SimpleNamespace(tag_name=self._recorder.tag_name, multi_user=False)

    def list_pipeline_versions(self, *args: Any, **kwargs: Any) -> SimpleNamespace:
        call = self._record("list_pipeline_versions", args, kwargs)
        assert call.get("sort_by") == "created_at desc", "the newest version first"
        newest_first = list(reversed(self._recorder.versions.get(call["pipeline_id"], [])))
        listed = [SimpleNamespace(pipeline_version_id=vid) for vid, _ in newest_first[: call.get("page_size", 10)]]
        return SimpleNamespace(pipeline_versions=listed, total_size=len(newest_first))

    def get_pipeline_version(self, *args: Any, **kwargs: Any) -> SimpleNamespace:
        call = self._record("get_pipeline_version", args, kwargs)
        versions = dict(self._recorder.versions.get(call["pipeline_id"], []))
        if call["pipeline_version_id"] not in versions:
            from kfp_server_api.exceptions import ApiException

            raise ApiException(status=404, reason="Not Found")
        spec = versions[call["pipeline_version_id"]]
        return SimpleNamespace(pipeline_version_id=call["pipeline_version_id"], pipeline_spec=spec)

    upload_pipeline = _canned("upload_pipeline", pipeline_id="pipe-123")
    upload_pipeline_version = _canned("upload_pipeline_version", pipeline_version_id="ver-456")
    create_run_from_pipeline_package = _canned("create_run_from_pipeline_package", run_id="run-789")
    create_experiment = _canned("create_experiment", experiment_id="exp-42")
    create_recurring_run = _canned("create_recurring_run", recurring_run_id="rr-7")
