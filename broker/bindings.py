"""Every exchange's bindings, kept in one MQ queue that every process sees.

Kombu's virtual transport keeps bindings in the process that declared them; a publisher in
another process, or a fanout broadcast (Celery's ``inspect`` / ``control``, whose every
worker binds its own queue to ``celery.pidbox``), needs them all, as Redis keeps them in a
set. Here each binding is one persistent message on ``KOMBU.BINDINGS`` (its data
``[exchange, routing_key, pattern, queue]`` in JSON), read by browsing; adding one puts it
unless a browse finds it, removing one gets it by its MsgId. Reads are cached for
``ttl`` seconds (a publish looks its exchange up every time): a binding made in another
process is seen within that time, one made in this process at once.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable

from sweepq.engine import GMO, MD, OO, MQError, Persistence, Reason
from sweepq.engine.api import QueueConnection

from .names import BINDINGS_QUEUE

Binding = tuple[str, str, str, str]  # exchange, routing_key, pattern, queue


class Bindings:
    """The shared table (see the module docstring); thread-safe, one connection of its own."""

    def __init__(self, connect: Callable[[], QueueConnection], define: Callable[[str], None], ttl: float = 1.0):
        self._connect = connect
        self._define = define
        self._ttl = ttl
        self._lock = threading.Lock()
        self._conn: QueueConnection | None = None
        self._read_at = -1e9
        self._rows: list[tuple[bytes, Binding]] = []

    def table(self, exchange: str) -> list[tuple[str, str, str]]:
        """Kombu's table of ``exchange``: (routing_key, pattern, queue) for each binding."""
        with self._lock:
            if time.monotonic() - self._read_at > self._ttl:
                self._refresh()
            return [(rk, pattern, queue) for _, (ex, rk, pattern, queue) in self._rows if ex == exchange]

    def add(self, binding: Binding) -> None:
        with self._lock:
            self._refresh()
            if any(row == binding for _, row in self._rows):
                return
            h = self._conn_().open(BINDINGS_QUEUE, OO.OUTPUT)
            try:
                put = h.put(json.dumps(list(binding)).encode(), MD(persistence=Persistence.PERSISTENT))
            finally:
                h.close()
            self._rows.append((put.msg_id, binding))

    def remove(self, match: Callable[[Binding], bool]) -> None:
        """Remove every binding ``match`` selects."""
        with self._lock:
            self._refresh()
            gone = [(msg_id, row) for msg_id, row in self._rows if match(row)]
            if not gone:
                return
            h = self._conn_().open(BINDINGS_QUEUE, OO.INPUT_SHARED)
            try:
                for msg_id, _ in gone:
                    try:
                        h.get(GMO.NO_SYNCPOINT, msg_id=msg_id)
                    except MQError as e:  # another process removed it first
                        if e.reason != Reason.NO_MSG_AVAILABLE:
                            raise
            finally:
                h.close()
            ids = {msg_id for msg_id, _ in gone}
            self._rows = [(m, row) for m, row in self._rows if m not in ids]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(MQError):
                    self._conn.disconnect()
                self._conn = None

    def _conn_(self) -> QueueConnection:
        if self._conn is None:
            self._define(BINDINGS_QUEUE)
            self._conn = self._connect()
        return self._conn

    def _refresh(self) -> None:
        rows: list[tuple[bytes, Binding]] = []
        h = self._conn_().open(BINDINGS_QUEUE, OO.BROWSE)
        try:
            while True:
                try:
                    m = h.get(GMO.BROWSE_NEXT)
                except MQError as e:
                    if e.reason == Reason.NO_MSG_AVAILABLE:
                        break
                    raise
                ex, rk, pattern, queue = json.loads(m.data)
                rows.append((m.msg_id, (ex, rk, pattern, queue)))
        finally:
            h.close()
        self._rows = rows
        self._read_at = time.monotonic()
