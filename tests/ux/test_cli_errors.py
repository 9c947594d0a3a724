"""Every error is one line on stderr, exit 2 (bad input) or 1 (environment), never a traceback.

Each case a newcomer's first session ran into has its own test; every command's bad input
is checked the same way; the handler's own behaviour (unexpected errors, --debug) is checked on a
small app that uses it. The read-only and immutable store cases run the real console script.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ux.cli_process import ZEUS_KFP, cli_env, run_cli
from zeus_kfp.cli import app
from zeus_kfp.cli.application import ZeusGroup

HOST = "http://kfp.example:8080"


@pytest.fixture(autouse=True)
def _no_cluster_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KFP_HOST", "KFP_NAMESPACE", "KFP_TOKEN", "ZEUS_KFP_STORE"):
        monkeypatch.delenv(name, raising=False)


def one_error_line(result, code: int) -> str:
    """The result failed with `code`, printed exactly one line on stderr and no traceback; that line."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def invoke(*args: str, cwd: Path | None = None):
    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        return CliRunner().invoke(app, list(args))


# -- the cases of the report -------------------------------------------------------------------


@pytest.mark.parametrize("command", [["jobs"], ["show", "example"], ["run", "-r", "1"]])
def test_a_store_path_that_is_a_regular_file_is_refused_by_every_command(tmp_path, command) -> None:
    afile = tmp_path / "store"
    afile.write_text("not a store")
    line = one_error_line(invoke(*command, "--store", str(afile)), 2)
    assert f"invalid store='{afile}'" in line and "is a file, not a directory" in line
    assert afile.read_text() == "not a store"


def test_jobs_on_a_store_that_does_not_exist_says_so(tmp_path) -> None:
    line = one_error_line(invoke("jobs", "--store", "./nonexistent", cwd=tmp_path), 2)
    assert f"{tmp_path / 'nonexistent'} does not exist" in line and "zeus-kfp run --store PATH" in line
    assert not (tmp_path / "nonexistent").exists()  # reading never creates it


def test_simulate_json_into_a_missing_directory_is_refused_before_simulating(tmp_path) -> None:
    target = tmp_path / "missing" / "dir" / "out.json"
    result = invoke("simulate", "--workload", "squad", "--json", str(target))
    line = one_error_line(result, 2)
    assert f"invalid json='{target}'" in line and "does not exist" in line
    assert result.stdout == ""  # no table first, then a failure


