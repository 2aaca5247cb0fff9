"""Where swept runs live: zstd-compressed, checksummed blobs in RocksDB, chained by id.

This package knows nothing about queues; it stores opaque records. It is the only one that
imports rocksdict and zstandard.
"""

from .format import FormatError
from .store import BlobCorruptError, BlobInfo, BlobStore, StoreError, StoreStats

__all__ = ["BlobCorruptError", "BlobInfo", "BlobStore", "FormatError", "StoreError", "StoreStats"]
