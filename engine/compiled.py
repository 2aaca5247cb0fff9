"""Which engine modules are compiled, and which form of them runs (docs/design.md, "The core").

The hot modules of the engine are compiled with Cython when sweepq is installed (setup.py
builds :data:`MODULES`), each from its own ``.py`` with a ``.pxd`` beside it that adds C
types: one source, two forms. Where the compiled form is missing (no C compiler at install
time), the same source runs interpreted and a warning says so once. ``SWEEPQ_PURE=1`` in the
environment runs the interpreted form on purpose: the test suite runs the model-based tests
in both forms (tests/test_forms.py) and holds them to the same answers.

This module is imported first by ``sweepq.engine``, so that its finder decides the form of
every compiled module before any is imported.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings

MODULES = (
    "sweepq.engine.core.lock",
    "sweepq.engine.core.arena",
    "sweepq.engine.core.ref",
    "sweepq.engine.core.found",
    "sweepq.engine.core.lanes",
    "sweepq.engine.record",
    "sweepq.engine.sequence",
    "sweepq.engine.message",
    "sweepq.engine.queue",
    "sweepq.engine.handlestate",
    "sweepq.engine.handle",
    "sweepq.engine.putpath",
    "sweepq.engine.getpath",
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


def stale() -> list[str]:
    """The compiled modules whose extension is older than their ``.py`` or ``.pxd``: a tree
    changed since it was built (run ``pip install -e .`` again), where the old code would
    run. Empty when nothing is compiled."""
    out = []
    for name in MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        built = module.__file__ or ""
        if built.endswith(".py"):
            continue
        base = os.path.join(os.path.dirname(built), name.rpartition(".")[2])
        newest = max(os.path.getmtime(p) for p in (base + ".py", base + ".pxd") if os.path.exists(p))
        if os.path.getmtime(built) < newest:
            out.append(name)
    return out


def warn_if_interpreted() -> None:
    """Say once that the interpreted form runs when it was not asked for, or that a compiled
    module is older than its source."""
    old = stale()
    if old:
        warnings.warn(
            f"sweepq's compiled {', '.join(old)} is older than its source: run `pip install -e .` again",
            RuntimeWarning,
            stacklevel=3,
        )
    if not PURE and not running():
        warnings.warn(
            "sweepq runs its interpreted core, several times slower than the compiled one: it was "
            "installed without building its extension modules (no C compiler? install one and run "
            "`pip install -e .` again)",
            RuntimeWarning,
            stacklevel=3,
        )
