"""Builds sweepq's compiled modules (Cython, from their own .py and .pxd: forms.py says which).

Everything else about the package is in pyproject.toml. The extensions are optional: without
a C compiler the install still succeeds, and the same sources run interpreted (sweepq says so
when it is imported).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _compiled() -> types.ModuleType:
    """forms.py (the package root's), loaded without importing the package (which needs the
    built core): its MODULES, the list of sources and their digest are the ones an import checks."""
    spec = importlib.util.spec_from_file_location("_sweepq_forms", ROOT / "forms.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _compiled()


# Compiler flags of particular modules, after Python's own (-O3): the last -O wins.
# engine/core's lanes, arena and lock at -O2: the queue core's code is the most of what an
# in-memory put+get pair runs beside the interpreter's loop, and at -O3 (more inlining,
# unrolled byte loops) its footprint overflowed the first-level instruction cache that
# asyncio.Queue's pair fits in. Callgrind --cache-sim=yes, AsyncQueue put+get pair: 247 ->
# 204 I1 misses and 6,991 -> 6,948 instructions; the MQ pair 4,539 -> 4,536 instructions.
# -O2 for every module cut fewer misses per instruction added (+113 on the MQ pair), -Os for
# the pair's modules made both worse (337 misses, 7,863 instructions: no hot/cold split).
FLAGS: dict[str, tuple[str, ...]] = {
    "sweepq.engine.core.lanes": ("-O2",),
    "sweepq.engine.core.arena": ("-O2",),
    "sweepq.engine.core.lock": ("-O2",),
}

# Every module's error paths out of its hot code: Cython's error exits all end in
# __Pyx_AddTraceback, and declared cold (this header, included before Cython's C) every block
# that leads only there goes to the function's .cold part, where before it sat between the
# lines a call runs (no profile tells GCC otherwise: Cython's unlikely() is a 90 % guess, not
# "never"). Callgrind --cache-sim=yes, AsyncQueue put+get pair (n 10000 vs 20000): 204 -> 191
# I1 misses, 6,941 -> 6,958 instructions (asyncio.Queue's pair: 8,010 instructions, no misses).
COLD_HEADER = """\
/* setup.py COLD_HEADER: Cython's error exits are cold (see there). */
#include <Python.h>
static void __Pyx_AddTraceback(const char *funcname, int c_line, int py_line, const char *filename)
    __attribute__((cold));
/* A def function's keyword arguments: the core's own callers pass theirs by position (issue 30). */
static int __Pyx_ParseKeywords(PyObject *kwds, PyObject *const *kwvalues, PyObject **const argnames[],
    PyObject *kwds2, PyObject *values[], Py_ssize_t num_pos_args, Py_ssize_t num_kwargs,
    const char *function_name, int ignore_unknown_kwargs) __attribute__((cold));
