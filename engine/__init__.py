"""sweepq's public API: an in-process queue manager with IBM MQ semantics.

from sweepq.engine import QueueManager, OO, GMO, PMO, MD

with QueueManager() as qm:
    qm.define_queue("ORDERS")
    with qm.connect() as conn:
        q = conn.open("ORDERS", OO.OUTPUT | OO.INPUT_SHARED)
        q.put(b"hello", MD(priority=5, properties={"Color": "red"}))
        reds = conn.open("ORDERS", OO.INPUT_SHARED, selector="Color = 'red'")
        print(reds.get().data)

The names below are imported when first used (PEP 562), so that importing one module of the
engine (``sweepq.engine.sizes``, ``sweepq.engine.record``) loads that module and what it
imports, not the whole engine: the ``sweepq`` command's start-up pays only for what its
command uses. The top package's forms.py, imported before any layer, still decides the form of
every compiled module and says at the first import of one whether it runs interpreted or is
stale.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .batch import Batch
    from .budget import MemoryUse
    from .connection import Connection
    from .constants import (
        CC,
        CORRELID_NONE,
        GMO,
        GROUPID_NONE,
        MF,
        MO,
        MSGID_NONE,
        MSGTOKEN_NONE,
        OO,
        PMO,
        DeliverySequence,
        GroupStatus,
        IndexType,
        MemoryPolicy,
        Persistence,
        Reason,
        SegmentStatus,
        Usage,
    )
    from .errors import MQError
    from .handle import Handle
    from .manager import QueueManager
    from .message import Message, PutResult
    from .queue import QueueAttributes, QueueInfo
    from .record import MD
    from .selector import Selector, compile_selector
    from .settings import DurabilitySettings, MemorySettings, MessageSettings, SweeperSettings

# Each module -> the public names it defines: the imports under TYPE_CHECKING, as data
# (tests/test_start_up.py holds them to __all__).
_NAMES = {
    "batch": ("Batch",),
    "budget": ("MemoryUse",),
    "connection": ("Connection",),
    "constants": (
        "CC",
        "CORRELID_NONE",
        "GMO",
        "GROUPID_NONE",
        "MF",
        "MO",
        "MSGID_NONE",
        "MSGTOKEN_NONE",
        "OO",
        "PMO",
        "DeliverySequence",
        "GroupStatus",
        "IndexType",
        "MemoryPolicy",
        "Persistence",
        "Reason",
        "SegmentStatus",
        "Usage",
    ),
    "errors": ("MQError",),
    "handle": ("Handle",),
    "manager": ("QueueManager",),
    "message": ("Message", "PutResult"),
    "queue": ("QueueAttributes", "QueueInfo"),
    "record": ("MD",),
    "selector": ("Selector", "compile_selector"),
    "settings": ("DurabilitySettings", "MemorySettings", "MessageSettings", "SweeperSettings"),
}
_WHERE = {name: module for module, names in _NAMES.items() for name in names}

__all__ = [
    "CC",
    "CORRELID_NONE",
    "GMO",
    "GROUPID_NONE",
    "MD",
    "MF",
    "MO",
    "MSGID_NONE",
    "MSGTOKEN_NONE",
    "OO",
    "PMO",
    "Batch",
    "Connection",
    "DeliverySequence",
    "DurabilitySettings",
    "GroupStatus",
    "Handle",
    "IndexType",
    "MQError",
    "MemoryPolicy",
    "MemorySettings",
    "MemoryUse",
    "Message",
    "MessageSettings",
    "Persistence",
    "PutResult",
    "QueueAttributes",
    "QueueInfo",
    "QueueManager",
    "Reason",
    "SegmentStatus",
    "Selector",
    "SweeperSettings",
    "Usage",
    "compile_selector",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module at first use and kept here (PEP 562); any
    other name is not an attribute, so ``from sweepq.engine import record`` imports the
    submodule as usual."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
