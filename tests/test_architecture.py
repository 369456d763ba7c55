"""Package structure: no import cycles among ppgbench_pl modules, no module over 350 lines, no function over 60.

Cycles are found in the module graph built from every module's AST, with every ``import`` counted wherever
it stands (module level or inside a function: a lazy import hides a cycle from Python, not from the design).
Only imports under ``if TYPE_CHECKING:`` are left out: they never run. A dynamic
``importlib.import_module(name)`` is not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ppgbench_pl"
MAX_LINES = 350
MAX_FUNCTION_LINES = 60
EXCLUDED: tuple[str, ...] = ()


def module_name(path: Path) -> str:
    """``ppgbench_pl/benchmark/setup.py`` -> ``ppgbench_pl.benchmark.setup`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def excluded(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in EXCLUDED)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement below ``node`` (functions included), except those under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            found.append(child)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:  # the ``else:`` of TYPE_CHECKING runs
                found.extend(_imports(ast.Module(body=[branch], type_ignores=[])))
        else:
            found.extend(_imports(child))
    return found


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports: for ``from a.b import c``, ``a.b.c`` when it is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` where c is an attribute, not a module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, the excluded packages left out."""
    found = modules()
    known = set(found)
    return {name: {t for t in imported_modules(name, path, known) if not excluded(t)}
            for name, path in found.items() if not excluded(name)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (``[a, b, ..., a]``) of the graph, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_cycle_finder_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    pkg = tmp_path / "ppgbench_pl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("def f():\n    from ppgbench_pl.y import g\n")
    (pkg / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import z\n"
                              "else:\n    from . import x\n")
    known = {"ppgbench_pl", "ppgbench_pl.x", "ppgbench_pl.y", "ppgbench_pl.z"}
    assert imported_modules("ppgbench_pl.x", pkg / "x.py", known) == {"ppgbench_pl.y"}
    assert imported_modules("ppgbench_pl.y", pkg / "y.py", known) == {"ppgbench_pl.x"}


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", [n for n in modules() if not excluded(n)])
def test_module_is_at_most_350_lines(name: str) -> None:
    path = modules()[name]
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES}): split it"


def long_functions(source: str) -> list[str]:
    """``name (lines)`` of every function or method over :data:`MAX_FUNCTION_LINES` lines (docstring included)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{node.name} ({length} lines)")
    return out


def test_the_function_length_check_counts_lines():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def long():\n{body}\n") == [f"long ({MAX_FUNCTION_LINES + 1} lines)"]
    assert long_functions("def short():\n    return 1\n") == []


def test_no_function_over_60_lines() -> None:
    found = {str(path.relative_to(ROOT)): long for path in sorted(PACKAGE.rglob("*.py"))
             if (long := long_functions(path.read_text()))}
    assert not found, found
