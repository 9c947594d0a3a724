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

    upload_pipeline = _canned("upload_pipeline", pipeline_id="pipe-123")
    upload_pipeline_version = _canned("upload_pipeline_version", pipeline_version_id="ver-456")
    create_run_from_pipeline_package = _canned("create_run_from_pipeline_package", run_id="run-789")
    create_experiment = _canned("create_experiment", experiment_id="exp-42")
    create_recurring_run = _canned("create_recurring_run", recurring_run_id="rr-7")
