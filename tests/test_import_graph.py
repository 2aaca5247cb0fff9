"""The engine's modules import each other without a circle, and down the engine's layers
(issue 34): read from the code with ``ast`` (and the ``.pxd`` files' ``cimport`` lines),
counting every import a reader must follow: at module level, inside a function, and under
``if TYPE_CHECKING:``.

The engine's layers, lowest first, are written once, here (:data:`ENGINE_LAYERS`); docs/design.md
("The engine's modules") shows the same table, and a test holds the two together.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"

# The engine's modules by layer, lowest first (docs/design.md, "The engine's modules"): a
# module imports modules of its own layer or below. ``x.*`` is every module of the package x;
# ``__init__`` is the package sweepq.engine itself.
ENGINE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        ("constants", "errors", "sizes", "options", "checks", "identifiers", "sequence", "recorder", "extensions"),
    ),
    (
        "message",
        (
            "record",
            "properties",
            "message",
            "selector",
            "selector.*",
            "matching",
            "distributed.objects",
            "distributed.resolve",
            "distributed.headers",
        ),
    ),
    ("core", ("core", "core.*")),
    ("store", ("storage", "durable.layout", "durable.packed", "durable.checked", "durable.since", "durable.journal")),
    ("queue", ("waiting", "tiering", "queuebatches", "queuesweep", "queue", "budget", "uow")),
    ("handle state", ("internals", "api", "cursor", "handlestate", "poison", "groups.position")),
    ("paths", ("batch", "getpath", "putpath")),
    ("calls", ("browse", "groups", "groups.calls", "groups.put", "groups.search")),
    ("connection", ("handle", "connection")),
    (
        "manager's parts",
        (
            "dynamic",
            "distributed",
            "distributed.registry",
            "distributed.sync",
            "durable",
            "durable.ledger",
            "durable.recovery",
            "durable.rewrite",
            "settings",
        ),
    ),
    ("manager", ("manager", "__init__")),
)

# The circles that are left, each as its set of modules (issue 34: none; the core's last one,
# lanes/ref/swept, went with engine/core/lane.py and swept.Holder).
KNOWN_CIRCLES: set[frozenset[str]] = set()

# The imports that run up the layers, as (importer, imported) (issue 34: at most 5).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _module(path: Path) -> str:
    parts = list(path.relative_to(ENGINE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


_CIMPORT = re.compile(r"^from\s+(\.*)([\w.]*)\s+cimport\s+(.+)$", re.M)


def _cimports(pxd: Path) -> list[ast.ImportFrom]:
    """A ``.pxd``'s ``from X cimport a, b`` lines, as the imports they are."""
    return [
        ast.ImportFrom(module=name or None, names=[ast.alias(n.strip()) for n in names.split(",")], level=len(dots))
        for dots, name, names in _CIMPORT.findall(pxd.read_text())
    ]


def import_graph() -> dict[str, set[str]]:
    """Every import among the engine's modules: importer -> the modules it imports, wherever
    the import stands (module level, a function, ``if TYPE_CHECKING:``, a ``.pxd``)."""
    paths = {_module(p): p for p in ENGINE.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        package = path.name == "__init__.py"
        nodes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)]
        if path.with_suffix(".pxd").exists():
            nodes += _cimports(path.with_suffix(".pxd"))
        for n in nodes:
            graph[module] |= _targets(module, package, n, modules)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of() -> dict[str, int]:
    """Each engine module's layer (0: the lowest)."""
    modules = {_module(p) for p in ENGINE.rglob("*.py")}
    out: dict[str, int] = {}
    for i, (_, entries) in enumerate(ENGINE_LAYERS):
        for e in entries:
            if e.endswith(".*"):
                named = {m for m in modules if m.startswith(e[:-1])}
            else:
                named = {"" if e == "__init__" else e} & modules
            for m in named:
                assert m not in out, f"{m!r} is in two layers"
                out[m] = i
    return out


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    layer = layer_of()
    return {(a, b) for a in graph for b in graph[a] if layer[b] > layer[a]}


def test_every_engine_module_has_a_layer():
    missing = {_module(p) for p in ENGINE.rglob("*.py")} - set(layer_of())
    assert not missing, f"give these modules a layer in ENGINE_LAYERS and docs/design.md: {sorted(missing)}"


def test_the_engine_modules_import_each_other_without_a_circle():
    found = set(circles(import_graph()))
    assert found == KNOWN_CIRCLES, f"new: {[sorted(c) for c in found - KNOWN_CIRCLES]}; gone: {KNOWN_CIRCLES - found}"


def test_imports_run_down_the_layers():
    assert len(KNOWN_UPWARD) <= 5, "issue 34: at most 5 imports run up the layers"
    found = upward(import_graph())
    assert found == KNOWN_UPWARD, f"new: {sorted(found - KNOWN_UPWARD)}; gone: {sorted(KNOWN_UPWARD - found)}"


def test_the_design_pages_table_of_the_engines_layers_is_this_one():
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index("\n### The engine's modules\n")
    rows = [line for line in text[start:].split("\n#")[1].splitlines() if re.match(r"\| \d", line)]
    table = [(cells[1], re.findall(r"`([\w.*]*)`", cells[2])) for cells in (r.strip("|").split(" | ") for r in rows)]
    assert table == [(name, list(entries)) for name, entries in ENGINE_LAYERS]


def test_the_graph_sees_imports_of_every_form():
    """The reading itself: relative, absolute, from a package, a sibling, in a function,
    under TYPE_CHECKING, and a .pxd's cimport."""
    graph = import_graph()
    assert {"connection", "distributed", "settings", "budget", "checks"} <= graph["manager"]
    assert "properties" in graph["record"]  # inside a function
    assert "identifiers" in graph["properties"] and "selector" not in graph["properties"]
    assert "core.lane" in graph["core.ref"]  # under TYPE_CHECKING
    assert {"getpath", "putpath"} <= graph["handle"]
    assert "core.arena" in graph["core.lanes"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
