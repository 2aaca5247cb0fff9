"""The queue core's door (docs/design.md, "The core's door"): code outside engine/core/ calls
the core's methods and reads its public fields, and nothing else. Held here by reading the
source (as tests/test_internals.py holds the manager's private state):

* no module outside engine/core/ imports a private name (``_x``) from the core, or reads one
  off a core module or a core object;
* no module outside engine/core/ writes a field of a core object (``x.field = ...``,
  ``x.field[i] = ...``, ``x.field += ...``, ``del x.field``, or ``x.field.append(...)`` and the
  other mutating calls): the core offers a method instead (``SweptBlob.recovered``,
  ``LaneSet.take_emptied``, ``Lane.read_ahead``, ...);
* ``LaneSet``'s public surface (methods, properties and fields without a leading underscore)
  is at most half of what it was when the door was narrowed: 80 names then (61 methods and
  properties, 19 fields), 40 at most now.

A module's write of a field that one of its own classes declares (a browse cursor's ``lane``,
a waiter's ``rec``) is that class's; any other write of a field named as a core field is
reported, but for the few listed in :data:`NOT_CORE`, checked by hand. The compiled core also
refuses a write to LaneSet's fields at run time (``cdef readonly``, engine/core/lanes.pxd).
"""

from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

from sweepq.engine.core.lanes import LaneSet

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "engine" / "core"
FOLDERS = ("engine", "net", "cli", "queues", "sweeper", "bench", "blobstore", "pipeline")
SURFACE_BEFORE = 80  # LaneSet's public names before the door was narrowed (issue 34)
MUTATORS = {"append", "appendleft", "extend", "insert", "pop", "popleft", "remove", "clear", "add", "discard", "update"}
# Writes outside the core of a field named as a core field is, on an object that is no core
# object (checked by hand): (module, target).
NOT_CORE = {
    ("cli/serve.py", "args.count"),  # argparse's namespace
    ("engine/manager.py", "self.recovery.damaged"),  # the recovery report's
    ("engine/manager.py", "report.damaged"),
}


def _outside() -> list[tuple[Path, ast.Module]]:
    """Every module outside engine/core/ in the project's folders, parsed."""
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if CORE not in path.parents:
                out.append((path, ast.parse(path.read_text(), str(path))))
    return out


def _core_classes() -> list[ast.ClassDef]:
    return [
        n for p in sorted(CORE.glob("*.py")) for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)
    ]


def _core_fields() -> set[str]:
    """The fields of the core's types: the compiled ones' (``cdef`` attributes in the .pxd
    files) and the Python ones' (``__slots__``)."""
    fields: set[str] = set()
    decl = re.compile(r"^    cdef (?:public |readonly )?[\w\[\]:, ]+?\s(\w+(?:, \w+)*)\s*$", re.M)
    for pxd in CORE.glob("*.pxd"):
        for m in decl.finditer(pxd.read_text()):
            fields |= {f.strip() for f in m.group(1).split(",")}
    for cls in _core_classes():
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in stmt.targets):
                fields |= set(ast.literal_eval(stmt.value))
    return {f for f in fields if not f.startswith("_")}


def _declared_outside(trees: list[tuple[Path, ast.Module]]) -> set[str]:
    """Attribute names that classes outside the core declare: ``self.x = ...`` in their
    methods, their ``__slots__`` and their annotated class-level fields (dataclasses)."""
    names: set[str] = set()
    for _, tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for n in ast.walk(cls):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _is_self(n.value):
                    names.add(n.attr)
                elif isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in n.targets):
                    with contextlib.suppress(ValueError):
                        names |= set(ast.literal_eval(n.value))
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    names.add(stmt.target.id)
    return names


def _imported_outside(path: Path, tree: ast.Module, trees: dict[Path, ast.Module]) -> list[tuple[Path, ast.Module]]:
    """The modules outside the core that ``path`` imports names from (``from .cursor import
    Cursor``): a class declared there is as much its own as one declared in it."""
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.ImportFrom) or not n.module:
            continue
        if n.level:
            base = path.parent
            for _ in range(n.level - 1):
                base = base.parent
        elif n.module.startswith("sweepq."):
            base = ROOT
        else:
            continue
        parts = n.module.removeprefix("sweepq.").split(".") if not n.level else n.module.split(".")
        target = base.joinpath(*parts).with_suffix(".py")
        if target in trees:
            out.append((target, trees[target]))
    return out


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _spine(target: ast.expr):
    """What a target writes: each element of a tuple, and ``x.field`` of ``x.field[i]``."""
    if isinstance(target, ast.Tuple | ast.List):
        for e in target.elts:
            yield from _spine(e)
    elif isinstance(target, ast.Starred):
        yield from _spine(target.value)
    else:
        while isinstance(target, ast.Subscript):
            target = target.value
        yield target


