"""One shape per concept: a trial is zeus_kfp.trials.Trial, and its columns are named from it.

Read in the source (ast), not at run time, so a second trial type or a hand-written column list fails
here the day it is written, wherever it is. Each allowed exception says why it is not a second shape.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zeus_kfp.trials import FRAME_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("zeus", "components", "pipelines", "benchmarks")
# What makes a class trial-shaped: two of a trial's identifying fields.
IDENTITY = {"recurrence", "trial", "attempt", "batch_size", "status"}
TRIAL_SHAPED_CLASSES = {
    "zeus/zeus_kfp/trials.py:Trial": "the trial",
    "zeus/zeus_kfp/trial_history.py:TrialHistory": "the same trials as numpy columns, for the policies "
    "(its rows are Trials)",
    "zeus/zeus_kfp/job.py:TrialResult": "what a runner reports, checked at entry: a trial has it once the store "
    "numbers it",
    "zeus/zeus_kfp/profiles.py:PowerProfile": "a power profile: its rows, and the size, recurrence and trial that "
    "measured it",
    "zeus/zeus_kfp/steps/request.py:TrialRequest": "what the pipeline asks the train step for (its KFP parameters), "
    "before the trial has run: the request, declared once, not a trial",
}
# Lists of string literals naming four or more trial columns that are not trial_columns(...) calls.
OTHER_COLUMN_LISTS = {
    "zeus/zeus_kfp/report/numbers.py:RECURRENCE_COLUMNS": "a recurrence's row (its trials summed), not a trial's",
}


def _sources() -> list[tuple[str, ast.Module]]:
    paths = sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py"))
    return [(p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(), filename=str(p))) for p in paths]


def trial_shaped_classes(sources: list[tuple[str, ast.Module]]) -> set[str]:
    found = set()
    for rel, tree in sources:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if len(names & IDENTITY) >= 2:
                    found.add(f"{rel}:{node.name}")
    return found


def _is_trial_columns_call(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "trial_columns"


def hand_written_column_lists(sources: list[tuple[str, ast.Module]]) -> set[str]:
    """Literal lists or tuples of four or more trial column names, outside a trial_columns(...) call; named by
    the variable they are assigned to (else by line)."""
    found = set()
    for rel, tree in sources:
        inside_calls = {id(arg) for node in ast.walk(tree) if _is_trial_columns_call(node) for arg in node.args}
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                names[id(node.value)] = node.targets[0].id
        for node in ast.walk(tree):
            if not isinstance(node, (ast.List, ast.Tuple)) or id(node) in inside_calls:
                continue
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(strings) == len(node.elts) and len(set(strings) & set(FRAME_COLUMNS)) >= 4:
                found.add(f"{rel}:{names.get(id(node), f'line {node.lineno}')}")
    return found


@pytest.fixture(scope="module")
def sources():
    return _sources()


def test_there_is_one_trial_type(sources):
    assert trial_shaped_classes(sources) == set(TRIAL_SHAPED_CLASSES)


def test_trial_columns_are_named_from_the_trial(sources):
    assert hand_written_column_lists(sources) == set(OTHER_COLUMN_LISTS)


def test_the_checks_catch_a_second_trial_type_and_a_hand_written_column_list():
    planted = ast.parse(
        "from dataclasses import dataclass\n"
        "@dataclass\nclass Row:\n    trial: int\n    batch_size: int\n    cost: float\n"
        "SHOWN = ['recurrence', 'attempt', 'batch_size', 'status', 'cost']\n"
        "OK = trial_columns('recurrence', 'attempt', 'batch_size', 'status', 'cost')\n"
    )
    assert trial_shaped_classes([("zeus/zeus_kfp/planted.py", planted)]) == {"zeus/zeus_kfp/planted.py:Row"}
    assert hand_written_column_lists([("zeus/zeus_kfp/planted.py", planted)]) == {"zeus/zeus_kfp/planted.py:SHOWN"}
