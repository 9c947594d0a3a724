"""The suite's tiers, chosen here and only here: what a test costs, derived from what it uses.

Every test is marked at collection by what it reaches (nobody has to remember these):

- `process`:  starts a child process: a console script, a training script, torchrun, multiprocessing, a kernel;
- `pipeline`: runs a kfp.local pipeline (its steps are processes, so it is `process` too);
- `s3`:       uses the S3-protocol server (moto on 127.0.0.1) or a stand-in in front of it;
- `server`:   starts a local server: moto, a Kubernetes, KFP or zeusd stand-in, an exporter;
- `fast`:     none of these, and not `slow` or `envs`: the tier `make check` runs (`pytest -m fast`).

Two are written by hand: `slow` (in-process work of seconds: nothing at collection can see CPU time) and
`envs` (runs the environments `make test-envs` builds). `make test` runs everything.

How a test is classified: its function and every fixture it requests (their closure, and what a fixture
fetches with `request.getfixturevalue`) are read as bytecode by reach.py, name by name through this
repository's code; reaching a name in `COSTS` gives that entry's markers. `pytest --collect-only -q
--why-tier` prints each test's markers and the first path to each. A parametrized fixture that fetches a
costly fixture only for some of its params names the params that fetch nothing in `FREE_PARAMS`. A command
run in-process through typer's CliRunner is not followed (its name is a string): where one starts a process or
a server, the tripwire says so, and that test carries the marker by hand.

The tripwire keeps this honest: while a `fast` test runs (set-up, call and tear-down), starting a process
(subprocess, os.fork/posix_spawn/system, multiprocessing) or listening on a socket fails the test with a
message saying what it started and how the classifier is told. It is armed in every run, `make test`'s
included, so a classification cannot silently rot.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing.util
import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from reach import OURS, Found, Reach, merge

# A qualified name (module.qualname) reached, or any name under it, and the markers it gives.
COSTS: dict[str, tuple[str, ...]] = {
    "subprocess": ("process",),
    "multiprocessing": ("process",),
    "concurrent.futures.process": ("process",),
    "torch.multiprocessing": ("process",),
    "torch.distributed.run": ("process",),
    "posix.system": ("process",),
    "posix.fork": ("process",),
    "posix.forkpty": ("process",),
    "posix.posix_spawn": ("process",),
    "posix.posix_spawnp": ("process",),
    "pty.fork": ("process",),
    "pty.spawn": ("process",),
    "nbclient": ("process",),  # a Jupyter kernel
    "jupyter_client": ("process",),
    "kfp.local.config.init": ("pipeline", "process"),
    "moto": ("s3", "server"),
    "http.server.HTTPServer": ("server",),
    "http.server.ThreadingHTTPServer": ("server",),
    "socketserver": ("server",),
    "werkzeug.serving": ("server",),
    "prometheus_client.exposition.start_wsgi_server": ("server",),
    "prometheus_client.exposition.start_http_server": ("server",),
}
# (fixture, its params that fetch nothing costly): store_uri and any_store_uri fetch an S3 store unless "local".
FREE_PARAMS: dict[str, frozenset[str]] = {"store_uri": frozenset({"local"}), "any_store_uri": frozenset({"local"})}
COST_MARKERS = ("process", "pipeline", "s3", "server")
BY_HAND = ("slow", "envs")
MARKERS = {
    "process": "starts a child process (set by tests/tiers.py from what the test uses)",
    "pipeline": "runs a kfp.local pipeline (set by tests/tiers.py)",
    "s3": "uses the S3-protocol server on 127.0.0.1 or a stand-in in front of it (set by tests/tiers.py)",
    "server": "starts a local server: moto, a Kubernetes/KFP/zeusd stand-in, an exporter (set by tests/tiers.py)",
    "fast": "none of the costs above and not slow or envs: the tier `make check` runs (set by tests/tiers.py)",
    "slow": "in-process work of seconds (written by hand; still part of `make test`)",
    "envs": "runs the environments make test-envs builds (.venv-lowest, .venv-beside-zeus); make test runs them",
}


def classify(item: pytest.Item, reach: Reach) -> Found:
    """The markers the test's function and fixtures reach, each with the first path that reaches it."""
    found: Found = {}
    function = getattr(item, "function", None)
    if function is not None:
        merge(found, reach.of(function), "the test")
    info = getattr(item, "_fixtureinfo", None)
    params = getattr(getattr(item, "callspec", None), "params", {})
    seen: set[str] = set()
    for name in getattr(item, "fixturenames", ()):
        free = FREE_PARAMS.get(name, frozenset())  # (a parameter is looked at only where it can be free: some
        if not (isinstance(params.get(name), str) and params[name] in free):  # are ints too long to print)
            definitions = info.name2fixturedefs.get(name, ()) if info is not None else ()
            merge(found, _fixture(name, definitions, item, reach, seen))
    if "pipeline" in found:
        found.setdefault("process", found["pipeline"])
    return found


