"""sweepq's public API: an in-process queue manager with IBM MQ semantics.

from sweepq.engine import QueueManager, OO, GMO, PMO, MD

with QueueManager() as qm:
    qm.define_queue("ORDERS")
    with qm.connect() as conn:
        q = conn.open("ORDERS", OO.OUTPUT | OO.INPUT_SHARED)
        q.put(b"hello", MD(priority=5, properties={"Color": "red"}))
        reds = conn.open("ORDERS", OO.INPUT_SHARED, selector="Color = 'red'")
        print(reds.get().data)
"""

from . import compiled  # first: it decides which form of the compiled modules runs
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

compiled.warn_if_interpreted()

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
