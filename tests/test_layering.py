"""The layering, enforced: imports only point down.

    notebooks/, zeus/zeus_kfp/cli/   user entry points
    pipelines/              wiring: DAG, compile, kfp.Client
    components/             thin KFP components that call zeus
    zeus/                   the library: never imports kfp

zeus/zeus_kfp/cli/ is the top layer: it may use pipelines/ and kfp, but only inside its command functions, so
`import zeus_kfp` and `zeus-kfp --help` never pay for kfp, and a library module can never reach kfp
through the CLI.

Inside zeus/, the packages form layers too: ALLOWED below says which package may import which, and
why; no module takes part in an import circle. Every import counts, at module level or inside a
function (a deferred import is still a dependency: it only moves when it is paid for).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UPPER = ("kfp", "kfp_server_api", "kfp_kubernetes", "zeus_kfp.pipelines", "zeus_kfp.components", "zeus_kfp.cli")


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
    for path in sorted((root / "zeus" / "zeus_kfp").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        in_cli = rel.startswith("zeus/zeus_kfp/cli/")
        for line, module in _imports(tree, top_level_only=in_cli):
            if _upper(module) and not (in_cli and module.startswith("zeus_kfp.cli")):
                out.append(f"{rel}:{line} imports {module}")
    return out


def test_nothing_under_zeus_imports_kfp_or_the_layers_above():
    assert violations(ROOT) == []


@pytest.mark.parametrize(
    ("where", "source", "found"),
    [
        ("zeus/zeus_kfp/policy/planted.py", "import kfp\n", "zeus/zeus_kfp/policy/planted.py:1 imports kfp"),
        ("zeus/zeus_kfp/store/planted.py", "from kfp import dsl\n", "zeus/zeus_kfp/store/planted.py:1 imports kfp"),
        (
            "zeus/zeus_kfp/planted.py",
            "from zeus_kfp.pipelines.dag import build_pipeline\n",
            "zeus/zeus_kfp/planted.py:1 imports zeus_kfp.pipelines.dag",
        ),
        (
            "zeus/zeus_kfp/steps/planted.py",
            "def f():\n    from zeus_kfp.components.train import train\n",
            "zeus/zeus_kfp/steps/planted.py:2 imports zeus_kfp.components.train",
        ),
        (
            "zeus/zeus_kfp/cli/planted.py",
            "from zeus_kfp.pipelines.local import run_local\n",
            "zeus/zeus_kfp/cli/planted.py:1 imports zeus_kfp.pipelines.local",
        ),
    ],
)
def test_a_planted_import_is_caught(tmp_path, where, source, found):
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).write_text(source)
    assert violations(tmp_path) == [found]


def test_the_cli_may_import_kfp_inside_a_command(tmp_path):
    (tmp_path / "zeus/zeus_kfp/cli").mkdir(parents=True)
    deferred = "def run():\n    from zeus_kfp.pipelines.local import run_local\n"
    (tmp_path / "zeus/zeus_kfp/cli/ok.py").write_text(deferred)
    assert violations(tmp_path) == []


# -- the packages inside zeus/ ---------------------------------------------------------------------------

# The layers, bottom up: what each one may import of zeus, and why it sits where it does. A layer is a
# package of the library (zeus_kfp.store covers zeus/zeus_kfp/store/*) or a top-level module (zeus_kfp.job);
# "zeus_kfp" is the package's own __init__. A new package or module has to be placed here before anything imports it.
FOUNDATION = {
    "zeus_kfp.errors", "zeus_kfp.settings", "zeus_kfp.cost", "zeus_kfp.run_settings", "zeus_kfp.job",
    "zeus_kfp.trials", "zeus_kfp.trial_history", "zeus_kfp.profiles", "zeus_kfp.summaries", "zeus_kfp.files",
    "zeus_kfp.parquet_bytes",
}  # fmt: skip
ALLOWED: dict[str, set[str]] = {
    # errors every layer raises, and the job's settings declared once: they import nothing of zeus
    "zeus_kfp.errors": set(),
    "zeus_kfp.settings": set(),
    # Zeus's cost model as a value, and the sum of what trials spent: a job holds one, so it sits below the job
    "zeus_kfp.cost": set(),
    # deterministic seeds and signal handling: small utilities that know nothing of the job
    "zeus_kfp.seeds": {"zeus_kfp.errors"},  # a bad --seeds word is a FieldError, as everywhere
    "zeus_kfp.signals": set(),
    # replacing a file whole (a temporary file, then a rename): what a trial's hand-over files are written with
    "zeus_kfp.files": set(),
    # Parquet to and from bytes with Arrow-owned buffers (a Python-owned one can abort the process at exit): a
    # power profile's crossings and the store's snapshots and drift summaries
    "zeus_kfp.parquet_bytes": set(),
    # the power profile: a value a trial's outcome (zeus_kfp.job.TrialOutcome) holds, so it sits below the job;
    # then the job and the values that describe its trials
    "zeus_kfp.profiles": {
        "zeus_kfp.errors",
        "zeus_kfp.settings",
        "zeus_kfp.cost",
        "zeus_kfp.files",
        "zeus_kfp.parquet_bytes",
    },
    # how a run runs (the recurrence gate's settings, the dispatch timeout), declared like the job's settings; the
    # job knows their names to tell a spec that holds one where it goes
    "zeus_kfp.run_settings": {"zeus_kfp.errors", "zeus_kfp.settings"},
    "zeus_kfp.job": {
        "zeus_kfp.errors",
        "zeus_kfp.settings",
        "zeus_kfp.cost",
        "zeus_kfp.run_settings",
        "zeus_kfp.profiles",
    },
    "zeus_kfp.trials": {"zeus_kfp.errors", "zeus_kfp.settings", "zeus_kfp.cost", "zeus_kfp.job"},
    # the same trials as numpy columns, for the policies: apart, so that `import zeus_kfp` loads no numpy
    "zeus_kfp.trial_history": {
        "zeus_kfp.errors",
        "zeus_kfp.settings",
        "zeus_kfp.cost",
        "zeus_kfp.job",
        "zeus_kfp.trials",
    },
    "zeus_kfp.summaries": {"zeus_kfp.errors", "zeus_kfp.settings", "zeus_kfp.cost", "zeus_kfp.job", "zeus_kfp.trials"},
    # the policies: pure functions of a history; no store, GPU, simulator or report
    "zeus_kfp.policy": FOUNDATION | {"zeus_kfp.seeds"},
    # the GPUs and the power-limit profiler: they measure, and know nothing of policies or the store
    "zeus_kfp.power": FOUNDATION,
    # the store keeps what the others produce; it decides nothing, so it imports no policy (nor GPU)
    "zeus_kfp.store": FOUNDATION,
    # the simulator replays the policies on traces with the power model
    "zeus_kfp.simulate": FOUNDATION | {"zeus_kfp.seeds", "zeus_kfp.policy", "zeus_kfp.power"},
    # the report turns data it is handed into tables, plots and event files: never the store (the steps
    # and the CLI read it), never training. It may use the simulator's model: the default configuration's
    # cost of a trace-replayed run is the trace's expected figure (zeus_kfp.report.numbers), a pure function of
    # the shipped traces, as the bandit's state is a pure function of the history (zeus_kfp.policy)
    "zeus_kfp.report": FOUNDATION | {"zeus_kfp.policy", "zeus_kfp.power", "zeus_kfp.simulate"},
    # the training child: the user's script under the profiler; no store, no policy (it is told what to run)
    "zeus_kfp.train": FOUNDATION | {"zeus_kfp.power", "zeus_kfp.signals"},
    # launchers start a trial (local, torchrun, a cluster) and hand its result over through the store
    "zeus_kfp.launch": FOUNDATION | {"zeus_kfp.power", "zeus_kfp.store", "zeus_kfp.train", "zeus_kfp.signals"},
    # the fleet view reads every job of a store and says it with the report's one saving
    "zeus_kfp.fleet": FOUNDATION
    | {"zeus_kfp.policy", "zeus_kfp.power", "zeus_kfp.simulate", "zeus_kfp.report", "zeus_kfp.store"},
    # the pipeline's steps: each step wires the layers below for one KFP component
    "zeus_kfp.steps": FOUNDATION
    | {"zeus_kfp.seeds", "zeus_kfp.signals", "zeus_kfp.policy", "zeus_kfp.power", "zeus_kfp.store", "zeus_kfp.simulate"}
    | {"zeus_kfp.report", "zeus_kfp.train", "zeus_kfp.launch", "zeus_kfp.fleet"},
    # the command line: the top; everything below it, never the other way
    "zeus_kfp.cli": set(),  # filled in below: every other layer
    # `import zeus_kfp`: the job's and the trial's names, nothing heavy
    "zeus_kfp": FOUNDATION,
}
ALLOWED["zeus_kfp.cli"] = set(ALLOWED) - {"zeus_kfp.cli"}


def module_name(root: Path, path: Path) -> str:
    """The import name of a file under zeus/: zeus/zeus_kfp/store/keys.py is zeus_kfp.store.keys (setup.cfg)."""
    parts = list(path.relative_to(root / "zeus").with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """zeus_kfp.store.keys -> zeus_kfp.store; zeus_kfp.job -> zeus_kfp.job; zeus_kfp -> zeus_kfp."""
    return ".".join(module.split(".")[:2])


def module_graph(root: Path) -> dict[str, dict[str, int]]:
    """Each module under `root`/zeus and the zeus modules it imports, with the line of the first such import:
    at module level, inside functions and under TYPE_CHECKING alike. `from zeus_kfp.store import keys` is an
    import of zeus_kfp.store.keys when that is a module, of zeus_kfp.store (its __init__) otherwise; relative imports
    are resolved. The implicit import of a module's parent packages is not an arrow (Python runs them first
    whatever the module says)."""
    paths = sorted((root / "zeus" / "zeus_kfp").rglob("*.py"))
    modules = {module_name(root, path): path for path in paths}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target not in modules and "." in target:  # `import zeus_kfp.x.y.Name`-style: its module
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    found.setdefault(target, node.lineno)
        graph[name] = found
    return graph


def forbidden_arrows(graph: dict[str, dict[str, int]], allowed: dict[str, set[str]] = ALLOWED) -> list[str]:
    """Every import from one layer into another that `allowed` does not list; a layer it does not know."""
    out = []
    for module, targets in sorted(graph.items()):
        source = layer_of(module)
        if source not in allowed:
            out.append(f"{module}: no layer {source!r} in ALLOWED")
            continue
        for target, line in sorted(targets.items()):
            into = layer_of(target)
            if into != source and into not in allowed[source]:
                out.append(f"{module}:{line} imports {target} ({source} -> {into} is not allowed)")
    return out


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan's algorithm,
    iterative so that a long chain cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, {})))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_every_arrow_between_zeus_packages_is_an_allowed_one():
    assert forbidden_arrows(module_graph(ROOT)) == []


def test_no_module_under_zeus_takes_part_in_an_import_circle():
    assert circles(module_graph(ROOT)) == []


def test_the_report_imports_nothing_of_the_store_and_the_store_nothing_of_the_policies():
    graph = module_graph(ROOT)
    reached = {(layer_of(m), layer_of(t)) for m, targets in graph.items() for t in targets}
    assert ("zeus_kfp.report", "zeus_kfp.store") not in reached
    assert ("zeus_kfp.store", "zeus_kfp.policy") not in reached
    assert {"zeus_kfp.report", "zeus_kfp.store", "zeus_kfp.policy"} <= {
        layer_of(m) for m in graph
    }  # the graph saw them


def test_every_layer_in_the_table_exists_and_the_table_has_no_circle():
    """A stale row (a package that is gone) or a table that allows a circle would make the checks above
    weaker than they read."""
    graph = module_graph(ROOT)
    assert set(ALLOWED) <= {layer_of(m) for m in graph}
    table = {layer: dict.fromkeys(allowed, 0) for layer, allowed in ALLOWED.items()}
    assert circles(table) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A checkout of `files`, each named under the library folder zeus/zeus_kfp/."""
    for where, source in files.items():
        (tmp_path / "zeus" / "zeus_kfp" / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "zeus" / "zeus_kfp" / where).write_text(source)
    return tmp_path


