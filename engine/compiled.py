"""Which modules are compiled, and which form of them runs (docs/design.md, "The core").

The hot modules of the engine, and the server's per-request path in net/, are compiled with
Cython when sweepq is installed (setup.py
builds :data:`MODULES`), each from its own ``.py`` with a ``.pxd`` beside it that adds C
types: one source, two forms. Where the compiled form is missing (no C compiler at install
time), the same source runs interpreted and a warning says so once. ``SWEEPQ_PURE=1`` in the
environment runs the interpreted form on purpose: the test suite runs the model-based tests
in both forms (tests/test_forms.py) and holds them to the same answers.

This module is imported first by ``sweepq.engine``, so that its finder decides the form of
every compiled module before any is imported.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import warnings

MODULES = (
    "sweepq.engine.core.lock",
    "sweepq.engine.core.arena",
    "sweepq.engine.core.ref",
    "sweepq.engine.core.lane",
    "sweepq.engine.core.found",
    "sweepq.engine.core.lanes",
    "sweepq.engine.record",
    "sweepq.engine.sequence",
    "sweepq.engine.message",
    "sweepq.engine.waiting",
    "sweepq.engine.queue",
    "sweepq.engine.handlestate",
    "sweepq.engine.handle",
    "sweepq.engine.putpath",
    "sweepq.engine.getpath",
    # Recovery's check of the stored records, one chunk per call (issue 31 item 2).
    "sweepq.engine.durable.checked",
    # The server's per-request path (issue 31): the frames, their packing and the session loop.
    # Named here, as strings only, so that one list, one build and one digest hold every
    # compiled module (net/ imports the engine, never the other way: nothing here imports them).
    "sweepq.net.protocol",
    "sweepq.net.frames",
    "sweepq.net.session",
)
"""The modules setup.py compiles (the package's name, then the file's path in the tree)."""

PURE = os.environ.get("SWEEPQ_PURE", "") not in ("", "0")
"""Whether the interpreted form was asked for (SWEEPQ_PURE=1)."""


class _Interpreted(importlib.machinery.PathFinder):
    """With SWEEPQ_PURE=1: find the ``.py`` of a compiled module, never its extension."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in MODULES:
            return None
        name = fullname.rpartition(".")[2]
        for folder in path or ():
            source = os.path.join(folder, name + ".py")
            if os.path.exists(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


if PURE and _Interpreted not in sys.meta_path:
    sys.meta_path.insert(0, _Interpreted)


def running() -> bool:
    """Whether the compiled form of the engine runs in this process."""
    from .core import lanes

    return not lanes.__file__.endswith(".py")


DIGEST_FILE = "compiled-sources.sha256"
"""The file, beside this module, in which setup.py's build writes :func:`sources_digest` of the
sources it compiled (in the wheel with the extensions; in the tree for an editable install)."""


def compiled_sources(root: str) -> list[str]:
    """The files the compiled modules are built from, relative to the package's root ``root``
    (the repository, or ``site-packages/sweepq``): each module's ``.py`` and every ``.pxd`` of
    the layers they are in (a module's C code also depends on the ``.pxd`` files it cimports)."""
    found = {os.path.join(*name.split(".")[1:]) + ".py" for name in MODULES}
    for layer in sorted({name.split(".")[1] for name in MODULES}):
        for folder, dirs, files in os.walk(os.path.join(root, layer)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            found.update(os.path.relpath(os.path.join(folder, f), root) for f in files if f.endswith(".pxd"))
    return sorted(found)


def sources_digest(root: str) -> str:
    """One SHA-256 of the compiled modules' sources under ``root`` (:func:`compiled_sources`):
    setup.py bakes it into a build, an import compares it with the installed sources'. File
    contents and names only, never times: pip unpacks a wheel's files in any order."""
    h = hashlib.sha256()
    for rel in compiled_sources(root):
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.replace(os.sep, "/").encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def stale() -> list[str]:
    """The compiled modules built from other sources than the ``.py`` and ``.pxd`` files beside
    them (a tree changed since it was built: run ``pip install -e .`` again), where the old code
    would run; all of them when the build left no digest. Empty when nothing is compiled.
    The engine's modules are imported to be looked at; a module of a layer above it only
    when it was imported already (importing it here, inside the engine's own import, would
    go up the layers)."""
    built = []
    for name in MODULES:
        module = sys.modules.get(name)
        if module is None:
            if not name.startswith("sweepq.engine."):
                continue
            module = importlib.import_module(name)
        if not (module.__file__ or "").endswith(".py"):
            built.append(name)
    if not built:
        return []
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, DIGEST_FILE)) as f:
            baked = f.read().strip()
    except FileNotFoundError:
        return built
    return [] if baked == sources_digest(os.path.dirname(here)) else built


def warn_if_interpreted() -> None:
    """Say once, in one line, that the interpreted form runs when it was not asked for, or that
    a compiled module was built from other sources than those installed beside it."""
    old = stale()
    if old:
        _one_line(
            f"sweepq's compiled core ({len(old)} modules) was built from other sources than those "
            "beside it: reinstall sweepq (`pip install -e .` in its source tree)"
        )
    if not PURE and not running():
        _one_line(
            "sweepq runs its interpreted core, several times slower than the compiled one: it was "
            "installed without a C compiler (install one and reinstall sweepq to compile it)"
        )


def _one_line(message: str) -> None:
    """A RuntimeWarning printed as one line (no source line under it, as warnings.warn adds),
    still an error under ``-W error``."""
    warnings.warn_explicit(message, RuntimeWarning, filename="sweepq", lineno=0, module="sweepq")
