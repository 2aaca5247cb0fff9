"""Where swept runs live: zstd-compressed, checksummed blobs in RocksDB, chained by id.

This package knows nothing about queues; it stores opaque records. It is the only one that
imports rocksdict and zstandard. Callers are typed against :class:`Store` (protocol.py,
which owns the protocol, its value types and its errors); :class:`BlobStore` (RocksDB),
:class:`MemoryStore` and :class:`FaultyStore` implement it.
"""

from .faults import FaultyStore
from .format import FormatError
from .protocol import (
    MEMORY_HELD,
    BlobCorruptError,
    BlobInfo,
    Capability,
    Checkpointing,
    DamageLog,
    Frame,
    Salvage,
    Salvaging,
    Since,
    Store,
    StoreDamageError,
    StoreError,
)
from .store import OPTIONS as STORE_OPTIONS
from .store import BlobStore, MemoryStore, StoreStats

__all__ = [
    "MEMORY_HELD",
    "STORE_OPTIONS",
    "BlobCorruptError",
    "BlobInfo",
    "BlobStore",
    "Capability",
    "Checkpointing",
    "DamageLog",
    "FaultyStore",
    "FormatError",
    "Frame",
    "MemoryStore",
    "Salvage",
    "Salvaging",
    "Since",
    "Store",
    "StoreDamageError",
    "StoreError",
    "StoreStats",
]