def test_a_planted_circle_is_caught_however_it_is_imported(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "power/__init__.py": "",
            "power/gpu.py": "def open_gpu():\n    from zeus_kfp.power import nvml\n",  # deferred: still an arrow
            "power/nvml.py": "from zeus_kfp.power.gpu import GPUError\n",
            "policy/__init__.py": "",
            "policy/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import View\n",
            "policy/b.py": "import zeus_kfp.policy.a\n",
            "policy/c.py": "from zeus_kfp.policy import a\n",  # into the circle, not part of it
        },
    )
    graph = module_graph(root)
    assert graph["zeus_kfp.policy.a"] == {"zeus_kfp.policy.b": 3}
    assert circles(graph) == [["zeus_kfp.policy.a", "zeus_kfp.policy.b"], ["zeus_kfp.power.gpu", "zeus_kfp.power.nvml"]]


def test_a_planted_forbidden_arrow_and_an_unplaced_module_are_caught(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "report/__init__.py": "",
            "report/numbers.py": "import pandas\n\n\ndef read(uri):\n    from zeus_kfp.store import open_store\n",
            "store/__init__.py": "from zeus_kfp.store.store import open_store\n",
            "store/store.py": "from zeus_kfp.policy.history import HistoryView\n",
            "policy/__init__.py": "",
            "policy/history.py": "from zeus_kfp.job import JobSpec\n",
            "job.py": "",
            "planted.py": "",
        },
    )
    assert forbidden_arrows(module_graph(root)) == [
        "zeus_kfp.planted: no layer 'zeus_kfp.planted' in ALLOWED",
        "zeus_kfp.report.numbers:5 imports zeus_kfp.store (zeus_kfp.report -> zeus_kfp.store is not allowed)",
        "zeus_kfp.store.store:1 imports zeus_kfp.policy.history (zeus_kfp.store -> zeus_kfp.policy is not allowed)",
    ]
    assert circles(module_graph(root)) == []
