"""The ``sweepq`` alias in Kombu's transport table, so that ``sweepq+unix://…`` resolves.

Kombu looks a URL's ``transport+`` prefix up in ``kombu.transport.TRANSPORT_ALIASES`` and has
no plug-in point for a third party's transport. ``register()`` adds the alias. It runs by
itself in every process of an environment where sweepq is installed: the install puts a
``.pth`` line (``sweepq-kombu.pth``) that calls ``install_hook()`` at start-up, which costs one
small import and no Kombu: if Kombu is already imported the alias is added at once, otherwise
a finder on ``sys.meta_path`` adds it just after ``kombu.transport`` is first imported.
The fully qualified form needs nothing at all: ``transport="sweepq.broker.transport:Transport"``.
"""

from __future__ import annotations

import importlib.machinery
import sys
from types import ModuleType
from typing import Any

ALIAS = "sweepq"
TARGET = "sweepq.broker.transport:Transport"
_WATCHED = "kombu.transport"


def register() -> None:
    """Add the alias to Kombu's table (Kombu must be importable)."""
    import kombu.transport

    kombu.transport.TRANSPORT_ALIASES.setdefault(ALIAS, TARGET)


def _registered(module: ModuleType) -> None:
    aliases = getattr(module, "TRANSPORT_ALIASES", None)
    if isinstance(aliases, dict):
        aliases.setdefault(ALIAS, TARGET)


# The finder and loader are duck-typed (no importlib.abc): this module is imported at every
# start of Python, and importlib.abc costs more than the rest of it.
class _Loader:
    """Kombu's own loader of ``kombu.transport``, then the alias."""

    def __init__(self, inner: Any):
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _registered(module)


class _Finder:
    """Finds nothing itself: wraps the spec the finders after it give ``kombu.transport``
    (the path's, an editable install's, any other), once; after that it answers nothing.

    It stays on ``sys.meta_path``: the import system is walking that list when it asks, and a
    finder that removed itself there would make the walk skip the finder behind it."""

    def __init__(self) -> None:
        self.done = False

    def find_spec(self, fullname, path, target=None):
        if fullname != _WATCHED or self.done:
            return None
        self.done = True
        spec = None
        for finder in _after(self):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def _after(finder: _Finder) -> list[Any]:
    """The finders behind ``finder`` on ``sys.meta_path`` (all of them if it is not there)."""
    finders = list(sys.meta_path)
    return finders[finders.index(finder) + 1 :] if finder in finders else finders


def install_hook() -> None:
    """Register the alias now if Kombu is loaded, else when ``kombu.transport`` is first imported."""
    module = sys.modules.get(_WATCHED)
    if module is not None:
        _registered(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
