"""The written-out sources (the gate and train components, the pipeline function's parameters) are
exactly what pipelines/sources.py writes from the declarations, byte for byte: a setting added to JobSpec or
TrialRequest without `make sources` fails here, and so does a hand edit of a written-out file.

The oracle for what the text declares is kfp itself: the component kfp builds from a written-out file takes
every declared field, and the pipeline's parameters are those the declarations list."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from zeus_kfp.pipelines import sources

ROOT = Path(__file__).resolve().parents[1]
WRITTEN = ["components/gate.py", "components/train.py", "pipelines/recurrence.py"]


def test_the_written_out_files_are_the_ones_the_generator_writes() -> None:
    assert sorted(p.relative_to(ROOT).as_posix() for p in sources.written_sources()) == sorted(WRITTEN)


@pytest.mark.parametrize("relpath", WRITTEN)
def test_regenerating_gives_the_same_text_byte_for_byte(relpath) -> None:
    assert (ROOT / relpath).read_bytes() == sources.written_sources()[ROOT / relpath].encode()


def test_the_check_names_a_stale_file(monkeypatch, tmp_path, capsys) -> None:
    planted = tmp_path / "components" / "gate.py"
    planted.parent.mkdir()
    planted.write_text(sources.gate_source().replace("max_running: int,", "max_running: float,"))
    monkeypatch.setattr(sources, "ROOT", tmp_path)
    monkeypatch.setattr(sources, "written_sources", lambda: {planted: sources.gate_source()})
    assert sources.main(["--check"]) == 1
    assert "components/gate.py differs from its declaration: run `make sources`" in capsys.readouterr().out


def test_make_sources_runs_the_generator_and_finds_nothing_to_write() -> None:
    """`make sources` is `python -m zeus_kfp.pipelines.sources`; here --check, which writes nothing."""
    done = subprocess.run(
        [sys.executable, "-m", "zeus_kfp.pipelines.sources", "--check"], cwd=ROOT, capture_output=True
    )
    assert (done.returncode, done.stdout) == (0, b""), done.stdout


def test_the_pipeline_function_takes_the_declared_parameters_in_order() -> None:
    from zeus_kfp.pipelines.recurrence import recurrence_function

    seen = {}
    function = recurrence_function(seen.update)
    names = list(inspect.signature(function).parameters)
    declared = sources.pipeline_parameters()
    assert names == [name for name, _, _ in declared]
    assert [p.annotation for p in inspect.signature(function).parameters.values()] == [kind for _, kind, _ in declared]
    function(*names)  # the body hands the steps every parameter by name
    assert seen == {name: name for name in names}


def test_nothing_under_the_code_builds_code_from_text() -> None:
    """The issue's check: `grep -rn "exec(" components pipelines zeus` finds nothing."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("components", "pipelines", "zeus")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "exec(" in line
    ]
    assert found == []
