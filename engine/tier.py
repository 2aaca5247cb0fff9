"""The storage tier behind a queue manager: its blob store and its read-ahead pool.

Both are created on first use, so a queue manager that never sweeps never opens RocksDB
or starts a thread. Without a data directory the store is a private temporary one,
removed at close.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from sweepq.blobstore import BlobStore


class Tier:
    def __init__(self, path: str | os.PathLike | None, store_options: dict | None = None):
        self.path = os.fspath(path) if path is not None else None
        self.store_options = dict(store_options or {})
        self._store: BlobStore | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def store(self) -> BlobStore:
        s = self._store
        if s is None:
            with self._lock:
                if self._store is None:
                    if self.path is None:
                        self._store = BlobStore.temporary(**self.store_options)
                    else:
                        # Until restarts are recovered (a later issue) a manager starts empty.
                        self._store = BlobStore(self.path, clear=True, **self.store_options)
                s = self._store
        return s

    @property
    def opened(self) -> bool:
        return self._store is not None

    def readahead(self, blob_id: int) -> Future:
        """Read and decode a blob on the read-ahead thread."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweepq-readahead")
        return self._pool.submit(self.store().read, blob_id)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._store is not None:
            self._store.close()
            self._store = None
