"""What the package declares: the one import name it installs under, and the floors that the lowest-versions
environment installs.

The library lives in zeus/zeus_kfp and installs as `zeus_kfp`, because ml-energy's Zeus owns the import name
`zeus`; the components and the pipeline install under it (zeus_kfp.components, zeus_kfp.pipelines), their
sources in the top-level folders that zeus/zeus_kfp links to. The source tree would hide a stray `import zeus`
(run from the repository root, the folder itself is importable under that name), so a test reads every import.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jedi
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# Files that import ml-energy's Zeus on purpose, in an environment of its own.
ML_ENERGY_ZEUS_USERS = {"benchmarks/bso_server.py"}


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


LIBRARY = ROOT / "zeus" / "zeus_kfp"
LINKED = {"components": "../../components", "pipelines": "../../pipelines"}  # sources kept at the top level


def test_every_package_folder_is_installed_under_zeus_kfp_and_nothing_else() -> None:
    config = _setup_cfg()
    declared = set(_lines(config["options"]["packages"]))
    folders = {".".join(["zeus_kfp", *init.parent.relative_to(LIBRARY).parts]) for init in LIBRARY.rglob("__init__.py")}
    assert {os.readlink(LIBRARY / name) for name in LINKED} == set(LINKED.values())
    assert declared == folders | {f"zeus_kfp.{name}" for name in LINKED}, "setup.cfg's packages: one per folder"
    assert config["options"]["package_dir"].split() == ["=", "zeus"]  # a src layout: the folder named as imported


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    """What `pip install zeus-kfp` puts at the top of site-packages: zeus_kfp, with the linked components and
    pipeline inside it (a wheel holds files, not links), and its metadata; no `components` or `pipelines`."""
    source = tmp_path / "source"  # a copy, links as links: setuptools builds in the tree it is given
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("zeus", *LINKED):
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    wheel_command = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)]
    built = subprocess.run([sys.executable, "-m", *wheel_command], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("zeus_kfp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"zeus_kfp", f"{wheel.name.rsplit('-', 3)[0]}.dist-info"}
    for name in LINKED:
        sources = sorted(p.name for p in (ROOT / name).glob("*.py"))
        assert sorted(n.split("/")[-1] for n in names if n.startswith(f"zeus_kfp/{name}/")) == sources


def test_an_editor_follows_an_import_to_its_file() -> None:
    """Static analysis (jedi, as editors run it, in this environment: `make` installs the checkout editable,
    a path entry to zeus/) resolves the library's and a component's imports to their files in the checkout."""
    source = "from zeus_kfp.store import open_store\nfrom zeus_kfp.components.gate import gate\n"
    script = jedi.Script(source, path=ROOT / "notebooks" / "probe.py", environment=jedi.InterpreterEnvironment())
    found = [script.goto(line, len(text), follow_imports=True) for line, text in enumerate(source.splitlines(), 1)]
    assert [[(Path(d.module_path), d.name) for d in names] for names in found] == [
        [(LIBRARY / "store" / "store.py", "open_store")],
        [(LIBRARY / "components" / "gate.py", "gate")],
    ]


def _bare_zeus_imports(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        where = path.relative_to(root).as_posix()
        found += [f"{where}:{node.lineno} imports {name}" for name in names if name.split(".")[0] == "zeus"]
    return found


def test_nothing_of_ours_imports_the_name_zeus() -> None:
    """`import zeus` is ml-energy's package in a user's image; ours is zeus_kfp."""
    found = []
    for folder in ("zeus", "components", "pipelines", "examples", "benchmarks", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() not in ML_ENERGY_ZEUS_USERS:
                found += _bare_zeus_imports(path)
    assert found == []


def test_the_check_finds_a_planted_import(tmp_path: Path) -> None:
    planted = tmp_path / "mod.py"
    planted.write_text("import os\nfrom zeus.monitor import ZeusMonitor\nimport zeus_kfp\ndef f():\n    import zeus\n")
    assert sorted(_bare_zeus_imports(planted, tmp_path)) == ["mod.py:2 imports zeus.monitor", "mod.py:5 imports zeus"]


# The floors the lowest-versions environment cannot install as declared, and what it installs instead.
FLOOR_EXCEPTIONS = {
    # Only the CPU build 2.13.0 lies on this machine's disk; any other torch is a multi-GB CUDA download.
    "torch": "2.13.0",
}


def test_the_lowest_versions_file_pins_every_declared_floor() -> None:
    """constraints-lowest.txt is what `make test` installs into .venv-lowest: one pin per install_requires
    entry, at the floor setup.cfg declares (or the exception above, said in docs/reference.md: Tested environments)."""
    floors = {}
    for line in _lines(_setup_cfg()["options"]["install_requires"]):
        requirement = Requirement(line)
        lower = [spec.version for spec in requirement.specifier if spec.operator in (">=", "==", "~=")]
        assert len(lower) == 1, f"{line}: no floor declared"
        floors[requirement.name.lower()] = FLOOR_EXCEPTIONS.get(requirement.name.lower(), lower[0])
    pins = {}
    for line in _lines((ROOT / "constraints-lowest.txt").read_text()):
        name, _, version = line.partition("==")
        pins[name.strip().lower()] = version.strip()
    assert sorted(pins) == sorted(floors)
    # Version equality: `pandas>=2.2` is the release 2.2.0; a floor that names no release (`>=12` where the
    # first is 12.535.77) is not a floor anyone has installed, and fails here.
    assert {name: Version(pin) for name, pin in pins.items()} == {name: Version(v) for name, v in floors.items()}