"""
COLD_PATH = ROOT / "build" / "cold-errors.h"


def cold_header() -> str:
    """COLD_HEADER written to COLD_PATH (rewritten only when its content changed); its path."""
    COLD_PATH.parent.mkdir(parents=True, exist_ok=True)
    if not COLD_PATH.exists() or COLD_PATH.read_text() != COLD_HEADER:
        COLD_PATH.write_text(COLD_HEADER)
    return str(COLD_PATH)


def source(module: str) -> str:
    """sweepq.engine.core.lanes -> engine/core/lanes.py (the package maps sweepq to the root)."""
    return os.path.join(*module.split(".")[1:]) + ".py"


def include_tree() -> Path:
    """A directory where Cython finds the .pxd files by their package names (sweepq.engine...):
    sweepq/ holding a copy of each (and an empty __init__.py in each package on the way). Copies,
    not a link to the root: the root holds build/, so a link would be a cycle, and an absolute
    link breaks when the checkout moves. A copy is rewritten only when its content changed."""
    include = ROOT / "build" / "cython-include"
    top = include / "sweepq"
    if top.is_symlink():  # the older form: one link to the root
        top.unlink()
    wanted = set()
    for rel in COMPILED.compiled_sources(str(ROOT)):
        if not rel.endswith(".pxd"):
            continue
        target = top / rel
        wanted.add(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        for folder in [top, *(top / p for p in Path(rel).parents if str(p) != ".")]:
            init = folder / "__init__.py"
            init.touch(exist_ok=True)
            wanted.add(init)
        data = (ROOT / rel).read_bytes()
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    for old in top.rglob("*"):
        if old.is_file() and old not in wanted:
            old.unlink()
    return include


def cythonized(exts: list[Extension]) -> dict[str, str] | None:
    """Each extension's C file (by module name), made by Cython from its .py and the .pxd files;
    None when Cython is missing (a build without its build requirements: the sources run
    interpreted)."""
    try:
        import Cython
        from Cython.Build import cythonize
    except ImportError:
        return None
    build = ROOT / "build" / "cython"
    c_files = {ext.name: str(build / source(ext.name)[: -len(".py")]) + ".c" for ext in exts}
    # Cython's own check of what changed reads cimports from .pyx and .pxd files, not a pure-mode
    # .py's `cython.cimports`: a changed .pxd could leave another module's C built against the
    # old one (an ImportError at run time). And it compares times with Cython's own .pxd files,
    # new in each isolated build environment pip makes: every `pip install -e .` regenerated
    # and recompiled modules of an unchanged core. So the stamp decides alone: the sources'
    # digest, Cython's version and the modules' own compiler flags (FLAGS), all of the C made
    # again, and so compiled again, when any of them changed, none otherwise.
    stamp = build / "SOURCES"
    flags = " ".join(f"{m}={','.join(f)}" for m, f in sorted(FLAGS.items())) + " cold-errors"
    digest = f"{COMPILED.sources_digest(str(ROOT))} cython {Cython.__version__} flags {flags}"
    if stamp.exists() and stamp.read_text() == digest and all(os.path.exists(c) for c in c_files.values()):
        return c_files
    # The .pxd files cimport each other by their package names (sweepq.engine...), and the
    # repository root is the sweepq package: include_tree() lays them out so.
    include = include_tree()
    cythonize(
        [Extension(ext.name, list(ext.sources)) for ext in exts],
        force=True,
        include_path=[str(include)],
        build_dir=str(build),
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
    return c_files


class BuildExt(build_ext):
    """setuptools' build_ext, which compiles only when it can: it checks that a C compiler works
    and that Cython is there (without either, the install still succeeds, says so in one line,
    and the sources run interpreted), runs Cython only then (never while pip only asks for the
    metadata), and writes the digest of the sources it compiled beside forms.py (the package's
    root), where an import compares it with the installed sources' (forms.py's stale())."""

    def build_extensions(self) -> None:
        if not self.extensions:
            return
        if not self._compiler_works():
            return self._interpreted(f"no working C compiler ({self.compiler.compiler_so[0]})")
        built = cythonized(self.extensions)
        if built is None:
            return self._interpreted("Cython is missing")
        # Each extension keeps the object setuptools prepared (finalize_options' own attributes),
        # now with its C source, on which alone it depends (cythonized: the stamp decides).
        cold = cold_header()
        for ext in self.extensions:
            ext.sources, ext.depends = [built[ext.name]], []
            if self.compiler.compiler_type == "unix":  # GCC and clang both know the attribute
                ext.extra_compile_args = ["-include", cold, *ext.extra_compile_args]
        try:
            super().build_extensions()
        except Exception as e:  # CompileError, LinkError: all of the core or none (_interpreted)
            return self._interpreted(f"compiling failed ({' '.join(str(e).split())[:300]})")
        # Beside the extensions where the import finds them: the tree for an editable install
        # (setuptools copies only the extensions back to it), else build_lib (into the wheel).
        where = ROOT if self._editable() else Path(self.get_ext_fullpath("sweepq.forms")).parent
        target = where / COMPILED.DIGEST_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(COMPILED.sources_digest(str(ROOT)) + "\n")

    def _interpreted(self, why: str) -> None:
        """No compiled core at all, said in one line: the compiled modules' C types are shared
        (a .pxd cimports another's class), so one interpreted beside compiled ones fails at
        import ("LocalQueue size changed"). Every extension this build or an earlier editable
        one left, and the digest, are removed, and setuptools copies none to the tree."""
        print(f"sweepq: {why}: the engine's modules will run interpreted", file=sys.stderr)
        for ext in self.extensions:
            in_tree, built = self._paths(ext)
            for path in (built, in_tree) if self._editable() else (built,):
                path.unlink(missing_ok=True)
        for where in (ROOT, Path(self.get_ext_fullpath("sweepq.forms")).parent):
            if self._editable() or where != ROOT:
                (where / COMPILED.DIGEST_FILE).unlink(missing_ok=True)
        self.extensions = []

    def _paths(self, ext: Extension) -> tuple[Path, Path]:
        """Where ``ext`` goes in the tree (an editable install) and in build_lib."""
        in_tree = ROOT / self.get_ext_filename(ext.name).split(os.sep, 1)[1]  # sweepq/ is the root
        return in_tree, Path(self.get_ext_fullpath(ext.name))

    def build_extension(self, ext: Extension) -> None:
        """setuptools' build of one extension, except in an editable install whose extension in
        the tree is newer than its C: then that one is taken as built. (An editable build
        compiles into a new temporary build_lib each time, where setuptools' own check finds
        nothing and compiles everything again: a second `pip install -e` of an unchanged core
        took minutes.)"""
        in_tree, built = self._paths(ext)
        fresh = in_tree.exists() and os.path.getmtime(in_tree) > os.path.getmtime(ext.sources[0])
        if self._editable() and fresh and built != in_tree:
            built.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(in_tree, built)
            return
        super().build_extension(ext)

    def _editable(self) -> bool:
        """Whether the extensions end in the tree (``pip install -e``, ``build_ext --inplace``)."""
        return bool(getattr(self, "editable_mode", False) or self.inplace)

    def _compiler_works(self) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "probe.c")
            with open(probe, "w") as f:
                f.write("int sweepq_probe(void) { return 0; }\n")
            try:
                self.compiler.compile([probe], output_dir=tmp)
            except Exception:  # CompileError, or the compiler's program missing (an OSError)
                return False
        return True


# Each compiled module from its own .py; build_ext turns them into C (BuildExt).
# Not optional one by one: a failure makes all of them interpreted (BuildExt._interpreted).
EXTENSIONS = [Extension(m, [source(m)], extra_compile_args=list(FLAGS.get(m, ()))) for m in COMPILED.MODULES]
setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": BuildExt})
