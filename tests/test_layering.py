"""The layering DESIGN.md draws, enforced: imports only point down.

    notebooks/, zeus/cli/   user entry points
    pipelines/              wiring: DAG, compile, kfp.Client
    components/             thin KFP components that call zeus
    zeus/                   the library: never imports kfp

zeus/cli/ is the top layer (DESIGN's zeus/cli.py): it may use pipelines/ and kfp, but only inside
its command functions, so `import zeus` and `zeus-kfp --help` never pay for kfp, and a library
module can never reach kfp through the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UPPER = ("kfp", "kfp_server_api", "kfp_kubernetes", "pipelines", "components", "zeus.cli")


def _imports(tree: ast.AST, top_level_only: bool) -> list[tuple[int, str]]:
    """(line, module) of every import; with top_level_only, not those inside a function body."""
    found = []
    nodes = ast.iter_child_nodes(tree) if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif top_level_only and isinstance(node, (ast.If, ast.Try, ast.With)):
            found += _imports(node, top_level_only=True)  # still module level
    return found


def _upper(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in UPPER)


def violations(root: Path) -> list[str]:
    out = []
    for path in sorted((root / "zeus").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        in_cli = rel.startswith("zeus/cli/")
        for line, module in _imports(tree, top_level_only=in_cli):
            if _upper(module) and not (in_cli and module.startswith("zeus.cli")):
                out.append(f"{rel}:{line} imports {module}")
    return out


def test_nothing_under_zeus_imports_kfp_or_the_layers_above():
    assert violations(ROOT) == []


@pytest.mark.parametrize(
    ("where", "source", "found"),
    [
        ("zeus/policy/planted.py", "import kfp\n", "zeus/policy/planted.py:1 imports kfp"),
        ("zeus/store/planted.py", "from kfp import dsl\n", "zeus/store/planted.py:1 imports kfp"),
        ("zeus/planted.py", "from pipelines.dag import build_pipeline\n", "zeus/planted.py:1 imports pipelines.dag"),
        (
            "zeus/steps/planted.py",
            "def f():\n    from components.train import train\n",
            "zeus/steps/planted.py:2 imports components.train",
        ),
        (
            "zeus/cli/planted.py",
            "from pipelines.local import run_local\n",
            "zeus/cli/planted.py:1 imports pipelines.local",
        ),
    ],
)
def test_a_planted_import_is_caught(tmp_path, where, source, found):
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).write_text(source)
    assert violations(tmp_path) == [found]


def test_the_cli_may_import_kfp_inside_a_command(tmp_path):
    (tmp_path / "zeus/cli").mkdir(parents=True)
    (tmp_path / "zeus/cli/ok.py").write_text("def run():\n    from pipelines.local import run_local\n")
    assert violations(tmp_path) == []


def _store_imports() -> dict[str, set[str]]:
    """Each zeus/store module's imports of zeus modules, lazy ones too (`from zeus.store import keys` is an
    import of zeus.store.keys; `from zeus.store import Store`, of the package itself)."""
    here = ROOT / "zeus" / "store"
    graph = {}
    for path in sorted(here.glob("*.py")):
        name = "zeus.store" if path.stem == "__init__" else f"zeus.store.{path.stem}"
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("zeus"):
                for alias in node.names:
                    submodule = node.module == "zeus.store" and (here / f"{alias.name}.py").exists()
                    found.add(f"zeus.store.{alias.name}" if submodule else node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.startswith("zeus")}
        graph[name] = found
    return graph


def test_the_store_imports_no_policy_and_its_modules_form_no_circle():
    graph = _store_imports()
    assert sorted(m for deps in graph.values() for m in deps if m.startswith("zeus.policy")) == []
    inside = {name: {d for d in deps if d in graph} for name, deps in graph.items()}
    visiting, done, circle = set(), set(), []

    def visit(module: str, path: list[str]) -> None:
        if module in done or circle:
            return
        if module in visiting:
            circle.extend([*path[path.index(module) :], module])
            return
        visiting.add(module)
        for dep in sorted(inside[module]):
            visit(dep, [*path, module])
        visiting.discard(module)
        done.add(module)

    for module in sorted(inside):
        visit(module, [])
    assert circle == []
