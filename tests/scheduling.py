"""How the suite spreads over pytest-xdist's workers (`make check` runs `pytest -n 2`, `make test` `-n 3`; pyproject's
addopts choose `--dist loadgroup`).

- Made once, not once per worker: a module-scoped fixture (a pipeline run several tests read, a store built by
  `zeus-kfp run`s, every compiled variant) is made by each worker that runs a test of its module, and xdist's
  default spreads a module's tests over both. Every test that requests one joins its module's `xdist_group`,
  so one worker makes it and runs them all.
- The costliest first: modules are run in the order of what their tests cost (tiers.py's markers: pipeline
  runs, then processes, servers and slow work, then the fast tier), each module's tests kept together and in
  their order, so no long test starts last while the other worker has nothing left to do.
- The environments' tests (marked `envs`) after every other costly module and before the fast tier: under
  `make test` they wait for the environments that build in the background meanwhile (tests/envs/venvs.py), and
  the fast tier fills the other worker while they run.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

# What a test of each marker weighs in its module's place in the order (a pipeline run takes a process's
# start-up several times over; a fast test, milliseconds).
WEIGHTS = {"pipeline": 8.0, "process": 3.0, "slow": 3.0, "server": 1.0, "s3": 1.0}
FAST_WEIGHT = 0.05
SHARED_SCOPES = ("module", "class", "package")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Say so when xdist's loadgroup cannot see the groups (pytest 9.2 with pytest-xdist 3.8: their ids lost the
    `@group` suffix xdist reads, pytest-dev/pytest-xdist#1386): every test still runs, each worker then making
    its own copy of a module's shared fixtures."""
    grouped = [item for item in session.items if item.get_closest_marker("xdist_group")]
    if getattr(session.config.option, "loadgroup", False) and grouped and "@" not in grouped[0].nodeid:
        warnings.warn(
            pytest.PytestWarning(
                f"pytest {pytest.__version__} hides the xdist_group marks from pytest-xdist's --dist loadgroup "
                "(pytest-dev/pytest-xdist#1386): a module's shared fixture is made on each worker; setup.cfg's "
                "test extra installs a pytest below 9.2"
            ),
            stacklevel=1,
        )


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test requests a fixture made once for its module (or class or package)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definitions[-1].scope in SHARED_SCOPES
        for name in item.fixturenames
        if (definitions := info.name2fixturedefs.get(name))
    )


def weight(item: pytest.Item) -> float:
    marks = {mark.name for mark in item.iter_markers()}
    return sum(w for name, w in WEIGHTS.items() if name in marks) or FAST_WEIGHT


def place(tests: list[pytest.Item]) -> int:
    """0: a module with a costly test; 1: the environments' tests; 2: the fast tier."""
    if any(test.get_closest_marker("envs") for test in tests):
        return 1
    return 2 if all(test.get_closest_marker("fast") for test in tests) else 0


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Groups before every other implementation (xdist reads them into the test ids), order after them all
    (tiers.py has marked what each test costs by then)."""
    for item in items:
        if shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(module_of(item)))
    result = yield
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item), []).append(item)
    ranked = sorted(modules.values(), key=lambda tests: (place(tests), -sum(weight(t) for t in tests)))  # stable
    items[:] = [item for tests in ranked for item in tests]
    return result
