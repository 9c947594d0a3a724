"""kfp.local keeps a process-wide config singleton: reset it around every test of this folder."""

import pytest
from kfp.local.config import LocalExecutionConfig


@pytest.fixture(autouse=True)
def _fresh_kfp_local():
    LocalExecutionConfig.instance = None
    yield
    LocalExecutionConfig.instance = None
