"""The storage behind a queue manager: its blob store and its read-ahead thread.

The store is opened when the queue manager opens when it has a data directory (so a bad
path fails at open, not later in the sweeper), and on first use otherwise: a queue manager
that never sweeps never creates a temporary store or starts a thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from sweepq.blobstore import BlobStore, Store, StoreDamageError, StoreError
from sweepq.blobstore.files import let_go_of_frames
from sweepq.blobstore.store import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS

from .constants import Reason
from .errors import MQError


class Storage:
    """One queue manager's store (``path`` None: a private temporary one, removed at close;
    ``store``: a given :class:`~sweepq.blobstore.Store`, e.g. a MemoryStore) and its pool.

    Thread-safe: :meth:`store` opens at most once whoever calls it first. Its arguments are
    those of a :class:`~sweepq.engine.settings.DurabilitySettings`, checked there.

    :raises MQError: RESOURCE_PROBLEM when the data directory cannot be opened.
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        store_options: dict | None = None,
        store: Store | None = None,
        wal: bool = True,
        repair: bool = False,
        redo: bool = False,
        defer: bool = False,
    ):
        self.path = os.fspath(path) if path is not None else None
        self.store_options = dict(store_options or {})
        self._store: Store | None = store
        self._owned = store is None  # a given store is the caller's to close
        self._wal = wal
        self._redo = redo  # BlobStore's redo: the policy's syncs are the change log's (sync="commit")
        self._defer = defer  # BlobStore's defer: lone message writes reach RocksDB in batches (sync="os")
        self._repair = repair
        self.repaired: list[str] = []  # files a repair moved to lost/
        self.repair_ran = False  # the open needed repair=True (what a missing file held is lost)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        if path is not None:
            self.store()  # a bad directory or option fails here, at open

    def store(self) -> Store:
        s = self._store
        if s is None:
            with self._lock:
                if self._store is None:
                    try:
                        if self.path is None:
                            self._store = BlobStore.temporary(**self.store_options)
                        else:
                            self._store = self._open_path()
                    except StoreError as e:
                        raise MQError(Reason.RESOURCE_PROBLEM, f"opening the blob store: {e}") from e
                s = self._store
        return s

    def _open_path(self) -> BlobStore:
        try:
            return BlobStore(self.path, wal=self._wal, redo=self._redo, defer=self._defer, **self.store_options)
        except StoreDamageError as e:
            if not self._repair:
                raise StoreError(
                    f"{e}. Open it with repair=True (sweepq ... --repair), which rebuilds "
                    "what RocksDB needs from every file that can be read, moves the unreadable ones aside "
                    "(to lost/) and recovers every message the other files hold"
                ) from e
        self.repaired = BlobStore.repair(self.path)  # type: ignore[arg-type]  # opened with a path
        self.repair_ran = True
        return BlobStore(self.path, wal=self._wal, redo=self._redo, defer=self._defer, **self.store_options)

    def blob_limits(self) -> tuple[int, int]:
        """(max_blob_bytes, max_blob_records) of the store's blobs, without opening it: how a
        sweep cuts its runs into pieces of whole blobs."""
        s = self._store
        if s is not None:
            return s.max_blob_bytes, s.max_blob_records
        o = self.store_options
        return o.get("max_blob_bytes", DEFAULT_MAX_BLOB_BYTES), o.get("max_blob_records", DEFAULT_MAX_BLOB_RECORDS)

    @property
    def opened(self) -> bool:
        return self._store is not None

    def readahead(self, chain: bytes, blob_id: int, check: int | None) -> Future:
        """Read and decode a blob on the read-ahead thread."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweepq-readahead")
        return self._pool.submit(self.store().read, blob_id, chain, check)

    def abandon(self) -> None:
        """An open that failed: release what this storage opened itself (a data directory's
        lock above all, so that the next open can take it), but not a store it was given.
        Called while the open's error is handled: the frames it passed through are cleared
        first (blobstore/files.py ``let_go_of_frames``): a scan they held would keep the store
        from closing, and its database alive inside the ``except`` that opens again with
        ``repair=True``."""
        if self._owned:
            let_go_of_frames()
            with contextlib.suppress(StoreError):  # the open's own error is the one to report
                self.close()

    def close(self) -> None:
        """Stop the read-ahead thread and close the store; the store is released even when
        closing it fails. :raises StoreError: what the store could not write at close."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        store = self._store
        try:
            if store is not None:
                # Still the store while it closes: its last drain may meet damage, and the
                # queue manager's listener writes its records again through store() (issue 31).
                store.close()
        finally:
            self._store = None
