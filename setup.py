"""Builds sweepq's compiled modules (Cython, from their own .py and .pxd: engine/compiled.py).

Everything else about the package is in pyproject.toml. The extensions are optional: without
a C compiler the install still succeeds, and the same sources run interpreted (sweepq says so
when it is imported).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    """engine/compiled.py's MODULES, read without importing the package."""
    text = (ROOT / "engine" / "compiled.py").read_text()
    block = re.search(r"MODULES = \((.*?)\)", text, re.S)
    assert block, "engine/compiled.py: no MODULES"
    return re.findall(r'"(sweepq\.[\w.]+)"', block.group(1))


def source(module: str) -> str:
    """sweepq.engine.core.lanes -> engine/core/lanes.py (the package maps sweepq to the root)."""
    return os.path.join(*module.split(".")[1:]) + ".py"


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without its build requirements: the sources run interpreted
        print("sweepq: Cython is missing, the engine's modules will run interpreted", file=sys.stderr)
        return []

    # The .pxd files cimport each other by their package names (sweepq.engine...), and the
    # repository root is the sweepq package: a directory holding a link named sweepq to the
    # root lets Cython find them.
    include = ROOT / "build" / "cython-include"
    include.mkdir(parents=True, exist_ok=True)
    link = include / "sweepq"
    if not link.exists():
        link.symlink_to(ROOT, target_is_directory=True)
    modules = compiled_modules()
    exts = [Extension(m, [source(m)], optional=True) for m in modules]
    # Cython's own check of what changed reads cimports from .pyx and .pxd files, not a pure-mode
    # .py's `cython.cimports`: a changed .pxd could leave another module's C built against the
    # old one (an ImportError at run time). So any change to any compiled source rebuilds all.
    stamp = ROOT / "build" / "cython" / "SOURCES"
    digest = sources_digest(modules)
    force = not stamp.exists() or stamp.read_text() != digest
    built = cythonize(
        exts,
        force=force,
        include_path=[str(include)],
        build_dir=str(ROOT / "build" / "cython"),
        compiler_directives={
            "language_level": 3,
            # Python's semantics for indexes (checked, negative from the end): a bug is an
            # IndexError, never a crash. The few hottest loops say otherwise where they are.
            "boundscheck": True,
            "wraparound": True,
            "annotation_typing": False,  # the .py files' annotations are for mypy; C types live in the .pxd
            "embedsignature": True,
        },
        quiet=True,
    )
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest)
    return built


def sources_digest(modules: list[str]) -> str:
    """One digest of every compiled module's .py and every .pxd of the engine."""
    paths = sorted({ROOT / source(m) for m in modules} | set((ROOT / "engine").rglob("*.pxd")))
    h = hashlib.sha256()
    for path in paths:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


setup(ext_modules=extensions())
