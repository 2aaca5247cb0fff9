"""Where swept runs live: zstd-compressed, checksummed blobs in RocksDB, chained by id.

This package knows nothing about queues; it stores opaque records. It is the only one that
imports rocksdict and zstandard. Callers are typed against :class:`Store` (protocol.py,
which owns the protocol, its value types and its errors); :class:`BlobStore` (RocksDB),
:class:`MemoryStore` and :class:`FaultyStore` implement it.

The names below are imported when first used (PEP 562), so that a module of the layers
above that needs only the blob format (the replay kernel's bounds, sweeper/runs.py) does
not load RocksDB.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each public name -> (its module, its name there): the imports under TYPE_CHECKING, as data.
_WHERE = {
    "FaultyStore": ("faults", "FaultyStore"),
    "FormatError": ("format", "FormatError"),
    **{
        name: ("protocol", name)
        for name in (
            "MEMORY_HELD",
            "BlobCorruptError",
            "BlobInfo",
            "Capability",
            "Checkpointing",
            "DamageLog",
            "Frame",
            "Salvage",
            "Salvaging",
            "Since",
            "Store",
            "StoreDamageError",
            "StoreError",
        )
    },
    "STORE_OPTIONS": ("store", "OPTIONS"),
    **{name: ("store", name) for name in ("BlobStore", "MemoryStore", "StoreStats")},
}

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


def __getattr__(name: str) -> Any:
    """A public name, imported from its module at first use and kept here (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _WHERE[name]
    value = globals()[name] = getattr(importlib.import_module(f".{module}", __name__), attr)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