def _fixture(name: str, definitions: Any, item: pytest.Item, reach: Reach, seen: set[str]) -> Found:
    """What a fixture reaches, with the fixtures it fetches by `request.getfixturevalue("name")` (and theirs)."""
    found: Found = {}
    if name in seen or not definitions:
        return found
    seen.add(name)
    fixture = definitions[-1].func
    merge(found, reach.of(fixture), f"fixture {name}")
    code = getattr(inspect.unwrap(fixture), "__code__", None)
    if code is not None and "getfixturevalue" in code.co_names:
        manager = item.session._fixturemanager
        fetched = [c for c in code.co_consts if isinstance(c, str) and c.isidentifier()]
        names = [*fetched, *(arg for f in fetched for d in manager.getfixturedefs(f, item) or () for arg in d.argnames)]
        for inner in names:
            merge(found, _fixture(inner, manager.getfixturedefs(inner, item), item, reach, seen), f"fixture {name}")
    return found


# --- the hooks ---------------------------------------------------------------------------------------------

TRIPPED = pytest.StashKey[dict[str, str]]()  # phase (setup, call, teardown) -> its first trip's message


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--why-tier", action="store_true", help="print each test's cost markers and what gave them")


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    Tripwire.install()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reach = Reach(COSTS, (*OURS, f"{config.rootpath}{os.sep}"))  # the rootdir: another project's tests, too
    for item in items:
        found = classify(item, reach)
        if item.get_closest_marker("pipeline"):  # a pipeline marked by hand: its steps are processes too
            found.setdefault("process", "a pipeline")
        for name in sorted(found):
            item.add_marker(name)
        if not any(item.get_closest_marker(name) for name in (*COST_MARKERS, *BY_HAND)):
            item.add_marker("fast")
        if config.getoption("why_tier"):
            marks = sorted({m.name for m in item.iter_markers()} & set(MARKERS))
            print(f"{item.nodeid}: {' '.join(marks)}" + "".join(f"\n    {m}: {p}" for m, p in sorted(found.items())))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with Tripwire.armed(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with Tripwire.armed(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with Tripwire.armed(item, "teardown"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A tripped phase fails even where the code under test caught the tripwire's exception."""
    report = yield
    tripped = item.stash.get(TRIPPED, {}).get(call.when)
    if tripped and not report.failed:
        report.outcome = "failed"
        report.longrepr = tripped
    return report


# --- the tripwire ------------------------------------------------------------------------------------------


class TierViolation(BaseException):
    """A `fast` test started what its tier excludes. A BaseException, so `except Exception` in the code under
    test does not swallow it (and the report hook fails the test even where something does)."""


class Tripwire:
    """Each way to start a process or a server, wrapped once per interpreter; inert unless a fast test runs."""

    item: pytest.Item | None = None
    phase = ""

    @classmethod
    def install(cls) -> None:
        if getattr(subprocess.Popen.__init__, "tripwire", False):
            return
        wrap = cls.wrap
        subprocess.Popen.__init__ = wrap(subprocess.Popen.__init__, "started a process", lambda a, k: a[1:2] or k)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                setattr(os, name, wrap(getattr(os, name), f"called os.{name}", lambda a, k: a[:1]))
        util = multiprocessing.util
        util.spawnv_passfds = wrap(util.spawnv_passfds, "started a multiprocessing process", lambda a, k: a[1:2])
        socket.socket.listen = wrap(socket.socket.listen, "listened on a socket (a server)", lambda a, k: a[:1])

    @classmethod
    def wrap(cls, original: Any, what: str, shown: Any) -> Any:
        def tripwire(*args: Any, **kwargs: Any) -> Any:
            item = cls.item
            if item is not None:
                cls.trip(item, what, shown(args, kwargs))
            return original(*args, **kwargs)

        tripwire.tripwire = True  # type: ignore[attr-defined]
        tripwire.__wrapped__ = original  # type: ignore[attr-defined]
        return tripwire

    @classmethod
    def trip(cls, item: pytest.Item, what: str, detail: object) -> None:
        message = (
            f"{item.nodeid} is in the fast tier but {what}: {detail!r:.300}.\n"
            "tests/tiers.py classifies a test by what its function and fixtures reach (tests/reach.py reads "
            "their bytecode, following this repository's functions and classes name by name); nothing it "
            "reached is in tiers.COSTS, so the test ran as `fast`, where processes and servers are refused. "
            "Let the classifier see the cost: add the library function that starts it to tiers.COSTS, or "
            "reach it through a name the walk follows (a module-level helper rather than a method of a local "
            "object). `pytest --collect-only -q --why-tier` shows what each test reaches."
        )
        item.stash.setdefault(TRIPPED, {}).setdefault(cls.phase, message)
        raise TierViolation(message)

    @classmethod
    @contextlib.contextmanager
    def armed(cls, item: pytest.Item, phase: str) -> Iterator[None]:
        fast = item.get_closest_marker("fast") is not None
        previous = cls.item, cls.phase
        cls.item, cls.phase = (item if fast else None), phase
        try:
            yield
        finally:
            cls.item, cls.phase = previous
