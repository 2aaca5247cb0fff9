"""What an operator does to a queue manager, one implementation for the console and the
command line (``sweepq browse``, ``sweepq clear``): browse messages without removing them,
describe a message, clear a queue.

Each function takes a queue manager: a :class:`~sweepq.engine.QueueManager` in process or a
:class:`~sweepq.net.RemoteQueueManager` (the same calls over a connection), and uses only the
public API: ``connect``, ``open``, ``get``/``get_many``, ``inquire_queue``. A connection is
used by the thread that made it only (the engine's rule): each call makes its own and ends it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sweepq.engine import GMO, OO, MQError, Reason

CLEAR_BATCH = 1000  # messages removed per unit of work by clear(): a bounded unit of work


def put_time(seconds: float) -> str:
    """A put time as ISO 8601 UTC with milliseconds (``2025-01-31T12:00:00.000Z``)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def describe(m: Any, max_bytes: int | None = None) -> dict:
    """A message as plain values: its descriptor's fields, then its data as text (None when
    it is not UTF-8) and as hex. ``max_bytes``: only the first that many bytes of the data
    are given (``truncated`` says so); ``data_length`` is always the whole length."""
    md = m.md
    data = m.data if max_bytes is None else m.data[:max_bytes]
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    doc = {
        "msg_id": md.msg_id.hex(),
        "correl_id": md.correl_id.hex(),
        "priority": md.priority,
        "persistence": "PERSISTENT" if md.persistence == 1 else "NOT_PERSISTENT",
        "backout_count": md.backout_count,
        "put_time": put_time(md.put_time),
        "expiry": md.expiry,
        "data_length": m.data_length,
        "data": text,
        "data_hex": data.hex(),
    }
    if max_bytes is not None:
        doc["truncated"] = len(data) < len(m.data)
    if md.msg_flags:
        doc.update(group_id=md.group_id.hex(), msg_seq_number=md.msg_seq_number, offset=md.offset)
        doc["msg_flags"] = md.msg_flags
    properties = getattr(md, "properties", None)
    if properties:  # bytes values as {"hex": ...}: JSON has no bytes
        doc["properties"] = {k: {"hex": v.hex()} if isinstance(v, bytes) else v for k, v in properties.items()}
    return doc


# The engine's Python advice (its error texts end with it) in the console's terms: the page's
# user calls no Python.
_ADVICE = (
    ("define it with define_queue()", "define it with the page's define form (admin token) or POST /api/queues"),
    (
        "define it with define_channel()",
        "define it with `sweepq channel define` (the console starts and stops channels, it does not define them)",
    ),
)


def for_the_console(text: str) -> str:
    """An MQError's text with the engine's Python advice said the console's way."""
    for python, console in _ADVICE:
        text = text.replace(python, console)
    return text


def browse(qm: Any, queue: str, count: int, max_bytes: int | None = None) -> list[dict]:
    """The first ``count`` messages of ``queue`` in delivery order, described, none removed
    (MQGET with BROWSE_FIRST, then BROWSE_NEXT).

    :raises MQError: the open's or the browse's reason (2085 for an unknown queue)."""
    out: list[dict] = []
    conn = qm.connect()
    try:
        handle = conn.open(queue, OO.BROWSE)
        try:
            options = GMO.BROWSE_FIRST
            while len(out) < count:
                try:
                    m = handle.get(options)
                except MQError as e:
                    if e.reason == Reason.NO_MSG_AVAILABLE:
                        break
                    raise
                options = GMO.BROWSE_NEXT
                out.append(describe(m, max_bytes))
        finally:
            handle.close()
    finally:
        conn.disconnect()
    return out


def clear(qm: Any, queue: str) -> int:
    """MQ's CLEAR QLOCAL: remove every committed message of ``queue``; returns how many.

    As MQ, it refuses a queue that an application has open for input or output
    (MQRC_OBJECT_IN_USE, 2042; a browse does not count: the engine's queue status does not
    count browsers). It
    then holds the queue open for exclusive input and gets in units of work of CLEAR_BATCH
    messages, each committed, so a failure part way leaves the rest on the queue and a
    swept backlog comes back one blob at a time. Messages in another connection's
    uncommitted unit of work are not touched.

    :raises MQError: 2042 when the queue is open; 2085 for an unknown queue."""
    info = qm.inquire_queue(queue)
    opened = info.open_input_count + info.open_output_count
    if opened:
        raise MQError(
            Reason.OBJECT_IN_USE, f"queue {queue!r} is open by {opened} handle(s); clear it once they are closed"
        )
    removed = 0
    conn = qm.connect()
    try:
        handle = conn.open(queue, OO.INPUT_EXCLUSIVE)
        try:
            while True:
                got = handle.get_many(CLEAR_BATCH, GMO.SYNCPOINT)
                conn.commit()
                removed += len(got)
                if len(got) < CLEAR_BATCH:
                    return removed
        finally:
            handle.close()
    finally:
        conn.disconnect()
