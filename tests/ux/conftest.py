"""Fixtures for the UX tests: a really compiled pipeline package and a recorded kfp.Client."""

from __future__ import annotations

from pathlib import Path

import kfp
import pytest

from ux.fake_kfp import Recorder
from ux.frames import SPEC


@pytest.fixture(scope="session")
def pipeline_yaml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's pipeline, compiled once per test session (about 1 s)."""
    from zeus_kfp.pipelines.compile import compile_pipeline

    path = tmp_path_factory.mktemp("package") / "zeus_pipeline.yaml"
    return compile_pipeline(path, spec=SPEC, command=["python", "train.py"], minio_secret="zeus-minio")


@pytest.fixture
def kfp_client(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """kfp.Client replaced by a recorder (no KFP cluster here); no KFP env leaks in from outside."""
    recorder = Recorder()
    monkeypatch.setattr(kfp, "Client", recorder.factory)
    for name in ("KFP_HOST", "KFP_NAMESPACE", "KFP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return recorder