def _without_root_override() -> list[str]:
    """The command prefix that makes root respect file modes (no CAP_DAC_OVERRIDE and friends), as any
    other user does; none when not root. Root without it writes into a mode-555 directory."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop CAP_DAC_OVERRIDE")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


@pytest.fixture
def store_parent(tmp_path):
    yield tmp_path
    subprocess.run(["chattr", "-i", str(tmp_path / "store")], capture_output=True, check=False)
    with contextlib.suppress(OSError):
        (tmp_path / "store").chmod(0o755)


def _run_in(store: Path, cwd: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), ZEUS_KFP, "run", "-r", "1", "--store", str(store), "--runs-dir", str(cwd / "runs")],
        cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _assert_not_writable(proc: subprocess.CompletedProcess[str], store: Path) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr and "\x1b[" not in proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: cannot write the store directory {store} (")
    assert proc.stdout == ""


def test_a_read_only_store_directory_fails_in_one_line(store_parent) -> None:
    store = store_parent / "store"
    store.mkdir()
    store.chmod(0o555)
    _assert_not_writable(_run_in(store, store_parent, _without_root_override()), store)
    assert list(store.iterdir()) == []


def test_an_immutable_store_directory_fails_in_one_line(store_parent) -> None:
    store = store_parent / "store"
    store.mkdir()
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not permitted here (needs CAP_LINUX_IMMUTABLE); the read-only test covers it")
    proc = _run_in(store, store_parent)
    _assert_not_writable(proc, store)
    assert "Operation not permitted" in proc.stderr


# -- every command ------------------------------------------------------------------------------


BAD_INPUT = [
    (["run", "--script", "torch"], "invalid script='torch'"),
    (["run", "--trace", "squad/v100", "--command", "true"], "one of --trace, --script or --command"),
    (["run", "--batch-sizes", "16,32"], "only with --command"),
    (["run", "--command", "{python} train.py"], "missing job_id, batch_sizes"),
    (["run", "--bogus"], "No such option: --bogus (see `zeus-kfp run --help`)"),
    (["compile", "--attempts", "0"], "invalid attempts=0"),
    (["upload"], "invalid host=''"),
    (["submit", "--host", HOST, "--param", "nope"], "invalid package=None"),  # no ./zeus_pipeline.yaml here
    (["schedule", "--host", HOST, "--cron", "0 2 * * *"], "invalid cron='0 2 * * *'"),
    (["jobs", "--phase", "done"], "invalid phase='done'"),
    (["show"], "Missing argument 'job'"),
    (["simulate", "--workload", "mnist"], "workload='mnist'"),
    (["doctor", "--host", HOST, "--package", "nope.yaml"], "invalid package='nope.yaml'"),
    (["version", "extra"], "unexpected extra argument"),
]


@pytest.mark.parametrize(("args", "says"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_to_any_command_is_one_line_and_exit_2(tmp_path, args, says) -> None:
    store = tmp_path / "store"
    store.mkdir()
    with_store = [*args, "--store", str(store)] if args[0] in ("jobs", "run") and "--bogus" not in args else args
    line = one_error_line(invoke(*with_store, cwd=tmp_path), 2)
    assert says in line


# -- the handler itself ---------------------------------------------------------------------------


def _app_with(failure: Exception) -> typer.Typer:
    """A two-command app on the same handler: one command that fails with `failure`, one that does not."""
    test_app = typer.Typer(cls=ZeusGroup, pretty_exceptions_enable=False)

    @test_app.callback()
    def options(debug: bool = typer.Option(False, "--debug")) -> None:
        pass

    @test_app.command()
    def fail() -> None:
        raise failure

    @test_app.command()
    def ok() -> None:
        typer.echo("fine")

    return test_app


@pytest.mark.parametrize(
    ("failure", "code", "line"),
    [
        (
            TypeError("'NoneType' object is not iterable"),
            1,
            "error: unexpected TypeError: 'NoneType' object is not iterable (run with --debug for the traceback)",
        ),
        (KeyError("batch_size"), 1, "error: unexpected KeyError: 'batch_size' (run with --debug for the traceback)"),
        (PermissionError(13, "Permission denied", "/data/x"), 1, "error: Permission denied: /data/x"),
        (RuntimeError("step failed\nsecond line"), 1, "error: step failed | second line"),
        (ValueError("invalid eta=2: allowed [0, 1]"), 2, "error: invalid eta=2: allowed [0, 1]"),
        (KeyboardInterrupt(), 130, "interrupted by SIGINT"),
    ],
)
def test_the_handler_prints_one_line_and_the_exit_code(failure, code, line) -> None:
    result = CliRunner().invoke(_app_with(failure), ["fail"])
    assert result.exit_code == code and result.stderr == line + "\n" and result.stdout == ""


def test_debug_shows_the_traceback_of_an_unexpected_error() -> None:
    result = CliRunner().invoke(_app_with(TypeError("boom")), ["--debug", "fail"])
    assert isinstance(result.exception, TypeError) and str(result.exception) == "boom"
    assert CliRunner().invoke(_app_with(TypeError("boom")), ["--debug", "ok"]).stdout == "fine\n"


def test_the_real_console_script_prints_no_traceback_and_debug_prints_one(tmp_path) -> None:
    (tmp_path / "store").write_text("")
    plain = run_cli("show", "x", "--store", "store", cwd=tmp_path)
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    listed = run_cli("--debug", "jobs", "--phase", "nope", "--store", str(tmp_path), cwd=tmp_path)
    assert listed.returncode == 1 and "Traceback (most recent call last)" in listed.stderr  # --debug: raised as is
