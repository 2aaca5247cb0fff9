"""Requests done once however often they are sent (op ONCE, docs/protocol.md "Done once").

A client that reconnects after a break must send again the request whose reply it never
read; a put or a get done twice would be a duplicate or a loss. So a reconnecting client
wraps each put, get and commit outside a unit of work in ``ONCE``: its *producer id* (16
random bytes, one per client connection object) and a sequence number that grows by one
per request, and, when it sends a request again, ``again``. The server keeps, per producer
id, the last sequence number it did and that request's reply: a request that comes again
with that number gets the reply it had, and is not done a second time (Kafka's idempotent
producer; Artemis's duplicate detection, ``_AMQ_DUPL_ID``).

What the server keeps survives a reconnect (it is the server's, not the session's) and, on
a queue manager with a data directory, a kill -9 of the server: the request is done under
syncpoint and committed with the record of having done it in the same store write
(engine/uow.py ``harden``, as a receiving channel records its batches), so the effect and
the record are one. The record is kept under ``b"\\x00ONCE\\x00" + producer id``, among
the message records but outside every queue's key prefix (as the channels' sync records,
engine/distributed/sync.py), and deleted when its client disconnects (BYE). When the
connection has a unit of work open already, the request is done as it came and remembered
in memory only (its commit is the unit of work's).

A producer's requests are done on its newest connection only. A client connects again only
after it closed the old socket, but the old connection's session may not have read the
request sent on it yet (its thread slow, the frame in the socket's buffer): read after the
new connection's ``ONCE`` of the same request, it is stale and is not done (a commit done
then would commit the unit of work the new connection answered BACKED_OUT, backed out).
Session numbers grow with each connection a server accepts, so the table keeps, per
producer, the highest number that sent its requests (in memory: a restarted server has
no older session).

Thread safety: one lock per producer id orders a request against the same producer's
request still running on a session that has not yet seen its socket break.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from sweepq.engine import MQError, QueueManager, Reason
from sweepq.engine.durable.journal import StoreChanges
from sweepq.engine.durable.layout import decode_value, encode_value

from . import protocol as P

ONCE_PREFIX = b"\x00ONCE\x00"
PRODUCER_ID_LEN = 16


def once_key(pid: bytes) -> bytes:
    """Where a producer's record is kept."""
    return ONCE_PREFIX + pid


def check_producer(pid: object, seq: object) -> bytes:
    """:raises MQError: PARM_VALUE_ERROR (3229) for an id that is not 16 bytes or a number
    that is not a positive int."""
    if type(pid) is not bytes or len(pid) != PRODUCER_ID_LEN or type(seq) is not int or seq < 1:
        raise MQError(Reason.PARM_VALUE_ERROR, "ONCE takes a producer id of 16 bytes and a sequence number from 1")
    return pid


class OnceTable:
    """Each producer's last request done and its reply (see the module docstring)."""

    def __init__(self, qm: QueueManager, log: logging.Logger):
        self.journal = qm.journal
        self._qm = qm
        self._log = log
        self._last: dict[bytes, tuple[int, object]] = {}
        self._newest: dict[bytes, int] = {}  # producer id -> the newest session that sent its requests
        self._locks: dict[bytes, threading.Lock] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Take the records a data directory kept (at the server's start)."""
        if self.journal is None:
            return
        try:
            records = self._qm.internal.store().messages(ONCE_PREFIX)
        except Exception as e:  # a damaged record costs its producers a duplicate at worst: said, not fatal
            self._log.warning("the records of requests done once could not be read (%s): retries may repeat", e)
            return
        for key, value in records:
            rec = decode_value(value)
            if rec is None:
                self._log.warning("a record of requests done once fails its checksum: skipped")
                continue
            seq, reply = P.unpack(rec)
            self._last[bytes(key[len(ONCE_PREFIX) :])] = (seq, reply)

    @contextlib.contextmanager
    def holding(self, pid: bytes) -> Iterator[tuple[int, object] | None]:
        """The producer's lock held; yields its last (sequence number, reply) or None."""
        with self._lock:
            lock = self._locks.setdefault(pid, threading.Lock())
        with lock:
            yield self._last.get(pid)

    def claim(self, pid: bytes, session: int) -> None:
        """Session number ``session`` sends the producer's requests now (the caller holds the
        producer's lock).

        :raises MQError: CONNECTION_BROKEN (2009) when a newer session sent them already: the
            request came on a connection its client has left, and is not done."""
        newest = self._newest.get(pid, 0)
        if session < newest:
            raise MQError(
                Reason.CONNECTION_BROKEN,
                f"this producer's requests come on connection #{newest} now: a request read on connection "
                f"#{session}, which its client left, is not done",
            )
        self._newest[pid] = session

    def remember(self, pid: bytes, seq: int, reply: object) -> None:
        """In memory (the caller holds the producer's lock)."""
        self._last[pid] = (seq, reply)

    @staticmethod
    def value(seq: int, reply: object) -> bytes:
        """The stored record of ``seq`` done with ``reply``."""
        return encode_value(bytes(P.ok([seq, reply])[P.HEADER_LEN :]))

    def forget(self, pid: bytes) -> None:
        """The producer disconnected: its record goes (at best effort)."""
        with self._lock:
            self._locks.pop(pid, None)
            had = self._last.pop(pid, None)
            self._newest.pop(pid, None)
        if had is None or self.journal is None:
            return
        w = StoreChanges()
        w.deletes.append(once_key(pid))
        with contextlib.suppress(MQError):
            self.journal.write(w, "forgetting a producer's requests done once")
