"""Names a newcomer can follow: zeus/steps/ has a module per step of the pipeline's DAG, named after it, and no two
modules under zeus/ share a file name (a traceback or an editor tab says which is which), but for the ones
KEPT says why; and the project (zeus/, docs/, tests/, the README and build files) explains itself without pointing at
an issue or a benchmark's job."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A file name more than one package of the library (zeus/zeus_kfp/, "zeus/" below) uses, and why it stays.
KEPT = {
    "errors.py": "zeus/errors.py is the one input error every layer raises; zeus/store/errors.py the store's own "
    "failures; zeus/store/ was being reworked elsewhere when the others were renamed, so it keeps its name",
    "recurrences.py": "zeus/policy/recurrences.py and zeus/store/recurrences.py: both packages were being reworked "
    "elsewhere when the others were renamed; their owners rename one",
}


def repeated_basenames(root: Path) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "zeus" / "zeus_kfp").rglob("*.py")):
        if path.name != "__init__.py":
            seen[path.name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_no_module_basename_repeats_under_zeus_without_a_reason() -> None:
    assert sorted(repeated_basenames(ROOT)) == sorted(KEPT)


def test_a_planted_second_trial_py_is_caught(tmp_path) -> None:
    library = tmp_path / "zeus" / "zeus_kfp"
    for where in ("steps/trial.py", "launch/trial.py", "steps/__init__.py", "__init__.py"):
        (library / where).parent.mkdir(parents=True, exist_ok=True)
        (library / where).write_text("")
    assert repeated_basenames(tmp_path) == {
        "trial.py": ["zeus/zeus_kfp/launch/trial.py", "zeus/zeus_kfp/steps/trial.py"]
    }


def test_each_step_of_the_dag_has_its_module_and_function() -> None:
    """The DAG's steps (components.registry) each have zeus/steps/<step>.py defining the function of its name,
    which the step's component calls."""
    import importlib

    from zeus_kfp.components.registry import STEP_NAMES

    for step in STEP_NAMES:
        assert (ROOT / "zeus" / "zeus_kfp" / "steps" / f"{step}.py").is_file(), step
        module = importlib.import_module(f"zeus_kfp.steps.{step}")
        assert callable(getattr(module, step)), step


# One of our issues cited by its number: the word and a number, or a hash and a number (a generated job's number
# too). A hash and a number on a line that names an upstream repository's ("ml-energy/zeus#252",
# "kubeflow/pipelines#11288 -> #11908") is that project's and stays.
ISSUE_CITATION = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
HASH_NUMBER = re.compile(r"(?<![\w/&])#\d+\b")
UPSTREAM = re.compile(r"[\w.-]+/[\w.-]+#\d+")
# Where the project speaks for itself: the library, its docs and tests, the README and the build's comments.
SCANNED = ("zeus", "docs", "tests", "README.md", "Makefile", "setup.cfg")
SUFFIXES = (".py", ".md", ".txt")


def cites_an_issue(line: str) -> bool:
    return bool(ISSUE_CITATION.search(line) or (HASH_NUMBER.search(line) and not UPSTREAM.search(line)))


def scanned_files(root: Path) -> list[Path]:
    found = []
    for name in SCANNED:
        top = root / name
        if top.is_file():
            found.append(top)
        elif top.is_dir():
            found += [p for p in sorted(top.rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
    return found


def issue_citations(root: Path) -> list[str]:
    """`path:line` of every place in SCANNED that cites one of our issues or a benchmark's job number: the code,
    its docs and its tests say why in their own words, and the figures live in benchmarks/RESULTS.md."""
    found = []
    for path in scanned_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if cites_an_issue(line):
                found.append(f"{path.relative_to(root).as_posix()}:{number}")
    return found


def test_the_project_cites_no_issue_or_benchmark_job() -> None:
    assert issue_citations(ROOT) == []


def test_a_planted_issue_citation_is_caught(tmp_path) -> None:
    (tmp_path / "zeus" / "policy").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    issue, job = "issue" + " 25", "#" + "154"  # spelled apart, so that this file passes its own scan
    (tmp_path / "zeus" / "policy" / "walk.py").write_text(
        f'"""Turns ({issue})."""\nx = 1  # job {job}\nml-energy/zeus#252\n'
    )
    (tmp_path / "docs" / "STORE.md").write_text(f"fine\nsee {issue.title()}\nkubeflow/pipelines#11288 -> #11908\n")
    (tmp_path / "Makefile").write_text(f"# {job}: a test\n")
    assert issue_citations(tmp_path) == [
        "zeus/policy/walk.py:1",
        "zeus/policy/walk.py:2",
        "docs/STORE.md:2",
        "Makefile:1",
    ]


def shadowed_modules(package_names: list[str]) -> list[str]:
    """Modules whose package's attribute of their name is something else (a function the package re-exports
    under the module's name): `mock.patch("pkg.mod.x")` and `importlib` by that name would reach the function."""
    found = []
    for package_name in package_names:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package_name}.{info.name}")
            if getattr(package, info.name) is not module:
                found.append(f"{package_name}.{info.name}")
    return found


def test_no_module_is_shadowed_by_a_name_its_package_exports() -> None:
    import zeus_kfp

    packages = ["zeus_kfp", *(f"zeus_kfp.{i.name}" for i in pkgutil.walk_packages(zeus_kfp.__path__) if i.ispkg)]
    assert shadowed_modules(packages) == []


def test_a_planted_shadowing_function_is_caught(tmp_path, monkeypatch) -> None:
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "__init__.py").write_text("from planted.step import step\n")
    (tmp_path / "planted" / "step.py").write_text("def step():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert shadowed_modules(["planted"]) == ["planted.step"]
