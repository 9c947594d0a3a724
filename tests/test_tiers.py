"""The tiers' classifier, tripwire and scheduling (tiers.py, reach.py, scheduling.py) on small suites of their own.

Each test writes a few test files into pytester's directory, with a conftest that loads the plugins as the
suite's does, and runs pytest on them in this process: the markers a test gets come from what it reaches, a
fast test that starts a process or a server fails however it got there, and the costly modules go first.
"""

from __future__ import annotations

import pytest

CONFTEST = 'pytest_plugins = ("tiers", "scheduling")\n'


def markers(pytester: pytest.Pytester, source: str, conftest: str = "") -> dict[str, set[str]]:
    """Each collected test's name and the tier markers it got."""
    pytester.makeconftest(CONFTEST + conftest)
    pytester.makepyfile(test_inner=source)
    items, _ = pytester.inline_genitems()
    tiers = {"process", "pipeline", "s3", "server", "fast", "slow"}
    return {item.name: {m.name for m in item.iter_markers()} & tiers for item in items}


def test_a_test_gets_the_markers_of_what_it_reaches_through_helpers_fixtures_and_imports(pytester) -> None:
    got = markers(
        pytester,
        """
import subprocess

import pytest
from kfp import local


def start_something():
    subprocess.run(["true"])


class Launcher:
    def go(self):
        import multiprocessing

        multiprocessing.get_context("spawn")


@pytest.fixture
def web():
    from http.server import ThreadingHTTPServer

    return ThreadingHTTPServer


def test_through_a_helper():
    start_something()


def test_through_a_method_of_a_class_it_names():
    Launcher()


def test_a_local_pipeline():
    local.init


def test_a_fixture(web):
    pass


def test_pure_arithmetic():
    assert 1 + 1 == 2


@pytest.mark.slow
def test_slow_by_hand():
    pass
""",
    )
    assert got == {
        "test_through_a_helper": {"process"},
        "test_through_a_method_of_a_class_it_names": {"process"},
        "test_a_local_pipeline": {"pipeline", "process"},
        "test_a_fixture": {"server"},
        "test_pure_arithmetic": {"fast"},
        "test_slow_by_hand": {"slow"},
    }


def test_a_fetched_fixture_costs_what_it_reaches_except_for_the_params_that_fetch_nothing(pytester) -> None:
    conftest = """
import subprocess

import pytest


@pytest.fixture
def costly():
    subprocess.run(["true"])


@pytest.fixture(params=["local", "s3"])
def store_uri(request):  # tiers.FREE_PARAMS: "local" fetches nothing
    return "dir" if request.param == "local" else request.getfixturevalue("costly")


@pytest.fixture
def fetcher(request):
    return request.getfixturevalue("costly")
"""
    got = markers(pytester, "def test_store(store_uri):\n    pass\n\ndef test_fetch(fetcher):\n    pass\n", conftest)
    assert got == {"test_store[local]": {"fast"}, "test_store[s3]": {"process"}, "test_fetch": {"process"}}


def test_a_fast_test_that_starts_a_process_or_listens_fails_saying_how_it_is_classified(pytester) -> None:
    """Routes the classifier cannot see (a module named by a computed string): the tripwire fails each, even
    where the test catches what it raises."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_inner="""
import importlib
import sys


def hidden(name):
    return importlib.import_module("".join(name))


def test_a_hidden_process():
    hidden("subprocess").run([sys.executable, "-c", "pass"])


def test_a_hidden_process_whose_error_is_swallowed():
    try:
        hidden("subprocess").run([sys.executable, "-c", "pass"])
    except BaseException:
        pass


def test_a_hidden_server():
    sock = hidden("socket").socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
    finally:
        sock.close()


def test_nothing_hidden():
    assert hidden("json").dumps(1) == "1"
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert out.count("is in the fast tier but started a process") >= 2
    assert "test_a_hidden_server is in the fast tier but listened on a socket" in out
    assert "tiers.COSTS" in out and "--why-tier" in out


@pytest.mark.process  # its inner test starts one, out of the walk's sight (pytester runs it in this process)
def test_a_test_marked_costly_may_start_what_a_fast_one_may_not(pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_inner="""
import importlib
import sys

import pytest


@pytest.mark.process
def test_a_process_marked_by_hand():
    importlib.import_module("sub" + "process").run([sys.executable, "-c", "pass"], check=True)
"""
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_costly_modules_run_first_and_a_shared_fixture_groups_its_modules_tests(pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a_cheap="def test_one():\n    pass\n\ndef test_two():\n    pass\n",
        test_a_envs="import pytest\n\npytestmark = pytest.mark.envs\n\n\ndef test_in_an_environment():\n    pass\n",
        test_b_costly="""
import subprocess

import pytest


@pytest.fixture(scope="module")
def made_once():
    return 1


def test_runs_a_process():
    subprocess.run(["true"])


def test_reads_the_shared_fixture(made_once):
    pass
""",
    )
    recorded = pytester.inline_run("--collect-only")
    items = recorded.getcall("pytest_collection_modifyitems").items  # in the order they run
    # the environments' tests after every costly module, before the fast tier
    assert [item.name for item in items] == ["test_runs_a_process", "test_reads_the_shared_fixture",
                                             "test_in_an_environment", "test_one", "test_two"]  # fmt: skip
    groups = {item.name: [m.args for m in item.iter_markers("xdist_group")] for item in items}
    assert groups["test_reads_the_shared_fixture"] == [("test_b_costly.py",)]
    assert groups["test_runs_a_process"] == groups["test_one"] == []
