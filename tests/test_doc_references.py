"""Every file path and code symbol that the docs (docs/*.md, README.md) and the code's
docstrings and comments mention exists: a renamed module, class or method fails here, not in a
reader's hands.

What is resolved, and how:

* a path under a folder of the repository (``engine/queue.py``, ``engine/durable/``,
  ``tests/test_codec.py``, ``engine/groups/*``), anywhere in a doc, a docstring or a comment:
  it must exist (a pattern must match a file);
* a name in a code span of a doc (``QueueSweep.sweep_link``, ``sweepq.engine.getpath.obtain_locked``,
  ``decide()``) or of a docstring (``QueueTier.unsweep_locked()``), and every name of a Sphinx
  role in a docstring (``:meth:`unsweep_locked```, ``:class:`~sweepq.engine.Connection```,
  ``:func:`prove```): a dotted name from ``sweepq`` must import; ``LocalQueue.mutex`` must
  name a class of the project (or of the standard library, rocksdict or zstandard) and a member
  of it (a method, a class attribute, or one its methods assign to ``self``); ``name()`` must
  be a function or method of the project, a parameter of the function whose docstring says it,
  or a method of a built-in type. A role's name is looked up beside its docstring first (its
  class, its module, its package), as Sphinx does.

Not resolved: lower-case words in code spans (``commit``, ``sync="os"``, ``qm.channels``: options,
values, example variables), bare capitalised words outside roles (MQ's field names such as
``CorrelId``, units such as ``KiB``), file names (``sweepq.sock``, ``BrowserTest.java``), paths
elided with ``...``, and the names of NOT_CODE below.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists())
FOLDERS = [*PACKAGES, "tests", "docs", ".ci"]
SOURCES = [p for d in (*PACKAGES, "tests") for p in sorted((ROOT / d).rglob("*.py"))] + sorted(ROOT.glob("*.py"))
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

PATH = re.compile(r"(?<![\w/.~-])((?:" + "|".join(re.escape(f) for f in FOLDERS) + r")/[\w*./-]*)")
SPAN = re.compile(r"(?<!`)(``?)([^`\n]+?)\1(?!`)")
ROLE = re.compile(r":(?:py:)?(class|meth|func|attr|mod|data|exc|obj):`~?([^`]+)`")
DOTTED = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*")
CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[A-Z][a-z]+")
CALL = re.compile(r"([A-Za-z_][\w.]*)\(\)")
# Modules whose classes the docs and docstrings name (``IntEnum``, ``Condition``, ``Rdict``).
LIBRARIES = (
    "typing",
    "threading",
    "enum",
    "collections",
    "queue",
    "asyncio",
    "dataclasses",
    "array",
    "argparse",
    "rocksdict",
    "zstandard",
)
# Types whose methods a doc may call by bare name (``keys()``, ``cancel()``).
BUILTIN_TYPES = (dict, list, set, str, bytes, memoryview, "asyncio.Task", "threading.Thread")
# Dotted words that look like code and are not Python: the selector syntax's MQMD prefix
# (docs/selectors.md, engine/selector/).
NOT_CODE = {"Root"}
FILE_SUFFIXES = (".sock", ".token", ".py", ".java", ".go", ".md", ".json", ".png", ".html", ".log", ".parquet", ".csv")


@dataclass
class Index:
    """What the project defines, read from its source: classes (by name) with their members,
    and every function and method name."""

    classes: dict[str, list[set[str]]] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    bases: dict[str, set[str]] = field(default_factory=dict)

    def add(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.add(node.name)
            elif isinstance(node, ast.ClassDef):
                members = set()
                for item in ast.walk(node):
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and item is not node:
                        members.add(item.name)
                    elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                        members.add(item.id)
                    elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                        members.add(item.attr)
                    elif isinstance(item, ast.Constant) and isinstance(item.value, str) and item.value.isidentifier():
                        members.add(item.value)  # __slots__, namedtuple fields
                self.classes.setdefault(node.name, []).append(members)
                self.bases.setdefault(node.name, set()).update(ast.unparse(b).split(".")[-1] for b in node.bases)

    def has_member(self, cls: str, member: str, seen: frozenset = frozenset()) -> bool:
        if any(member in m for m in self.classes.get(cls, [])):
            return True
        for base in self.bases.get(cls, set()) - seen:
            if base in self.classes and self.has_member(base, member, seen | {cls}):
                return True
            if base not in self.classes and _stdlib_class(base) is not None and hasattr(_stdlib_class(base), member):
                return True
        return False


@functools.cache
def _stdlib_class(name: str):
    if isinstance(getattr(builtins, name, None), type):
        return getattr(builtins, name)
    for mod in LIBRARIES:
        obj = getattr(importlib.import_module(mod), name, None)
        if isinstance(obj, type):
            return obj
    return None


def _module_name(path: Path) -> str:
    """The name ``path`` imports as: ``sweepq.engine.queue``; a test helper by its stem."""
    if not path.is_relative_to(ROOT):
        return path.stem
    rel = path.relative_to(ROOT).with_suffix("")
    if rel.parts[0] == "tests":
        return rel.name
    return ".".join(["sweepq", *[p for p in rel.parts if p != "__init__"]])


def _builtin_method(name: str) -> bool:
    for t in BUILTIN_TYPES:
        if isinstance(t, str):
            mod, _, cls = t.partition(".")
            t = getattr(importlib.import_module(mod), cls)
        if hasattr(t, name):
            return True
    return False


@functools.cache
def _import_dotted(name: str) -> bool:
    """``sweepq.engine.queue.LocalQueue.mutex``: the longest prefix that imports, then
    attributes (the last may be one that the class's methods assign)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:], cut):
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif isinstance(obj, type) and i == len(parts) - 1:
                return INDEX.has_member(obj.__name__, attr)
            else:
                return False
        return True
    return False


INDEX = Index()
for _src in SOURCES:
    INDEX.add(ast.parse(_src.read_text()))


def resolve_name(name: str, where: str = "", cls: str | None = None, local: frozenset = frozenset()) -> bool:
    """Whether the code name ``name`` (as a span or a role writes it) exists. ``where`` is the
    module whose docstring mentions it (a package's own name for its ``__init__``), ``cls``
    its class, ``local`` the parameters of its function."""
    name = name.strip().lstrip("~").removesuffix("()")
    if name in ("None", "True", "False") or name.split(".")[0] in NOT_CODE:
        return True
    if name.startswith("."):  # relative to the package, as in an import
        package = where if _is_package(where) else where.rpartition(".")[0]
        return _import_dotted(package + name)
    if name.startswith("sweepq."):
        return _import_dotted(name)
    head, _, rest = name.partition(".")
    if where:  # beside the docstring first: its class, its module, its package
        if not rest and (name in local or (cls and INDEX.has_member(cls, name))):
            return True
        for base in (where, where.rpartition(".")[0]):
            if base and _import_dotted(f"{base}.{name}"):
                return True
    if head in INDEX.classes:
        member = rest.partition(".")[0]
        return not rest or INDEX.has_member(head, member)
    lib = _stdlib_class(head)
    if lib is not None:
        return not rest or hasattr(lib, rest.partition(".")[0])
    if not rest:
        return name in INDEX.functions or name in INDEX.classes or _builtin_method(name)
    return False


@functools.cache
def _is_package(module: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), "__path__")
    except ImportError:
        return False


