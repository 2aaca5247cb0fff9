"""The store's appender of the change log (blobstore/changes.py holds its records): one
record after each write that touched message records, marks or chains returned, and the log
started again at a checkpoint or once it grew past ``changes.LIMIT``.

Invariant: a log starts with the chains as they are at that moment, under the store's lock,
so no link lands between the chains it records and the first record after them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from . import changes
from .access import Access, store_error
from .kv import CF_MESSAGES, KV, KVError


class _Writer:
    """The hot half of :class:`ChangeLog`: the write of one message record and its record in
    the log (:meth:`write_message`), every lone durable put and get (issue 31). Compiled, it
    is a C type whose fields (changelog.pxd) it reads without a look-up; :class:`ChangeLog`, a
    normal class on it, holds the rest (tests patch its methods) and sets these fields."""

    def write_message(self: Any, key: bytes, value: bytes | None) -> None:  # Any: ChangeLog, which holds the rest
        """The store's write of one message record under ``key`` (``value`` None: its delete)
        and the record of it in the log, in one call of the key-value layer (``KV.write_one``:
        a lone durable put or get, issue 31). :raises StoreError: nothing was written."""
        access = self._access
        kv = access.layer or access.kv()  # kv() only to say "closed": no call on the way otherwise
        try:
            self._bytes += kv.write_one(CF_MESSAGES, key, value, changes.NAME, self.whole)
        except KVError as e:
            raise store_error(e) from e
        if self._bytes > changes.LIMIT:
            self._again(kv)


class ChangeLog(_Writer):
    """Appends to the change log of the store behind ``access``; ``lock``: the store's (no
    link meanwhile), ``chains``: every chain's blob ids now, ``wal``: whether RocksDB logs,
    ``whole``: puts whole in it (``F``: the store's sync can be the log's alone, and the open
    redoes from it), else by their heads (``P``)."""

    def __init__(
        self,
        access: Access,
        wal: bool,
        lock: threading.Lock,
        chains: Callable[[], dict[bytes, list[int]]],
        whole: bool = True,
    ):
        self._access = access
        self.whole = whole
        self._wal = wal
        self._lock = lock
        self._chains = chains
        self._bytes = 0  # appended since the log started
        self._dropped: set[bytes] = set()  # prefixes dropped since the checkpoint (changes.start)

    def go_on_from(self, logged: changes.Changes) -> None:
        """Carry what the log read at open dropped since the checkpoint into the logs it
        starts without one (continued): recovery must know a queue deleted since."""
        self._dropped |= logged.dropped

    def note(self, horizon: int, *puts_and_deletes, **operations) -> None:
        """Add a write that returned (``changes.write``'s operations)."""
        if operations.get("dropped") is not None:
            self._dropped.add(operations["dropped"])
        operations.setdefault("whole", self.whole)
        self.append(changes.write(horizon, *puts_and_deletes, **operations))

    def append(self, rec: bytes) -> None:
        """Append ``rec`` (a record of :mod:`.changes`); a log grown past its limit starts
        again once the store flushed what it covers."""
        kv = self._access.current()
        if kv is None:
            return
        kv.append_log(changes.NAME, rec)
        self._bytes += len(rec)
        if self._bytes > changes.LIMIT:
            self._again(kv)

    def _again(self, kv: KV) -> None:
        """Start the log again, once: it grew past ``changes.LIMIT``."""
        with self._lock:
            if self._bytes > changes.LIMIT:
                self._bytes = 0
                with contextlib.suppress(KVError):
                    kv.flush()
                    self._start(continued=True)

    def restart(self) -> None:
        """Start the log again after a checkpoint (what it held is in the checkpoint now); the
        old log stands when this fails: it only covers more."""
        with contextlib.suppress(KVError):
            with self._lock:
                self._start(continued=False)
                self._dropped.clear()  # the checkpoint lists no queue deleted before it
            self._bytes = 0

    def _start(self, continued: bool) -> None:
        kv = self._access.kv()
        dropped = self._dropped if continued else ()
        kv.start_log(changes.NAME, changes.start(self._wal, kv.files(), self._chains(), continued, dropped))
