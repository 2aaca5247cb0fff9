"""Which modules are compiled, and which form of them runs (docs/design.md, "One source, two
forms").

The hot modules of the engine, the blob store's write of a durable put or get, and the
server's per-request path in net/, are compiled with Cython when sweepq is installed (setup.py
builds :data:`MODULES`), each from its own ``.py``, most with a ``.pxd`` beside it that adds C
types: one source, two forms. Where the compiled form
is missing (no C compiler at install time), the same source runs interpreted and a warning
says so once. ``SWEEPQ_PURE=1`` in the environment runs the interpreted form on purpose: the
test suite runs the model-based tests in both forms (tests/test_forms.py) and holds them to
the same answers.

This module is the top package's (``sweepq/__init__.py`` imports it first), not a layer's:
the layers holding compiled modules (blobstore, engine, net) may not import each other
upwards, and whichever of them is imported first, its finders already decide the form of
every compiled module and check it at the first import of one (:class:`_FirstUse`). It
imports nothing of sweepq at module level; the packages import their modules lazily, so a
command that uses none of them (``sweepq replay``) pays neither for them nor for the check.
setup.py loads this file by its path, without importing the package.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings

MODULES = (
    # The blob store's write of a lone durable put or get (issue 31): the write group's right
    # to write (group), the change log's write of one record (changelog) and the record of it
    # (changes), RocksDB's write through its gate (rocks). Each class there that must stay a
    # normal class is one on a C type holding its hot half (docs/design.md, "One source, two
    # forms"). The side log's append (sidelog) is every durable call's too.
    # zlib's crc32 folded with carry-less multiplies: every record's and side-log record's (crc).
    "sweepq.blobstore.crc",
    "sweepq.blobstore.changes",
    "sweepq.blobstore.group",
    "sweepq.blobstore.changelog",
    "sweepq.blobstore.rocks",
    "sweepq.blobstore.sidelog",
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
    # The journal's write of a durable put's record and of a get's delete (issue 31).
    "sweepq.engine.durable.journal",
    # The server's per-request path (issue 31): the frames, their packing and the session loop.
    # Named here, as strings only, so that one list, one build and one digest hold every
    # compiled module (net/ imports the engine, never the other way: nothing here imports them).
    "sweepq.net.protocol",
    "sweepq.net.frames",
    "sweepq.net.session",
    # The server loop's wait and turn (issue 31): epoll_wait(2) into a buffer it keeps.
    "sweepq.net.poller",
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
    from sweepq.engine.core import lanes

    return not lanes.__file__.endswith(".py")


DIGEST_FILE = "compiled-sources.sha256"
"""The file, beside this module (the package's root), in which setup.py's build writes
:func:`sources_digest` of the sources it compiled (in the wheel with the extensions; in the
tree for an editable install)."""


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
    import hashlib

    h = hashlib.sha256()
    for rel in compiled_sources(root):
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.replace(os.sep, "/").encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def _root() -> str:
    """The package's root: this file's folder, its link followed (an editable install's
    ``sweepq`` is a folder of links to the root's entries, build-backend/; the digest and the
    layers' folders are beside the file itself)."""
    return os.path.dirname(os.path.realpath(__file__))


def built() -> list[str]:
    """The modules of :data:`MODULES` whose compiled form an import runs: those with an
    extension module beside their ``.py`` (the path finder takes it before the source), none
    under SWEEPQ_PURE=1. Read from the files, so nothing is imported to be looked at."""
    if PURE:
        return []
    root = _root()
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    found = []
    for name in MODULES:
        stem = os.path.join(root, *name.split(".")[1:])
        if any(os.path.exists(stem + suffix) for suffix in suffixes):
            found.append(name)
    return found


def stale() -> list[str]:
    """The compiled modules built from other sources than the ``.py`` and ``.pxd`` files beside
    them (a tree changed since it was built: run ``pip install -e .`` again), where the old code
    would run; all of them when the build left no digest. Empty when nothing is compiled."""
    compiled = built()
    if not compiled:
        return []
    root = _root()
    try:
        with open(os.path.join(root, DIGEST_FILE)) as f:
            baked = f.read().strip()
    except FileNotFoundError:
        return compiled
    return [] if baked == sources_digest(root) else compiled


def warn_if_interpreted() -> None:
    """Say once, in one line, that the interpreted form runs when it was not asked for, or that
    a compiled module was built from other sources than those installed beside it."""
    old = stale()
    if old:
        _one_line(
            f"sweepq's compiled core ({len(old)} modules) was built from other sources than those "
            "beside it: reinstall sweepq (`pip install -e .` in its source tree)"
        )
    if not PURE and "sweepq.engine.core.lanes" not in built():
        _one_line(
            "sweepq runs its interpreted core, several times slower than the compiled one: it was "
            "installed without a C compiler (install one and reinstall sweepq to compile it)"
        )


# Duck-typed (no importlib.abc), as broker/alias.py's finder: importlib.abc costs more than
# this module.
class _FirstUse:
    """A finder that finds nothing: at the first import of a module of :data:`MODULES` it runs
    :func:`warn_if_interpreted` (which imports nothing), so the check costs a process nothing
    until it uses the compiled core, and is said once. It stays on ``sys.meta_path`` (removing
    itself while the import system walks that list would skip the finder after it)."""

    checked = False

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if not cls.checked and fullname in MODULES:  # finders run under the import lock: once
            cls.checked = True
            warn_if_interpreted()
        return None


if _FirstUse not in sys.meta_path:
    sys.meta_path.insert(0, _FirstUse)


def _one_line(message: str) -> None:
    """A RuntimeWarning printed as one line (no source line under it, as warnings.warn adds),
    still an error under ``-W error``."""
    warnings.warn_explicit(message, RuntimeWarning, filename="sweepq", lineno=0, module="sweepq")