def _names_in_span(span: str) -> list[str]:
    """The references a code span holds: a dotted name from sweepq, ``LocalQueue.mutex``, or a
    call ``name()``; nothing else (options, values, example variables, bare words)."""
    span = span.strip()
    if span.endswith(FILE_SUFFIXES):
        return []
    if re.fullmatch(r"sweepq(\.\w+)+(\(\))?", span):
        return [span]
    m = re.fullmatch(r"([A-Z]\w*(?:\.\w+)+)(\(\))?", span)
    if m and not m.group(1).split(".")[0].isupper():
        return [m.group(1)]
    m = re.fullmatch(r"([A-Za-z_]\w*)\(\)", span)
    if m:
        return [m.group(1)]
    return []


def _path_ok(ref: str) -> bool:
    """A file, a folder, a glob that matches, or ``folder/module.name`` (a name in a module)."""
    if "*" in ref:
        return any(ROOT.glob(ref))
    if (ROOT / ref).exists():
        return True
    module, _, name = ref.rpartition(".")
    if module and (ROOT / f"{module}.py").exists():
        return _import_dotted(_module_name(ROOT / f"{module}.py") + "." + name)
    return False


def _paths(text: str) -> list[str]:
    out = []
    for m in PATH.findall(text):
        ref = m.rstrip(".,:;")
        if "..." not in ref and not ref.endswith("-") and ref.count("/") >= 1 and ref.rstrip("/") not in FOLDERS:
            out.append(ref)
    return out


