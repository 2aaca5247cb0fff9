"""The queue manager: the registry of queues and connections, and the manager-wide settings.

Defining, altering and deleting queues is serialised by one definitions lock; everything a
message does (put, get, commit) takes only the locks of the queues it touches.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from dataclasses import fields, replace

from sweepq.sweeper.clock import Clock, SystemClock

from .connection import Connection
from .constants import Reason
from .errors import MQError
from .lane import HIDDEN
from .queue import LocalQueue, QueueAttributes, QueueInfo, check_name
from .record import Identity

_ATTR_NAMES = frozenset(f.name for f in fields(QueueAttributes))


class QueueManager:
    """An in-process queue manager.

    ``clock`` drives WAIT intervals and put times (inject a ``ManualClock`` in tests).
    ``max_uncommitted`` is MAXUMSGS (2024 beyond it). ``backout_handling`` makes gets move
    a message whose backout count reached its queue's ``backout_threshold`` to the
    queue's ``backout_requeue_q`` (off by default, as in MQ). ``max_msg_length`` is the
    manager's MAXMSGL (2031 beyond it).
    """

    def __init__(
        self,
        name: str = "QM1",
        *,
        clock: Clock | None = None,
        max_uncommitted: int = 10_000,
        backout_handling: bool = False,
        max_msg_length: int = 100 * 1024 * 1024,
    ):
        if max_uncommitted < 1:
            raise MQError(Reason.PARM_VALUE_ERROR, "max_uncommitted must be at least 1")
        self.name = name
        self.clock: Clock = clock or SystemClock()
        self.max_uncommitted = max_uncommitted
        self.backout_handling = backout_handling
        self.max_msg_length = max_msg_length
        self.ident = Identity(os.urandom(12))
        self._seq = itertools.count(1)  # message instance numbers: tokens, arrival order
        self._queues: dict[str, LocalQueue] = {}
        self._defs = threading.Lock()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self.closed = False

    # -- connections ----------------------------------------------------------------------

    def connect(self) -> Connection:
        """MQCONN: a new connection (one per thread; see engine.connection)."""
        if self.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager has been closed")
        conn = Connection(self)
        self._connections.add(conn)
        return conn

    def _forget(self, conn: Connection) -> None:
        self._connections.discard(conn)

    def close(self) -> None:
        """Disconnect every connection (backing out its work) and wake every waiter."""
        if self.closed:
            return
        for conn in list(self._connections):
            conn.disconnect()
        self.closed = True
        for q in list(self._queues.values()):
            with q.mutex:
                q._wake_all()

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- queue definitions ------------------------------------------------------------------

    def define_queue(self, name: str, **attributes) -> QueueInfo:
        """DEFINE QLOCAL. Keyword arguments are :class:`QueueAttributes` fields."""
        check_name(name)
        attrs = _attrs(QueueAttributes(), attributes)
        with self._defs:
            if name in self._queues:
                raise MQError(Reason.OBJECT_ALREADY_EXISTS, f"queue {name!r} is already defined")
            q = LocalQueue(name, attrs)
            self._queues[name] = q
        return q.info()

    def alter_queue(self, name: str, **attributes) -> QueueInfo:
        """ALTER QLOCAL. Inhibiting gets fails current waiters with 2016."""
        with self._defs:
            q = self._queue(name)
            attrs = _attrs(q.attrs, attributes)
            with q.mutex:
                q.apply(attrs)
                if q.inhibit_get:
                    q._wake_all()
        return q.info()

    def delete_queue(self, name: str, purge: bool = False) -> None:
        """DELETE QLOCAL. Fails with 2042 while handles are open or work is uncommitted,
        and with 2055 while messages remain (unless ``purge``)."""
        with self._defs:
            q = self._queue(name)
            with q.mutex:
                if q.open_handles:
                    raise MQError(
                        Reason.OBJECT_IN_USE, f"queue {name!r} has {q.open_handles} open handle(s); close them first"
                    )
                if any(n.state & HIDDEN for n in q._iter_in_order()):
                    raise MQError(
                        Reason.OBJECT_IN_USE, f"queue {name!r} has uncommitted work; commit or back it out first"
                    )
                if q.depth and not purge:
                    raise MQError(
                        Reason.Q_NOT_EMPTY,
                        f"queue {name!r} holds {q.depth} message(s); pass purge=True to discard them",
                    )
                q.deleted = True
                del self._queues[name]

    def inquire_queue(self, name: str) -> QueueInfo:
        """MQINQ: attributes and current counters."""
        return self._queue(name).info()

    def queue_names(self) -> list[str]:
        return sorted(self._queues)

    def _queue(self, name: str) -> LocalQueue:
        try:
            return self._queues[name]
        except KeyError:
            raise MQError(
                Reason.UNKNOWN_OBJECT_NAME, f"no queue named {name!r}; define it with define_queue()"
            ) from None


def _attrs(base: QueueAttributes, changes: dict) -> QueueAttributes:
    unknown = set(changes) - _ATTR_NAMES
    if unknown:
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"unknown queue attribute(s) {sorted(unknown)}; known: {sorted(_ATTR_NAMES)}",
        )
    return replace(base, **changes).validated()
