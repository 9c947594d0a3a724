"""What a test's code reaches, read from its bytecode: the classifier behind the suite's tiers (tiers.py).

`Reach(costs).of(obj)` follows a function, class or object name by name: the globals its code loads, attribute
chains from them (read with `inspect.getattr_static`, so no property or `__getattr__` runs), and the names
imported inside it. Functions and classes of this repository (tests/, zeus/, components/, pipelines/,
benchmarks/) are followed further, a class as all its methods; anything else stops the walk, except where
its qualified name is one of `costs` (or under one), which gives that entry's markers. What it cannot see (a
method called on a local variable, a command run in-process through typer's CliRunner, a library that starts
a process inside) the tripwire in tiers.py catches.
"""

from __future__ import annotations

import dis
import importlib
import inspect
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OURS = tuple(str(REPO / folder) + os.sep for folder in ("tests", "zeus", "components", "pipelines", "benchmarks"))

_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}
_STORES = {"STORE_FAST", "STORE_DEREF", "STORE_NAME", "STORE_GLOBAL"}
_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME", "LOAD_GLOBAL"}
_MISSING: Any = object()

# marker -> how it was first reached ("ux.cli_process.run_cli > subprocess")
Found = dict[str, str]


def qualified(obj: object) -> str:
    """module.qualname of a module, function or class ('' for anything else)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else ""


def is_ours(obj: object, roots: tuple[str, ...] = OURS) -> bool:
    """Defined in a module under one of `roots` (this repository's folders), not an installed one."""
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = str(getattr(module, "__file__", "") or "")
    return path.startswith(roots) and "site-packages" not in path


def merge(into: Found, found: Mapping[str, str], via: str = "") -> None:
    """Add `found` to `into`, keeping the first way each marker was reached, `via` prefixed."""
    for marker, path in found.items():
        into.setdefault(marker, f"{via} > {path}" if via else path)


class Reach:
    """What code reaches, memoized per object: one instance for a collection."""

    def __init__(self, costs: Mapping[str, tuple[str, ...]], roots: tuple[str, ...] = OURS) -> None:
        self.costs = costs
        self.roots = roots  # where the code it follows lives
        self._done: dict[int, Found] = {}
        self._busy: set[int] = set()
        self._keep: list[object] = []  # what is memoized by id stays alive

    def direct(self, name: str) -> Found:
        """The markers `costs` gives a qualified name (a key, or a name under one)."""
        hits = [marks for key, marks in self.costs.items() if name == key or name.startswith(key + ".")]
        return {marker: name for marks in hits for marker in marks}

    def of(self, obj: object) -> Found:
        """The markers reached from `obj`, each with the first path to it."""
        if isinstance(obj, staticmethod | classmethod):
            obj = obj.__func__
        if inspect.isfunction(obj) or inspect.ismethod(obj):
            obj = inspect.unwrap(obj)
        name = qualified(obj)
        found = self.direct(name) if name else {}
        if found or isinstance(obj, types.ModuleType):
            return found
        if not (isinstance(obj, type) or inspect.isfunction(obj) or inspect.ismethod(obj)):
            kind = type(obj)  # an instance: of a class of ours, its class; otherwise nothing
            return self.of(kind) if is_ours(kind, self.roots) else {}
        if not is_ours(obj, self.roots):
            return {}
        key = id(obj)
        if key in self._done:
            return self._done[key]
        if key in self._busy:  # a cycle: what the first visit finds is memoized for the rest
            return {}
        self._busy.add(key)
        try:
            found = self._class(obj) if isinstance(obj, type) else self._code(obj.__code__, obj.__globals__, {})
        finally:
            self._busy.discard(key)
        self._done[key] = found
        self._keep.append(obj)
        return found

    def _class(self, cls: type) -> Found:
        found: Found = {}
        for klass in cls.__mro__:
            merge(found, self.direct(qualified(klass)))
            if klass is cls or is_ours(klass, self.roots):
                for attribute, member in vars(klass).items():
                    inner = member.fget if isinstance(member, property) else member
                    if isinstance(inner, staticmethod | classmethod | type) or inspect.isfunction(inner):
                        merge(found, self.of(inner), f"{qualified(klass)}.{attribute}")
        return found

    def _code(self, code: types.CodeType, scope: dict[str, Any], bound: dict[str, Any]) -> Found:
        """What a code object reaches: globals, attribute chains from them, names imported inside it, and
        its nested functions (which see its imported names through `bound`)."""
        found: Found = {}
        bound = dict(bound)
        here = f"{scope.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
        current: Any = _MISSING
        importing: Any = _MISSING  # the module of the import statement being read (IMPORT_FROM takes names of it)
        for ins in dis.get_instructions(code):
            op = ins.opname
            if op == "IMPORT_NAME":
                current = importing = _import(ins.argval, scope)
            elif op == "IMPORT_FROM":
                current = getattr(importing, ins.argval, _MISSING) if importing is not _MISSING else _MISSING
                if current is _MISSING and isinstance(importing, types.ModuleType):
                    current = _import(f"{importing.__name__}.{ins.argval}", scope)
            elif op in _STORES and current is not _MISSING:
                bound[ins.argval] = current
                current = _MISSING
                continue
            elif op in _LOADS:
                if ins.argval in bound:
                    current = bound[ins.argval]
                elif op in {"LOAD_GLOBAL", "LOAD_NAME"}:
                    current = scope.get(ins.argval, _MISSING)
                    if current is _MISSING:
                        current = getattr(scope.get("__builtins__"), ins.argval, _MISSING)
                else:
                    current = _MISSING
            elif op in _ATTRS and current is not _MISSING:
                current = inspect.getattr_static(current, ins.argval, _MISSING)
            else:
                current = _MISSING
            if current is not _MISSING:
                merge(found, self.of(current), here)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                merge(found, self._code(const, scope, bound))
        return found


def _import(name: str, scope: dict[str, Any]) -> Any:
    """The module an import statement names (a relative one against `scope`'s package), or _MISSING."""
    for candidate in (name, f"{scope.get('__package__') or ''}.{name}"):
        try:
            return importlib.import_module(candidate)
        except Exception:  # a name the walk cannot resolve is one it does not follow
            continue
    return _MISSING
