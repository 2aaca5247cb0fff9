"""Where swept runs live: zstd-compressed, checksummed blobs in RocksDB, chained by id.

This package knows nothing about queues; it stores opaque records. It is the only one that
imports rocksdict and zstandard. Callers are typed against :class:`Store` (protocol.py);
:class:`BlobStore` (RocksDB), :class:`MemoryStore` and :class:`FaultyStore` implement it.
"""

from .faults import FaultyStore
from .format import FormatError
from .protocol import Store
from .store import BlobCorruptError, BlobInfo, BlobStore, MemoryStore, StoreError, StoreStats

__all__ = [
    "BlobCorruptError",
    "BlobInfo",
    "BlobStore",
    "FaultyStore",
    "FormatError",
    "MemoryStore",
    "Store",
    "StoreError",
    "StoreStats",
]
