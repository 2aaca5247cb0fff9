"""The engine's modules import each other without a circle (issue 27): read from the code
with ``ast``, counting the imports that run (not those under ``if TYPE_CHECKING:``, which
exist for the type checker only).

At module level there is no circle at all, so a module can be read, and loaded, after the
ones it imports. Imports inside a function run at its first call; the circles they close are
listed here, by edge, so that a new one fails this test instead of going unnoticed.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"

# Imports inside a function that close a circle, as (importer, imported). getpath.py (the one
# get path) calls into browse cursors, groups and the channel batch that themselves call the
# get path; these three are where that circle is cut at load time.
KNOWN_LAZY_CIRCLES = {
    ("getpath", "browse"),
    ("getpath", "connection"),
    ("getpath", "groups"),
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ENGINE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, package: bool, node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The engine modules ``node`` imports (``from . import x`` imports x, not the package)."""
    if isinstance(node, ast.Import):
        names = [a.name.removeprefix("sweepq.engine.") for a in node.names if a.name.startswith("sweepq.engine.")]
        return {n for n in names if n in modules}
    if node.level == 0:
        if not (node.module or "").startswith("sweepq.engine"):
            return set()
        base = node.module.removeprefix("sweepq.engine").lstrip(".")  # type: ignore[union-attr]
    else:
        here = module.split(".") if module else []
        up = here if package else here[:-1]
        up = up[: len(up) - (node.level - 1)]
        base = ".".join([*up, *([node.module] if node.module else [])])
    out = set()
    for a in node.names:
        sub = f"{base}.{a.name}" if base else a.name
        out.add(sub if sub in modules else base)
    return {t for t in out if t in modules and t != module}


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, imports inside functions) among the engine's modules."""
    paths = {_module(p): p for p in ENGINE.rglob("*.py")}
    modules = set(paths)
    top: dict[str, set[str]] = defaultdict(set)
    lazy: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        package = path.name == "__init__.py"

        def walk(body: list[ast.stmt], at_top: bool, module: str = module, package: bool = package) -> None:
            for n in body:
                if isinstance(n, ast.If) and _type_checking(n.test):
                    walk(n.orelse, at_top)
                    continue
                if isinstance(n, ast.Import | ast.ImportFrom):
                    (top if at_top else lazy)[module] |= _targets(module, package, n, modules)
                    continue
                inner = at_top and not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                for field in ("body", "orelse", "finalbody", "handlers"):
                    sub = getattr(n, field, None)
                    if isinstance(sub, list):
                        walk(sub, inner)

        walk(ast.parse(path.read_text()).body, True)
    return top, lazy


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return False


def test_the_engine_modules_import_each_other_without_a_circle_at_load():
    top, _ = import_graph()
    circles = sorted((a, b) for a in top for b in top[a] if _reaches(top, b, a))
    assert circles == [], f"module-level imports that close a circle: {circles}"


def test_imports_inside_functions_close_only_the_known_circles():
    top, lazy = import_graph()
    both = {m: top.get(m, set()) | lazy.get(m, set()) for m in set(top) | set(lazy)}
    closing = {(a, b) for a in lazy for b in lazy[a] if b not in top.get(a, ()) and _reaches(both, b, a)}
    assert closing == KNOWN_LAZY_CIRCLES, f"new: {closing - KNOWN_LAZY_CIRCLES}; gone: {KNOWN_LAZY_CIRCLES - closing}"


def test_the_graph_sees_imports_of_every_form():
    """The reading itself: relative, absolute, from a package, a sibling, and none under
    TYPE_CHECKING (manager.py imports .distributed's types only for the checker)."""
    top, lazy = import_graph()
    assert {"connection", "distributed", "settings", "budget", "checks"} <= top["manager"]
    assert "properties" in lazy["record"] and "properties" not in top["record"]
    assert "identifiers" in top["properties"] and "selector" not in top["properties"]
    assert "manager" not in top["connection"]  # typing only
