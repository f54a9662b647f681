"""The package's imports run one way: floors from the ground up, each importing only from below,
no two modules importing each other (however indirectly), Dagster only in its glue.

Every import counts, as a reader of the code sees it: at the top of a module, inside a function,
under ``TYPE_CHECKING``. Run ``python -m pytest tests/unit/test_layering.py`` after moving code.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nl2sql_assets"

#: Each part of the package and its floor; a part imports only parts on lower floors.
FLOORS: dict[str, int] = {
    "errors": 0, "version": 0, "paths": 0, "redact": 0, "signals": 0, "forking": 0,
    "atomic": 1, "yamlio": 1,
    "config": 2, "testbed": 2, "instance": 2,
    "cluster": 3, "datasources": 3, "llm": 3,
    "policy": 4, "retrieval": 4,
    "engine": 5,
    "engines": 6,
    "evaluation": 7,  # the stages' package face: it imports none of them
    "evaluation.suites": 8,
    "evaluation.judging": 9,
    "evaluation.neighbours": 10,
    "evaluation.grading": 11, "evaluation.running": 11,
    "evaluation.reporting": 12,
    "evaluation.history": 13,
    "public_benchmarks": 14,
    "demo": 14,  # init --demo: the databases, and on a server the suites moved and their rows regenerated
    "project": 15,
    "__init__": 16,  # the package's face hands out the facade
    "defs": 17,
    "ui": 18,  # `nl2sql-assets ui`: starts dagster dev on the code location defs names
    "cli": 19, "definitions": 19,
}
#: The only parts that may import Dagster (or a Dagster add-on).
DAGSTER_GLUE = {"defs", "definitions", "cli"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """``nl2sql_assets.evaluation.running.modes.full`` -> ``evaluation.running``."""
    names = module.split(".")[1:]
    if not names:
        return "__init__"
    return ".".join(names[:2]) if names[0] == "evaluation" and len(names) > 1 else names[0]


@cache
def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Module -> the package modules it imports, and module -> the outside top-level packages."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    inside: dict[str, set[str]] = {m: set() for m in files}
    outside: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "nl2sql_assets":
                    found = resolve(target)
                    if found and found != module:
                        inside[module].add(found)
                else:
                    outside[module].add(target.split(".")[0])
    return inside, outside


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize(("graph", "expected"), [
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"a"}}, []),  # a module naming itself is no circle
])
def test_cycles_finds_every_loop_of_imports(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


@pytest.mark.parametrize(("module", "part"), [
    ("nl2sql_assets", "__init__"),
    ("nl2sql_assets.config", "config"),
    ("nl2sql_assets.evaluation", "evaluation"),
    ("nl2sql_assets.evaluation.running.modes.full", "evaluation.running"),
    ("nl2sql_assets.defs.celery_steps", "defs"),
])
def test_part_of(module: str, part: str) -> None:
    assert part_of(module) == part


def test_no_two_modules_import_each_other() -> None:
    inside, _ = import_graph()
    assert cycles(inside) == []


def test_every_part_has_a_floor() -> None:
    inside, _ = import_graph()
    assert {part_of(m) for m in inside} <= set(FLOORS)


def test_every_import_goes_down_a_floor() -> None:
    inside, _ = import_graph()
    upward = sorted(f"{a} -> {b}" for a, targets in inside.items() for b in targets
                    if part_of(a) != part_of(b) and FLOORS[part_of(b)] >= FLOORS[part_of(a)])
    assert upward == []


def test_only_the_dagster_glue_imports_dagster() -> None:
    _, outside = import_graph()
    importers = sorted(m for m, names in outside.items()
                       if any(n == "dagster" or n.startswith("dagster_") for n in names)
                       and part_of(m) not in DAGSTER_GLUE)
    assert importers == []


def test_the_command_line_is_a_package_of_small_modules() -> None:
    """One module per command group, each declaring its own parser and handler: none over 400 lines."""
    modules = sorted((PACKAGE / "cli").glob("*.py"))
    assert len(modules) >= 10
    long = {p.name: n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
