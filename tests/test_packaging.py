"""What the package declares: the import name it installs under, and the floors that the lowest-versions
environment installs.

The folder zeus/ installs as `zeus_kfp` (setup.cfg's package_dir), because ml-energy's Zeus owns the import
name `zeus`. The source tree would hide a stray `import zeus` (run from the repository root, the folder
itself is importable under that name), so this test reads every import instead.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

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


def test_every_package_folder_under_zeus_is_installed_as_zeus_kfp() -> None:
    config = _setup_cfg()
    declared = set(_lines(config["options"]["packages"]))
    folders = {
        ".".join(["zeus_kfp", *init.parent.relative_to(ROOT / "zeus").parts])
        for init in (ROOT / "zeus").rglob("__init__.py")
    }
    assert folders - declared == set(), "add these to setup.cfg's packages"
    assert config["options"]["package_dir"].split() == ["zeus_kfp", "=", "zeus"]


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
