"""Every store test runs against both backends: a local directory and the S3 server from tests/conftest.py."""

from __future__ import annotations

import pytest

from zeus_kfp.job import JobSpec
from zeus_kfp.store import Store, open_store


@pytest.fixture(params=["local", "s3"])
def store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    return request.getfixturevalue("s3_store_uri")


@pytest.fixture
def store(store_uri: str) -> Store:
    return open_store(store_uri)


@pytest.fixture
def spec() -> JobSpec:
    return JobSpec(
        job_id="resnet-nightly",
        batch_sizes=(32, 64, 128, 256),
        default_batch_size=128,
        target_metric=0.9,
        max_epochs=20,
    )