def _writes(tree: ast.Module, fields: set[str]) -> list[tuple[int, str]]:
    """(line, expression) of every write of one of ``fields`` on an object other than self."""
    found = []
    for n in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign | ast.Delete):
            targets = list(n.targets)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign):
            targets = [n.target]
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in MUTATORS
            and isinstance(n.func.value, ast.Attribute)
        ):
            targets = [n.func.value]
        for target in targets:
            for t in _spine(target):
                if isinstance(t, ast.Attribute) and t.attr in fields and not _is_self(t.value):
                    found.append((n.lineno, ast.unparse(t)))
    return sorted(set(found))


def test_no_module_outside_the_core_uses_its_private_names():
    private = {
        n.name
        for cls in _core_classes()
        for n in cls.body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("_") and not n.name.endswith("__")
    }
    for cls in _core_classes():
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in stmt.targets):
                private |= {f for f in ast.literal_eval(stmt.value) if f.startswith("_")}
    trees = _outside()
    # A private name a class outside the core declares too (a message's ``_rec``) is that
    # class's: reading it is another rule's matter (no reaching into another object's state).
    private -= _declared_outside(trees) | {
        f.name
        for _, t in trees
        for c in ast.walk(t)
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if isinstance(f, ast.FunctionDef)
    }
    found = []
    for path, tree in trees:
        rel = path.relative_to(ROOT)
        core_modules = set()  # names this module binds to a core module
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and (n.module.startswith("core") or ".core" in n.module):
                for alias in n.names:
                    if alias.name.startswith("_"):
                        found.append(f"{rel}:{n.lineno}: imports {alias.name} from {n.module}")
                    else:
                        core_modules.add(alias.asname or alias.name)
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.endswith("__"):
                base = n.value
                via_module = isinstance(base, ast.Name) and base.id in core_modules
                if via_module or (n.attr in private and not _is_self(base)):
                    found.append(f"{rel}:{n.lineno}: reads {ast.unparse(n)}")
    assert not found, "the core's private names, used outside engine/core/:\n" + "\n".join(found)


def test_no_module_outside_the_core_writes_a_field_of_a_core_object():
    fields = _core_fields()
    found = []
    trees = dict(_outside())
    for path, tree in trees.items():
        rel = path.relative_to(ROOT)
        own = _declared_outside([(path, tree), *_imported_outside(path, tree, trees)])  # its own classes' fields
        for line, expr in _writes(tree, fields - own):
            if (str(rel), expr) not in NOT_CORE:
                found.append(f"{rel}:{line}: {expr}")
    assert not found, "core fields written outside engine/core/ (call a core method instead):\n" + "\n".join(found)


def test_the_field_check_sees_a_write():
    """The check above is not vacuous: each kind of write is found."""
    tree = ast.parse(
        "blob.flags[dead] = 1\nlane.ahead = 3\nblob.live -= 1\nls.chain.append(b)\nself.ahead = 0\ndel b.prefetch"
    )
    assert [line for line, _ in _writes(tree, {"flags", "ahead", "live", "chain", "prefetch"})] == [1, 2, 3, 4, 6]


def test_the_laneset_s_public_surface_is_at_most_half_of_what_it_was():
    # Counted on the class that runs (compiled: its C methods and readonly fields) ...
    live = [n for n in dir(LaneSet) if not n.startswith("_")]
    # ... and on the source, which is both forms' (methods, properties, __slots__).
    cls = next(c for c in _core_classes() if c.name == "LaneSet")
    source = [n.name for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in stmt.targets):
            source += [f for f in ast.literal_eval(stmt.value) if not f.startswith("_")]
    assert len(source) <= SURFACE_BEFORE // 2, f"LaneSet offers {len(source)} public names: {sorted(source)}"
    assert set(live) == set(source), f"the running LaneSet differs from its source: {set(live) ^ set(source)}"
    pxd = (CORE / "lanes.pxd").read_text()
    laneset = pxd[pxd.index("cdef class LaneSet") :]
    assert "cdef public" not in laneset, "LaneSet's fields are read-only outside the core (cdef readonly)"
