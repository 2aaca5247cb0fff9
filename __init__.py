"""sweepq: an embedded message queue engine with IBM MQ semantics and a slow queue sweeper.

``from sweepq import Queue, AsyncQueue``: the standard library's ``queue.Queue`` and
``asyncio.Queue``, with persistence, a memory bound and other processes (sweepq.queues);
``SimpleQueue``, ``LifoQueue``, ``PriorityQueue``, ``AsyncLifoQueue`` and
``AsyncPriorityQueue`` mirror the standard library's others.
The MQ API is ``sweepq.engine``; the clients of a served queue manager are ``sweepq.client``
and ``sweepq.aio``.

pyproject.toml maps the ``sweepq`` package to the repository root, whose folders are its
layers (docs/design.md), and its own modules: ``forms.py`` (which modules are compiled, and
which form of them runs), ``__main__.py``, ``client.py`` and ``aio.py``. The names above are
imported when first used (PEP 562), so that ``import sweepq.engine`` loads neither the
clients (net/) nor the layer above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# First: forms.py decides which form of the compiled modules runs (SWEEPQ_PURE) before any of
# them, in whichever layer (blobstore, engine, net), is imported. It imports nothing of sweepq.
from . import forms  # noqa: F401

if TYPE_CHECKING:
    from sweepq.queues import (
        AsyncLifoQueue,
        AsyncPriorityQueue,
        AsyncQueue,
        LifoQueue,
        PriorityQueue,
        Queue,
        SimpleQueue,
    )

__all__ = ["AsyncLifoQueue", "AsyncPriorityQueue", "AsyncQueue", "LifoQueue", "PriorityQueue", "Queue", "SimpleQueue"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import sweepq.queues

        return getattr(sweepq.queues, name)
    raise AttributeError(f"module 'sweepq' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