def _markdown_without_fences(text: str) -> str:
    """The page without its code fences and its quoted run files (``<!-- figures: -->`` blocks,
    tests/test_doc_figures.py): a run file says what was run then, with the paths it had."""
    text = re.sub(r"<!-- figures: \S+ -->\n.*?<!-- /figures -->", "", text, flags=re.S)
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def dangling_in_doc(path: Path) -> list[str]:
    text = _markdown_without_fences(path.read_text())
    bad = [f"path {p}" for p in _paths(text) if not _path_ok(p)]
    for _, span in SPAN.findall(text):
        bad += [f"name {n}" for n in _names_in_span(span) if not resolve_name(n)]
    return bad


def _params(f: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset:
    a = f.args
    return frozenset(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x)


def _docstrings(tree: ast.Module):
    """(docstring, class name or None, parameter names) of the module and of every class and
    function in it."""
    yield ast.get_docstring(tree, clean=False) or "", None, frozenset()

    def walk(node, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):  # a class's docstring may say what __init__ takes
                init = [f for f in child.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
                yield ast.get_docstring(child, clean=False) or "", child.name, _params(init[0]) if init else frozenset()
                yield from walk(child, child.name)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield ast.get_docstring(child, clean=False) or "", cls, _params(child)
                yield from walk(child, cls)

    yield from walk(tree, None)


def dangling_in_source(path: Path) -> list[str]:
    text = path.read_text()
    tree = ast.parse(text)
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    comments = "\n".join(t.string for t in tokens if t.type == tokenize.COMMENT)
    module = _module_name(path)
    docs = list(_docstrings(tree))
    bad = [f"path {p}" for p in _paths(comments + "\n" + "\n".join(d for d, _, _ in docs)) if not _path_ok(p)]
    for doc, cls, local in docs:
        for _, name in ROLE.findall(doc):
            if not resolve_name(name, module, cls, local):
                bad.append(f"name {name}")
        for _, span in SPAN.findall(ROLE.sub("", doc)):
            bad += [f"name {n}" for n in _names_in_span(span) if not resolve_name(n, module, cls, local)]
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_and_name_a_doc_mentions_exists(doc):
    bad = dangling_in_doc(doc)
    assert not bad, f"{doc.relative_to(ROOT)} mentions what does not exist: {sorted(set(bad))}"


def test_every_path_and_name_the_code_mentions_exists():
    bad = {str(p.relative_to(ROOT)): sorted(set(b)) for p in SOURCES if (b := dangling_in_source(p))}
    assert not bad, "docstrings and comments mention what does not exist:\n" + "\n".join(
        f"  {f}: {', '.join(b)}" for f, b in sorted(bad.items())
    )


@pytest.mark.parametrize(
    ("text", "dangling"),
    [
        ("see `engine/queue.py` and engine/durable/", []),
        ("see engine/groups.py", ["path engine/groups.py"]),
        ("`QueueSweep.sweep_link` and `sweepq.engine.getpath.obtain_locked` and `decide()`", []),
        ("`QueueSweep.sweep_linked` and `sweepq.engine.getpath.obtained`", None),
        ("`QueueTeir.check()`", None),
    ],
)
def test_the_resolver_finds_what_it_must(tmp_path, text, dangling):
    """The check itself: good references pass, each kind of dangling one is found."""
    doc = tmp_path / "page.md"
    doc.write_text(text)
    bad = dangling_in_doc(doc)
    if dangling is None:
        assert bad, text
    else:
        assert bad == dangling


def test_the_resolver_reads_docstrings_roles_and_comments(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        '''"""See engine/nothing.py, :meth:`LocalQueue.no_such` and ``QueueTier.gone()``;
:class:`~sweepq.engine.QueueManager`, ``LocalQueue.mutex`` and :func:`f` exist."""


def f(x):
    """Calls ``x()``."""


# engine/core/lanes.py is there, engine/gone/ is not
'''
    )
    assert sorted(dangling_in_source(src)) == [
        "name LocalQueue.no_such",
        "name QueueTier.gone",
        "path engine/gone/",
        "path engine/nothing.py",
    ]
