"""The standard library's exceptions for what the queue manager refuses.

The queue objects mirror ``queue.Queue`` and ``asyncio.Queue``, so a caller catches what it
would catch there: ``queue.Empty`` / ``queue.Full`` (``asyncio.QueueEmpty`` /
``asyncio.QueueFull``) are raised by the callers themselves; everything else an MQ call can
refuse is mapped here, once, with the MQ reason's text kept:

* a bad argument the engine caught (2085 name, 3229 value, 2030 / 2031 an item too large):
  ``ValueError``;
* no authority on a served queue manager (2035): ``PermissionError``;
* a served queue manager gone or unreachable (2009, 2538, 2025): ``ConnectionError``; a put
  or get under way when it went, not back within the reconnect bound, so that whether it was
  done is unknown: :class:`OutcomeUnknownError`, a ``ConnectionError`` that says so;
* the queue object closed under a call (2018, 2019, and 2009 of a closed queue manager):
  ``ValueError`` ("closed"), as a closed file and ``multiprocessing.Queue`` raise;
* the store failing or damaged (2102, 2101): ``OSError``.

Anything else stays the ``MQError`` it is: its text says what to do.
"""

from __future__ import annotations

from sweepq.engine import MQError, Reason


class OutcomeUnknownError(ConnectionError):
    """A put or get was under way when its served queue manager went away, and the server was
    not back within the reconnect bound: the item may or may not have been put (or taken).
    Every other ``ConnectionError`` means the call was not done."""


_VALUE = {
    Reason.PARM_VALUE_ERROR,
    Reason.UNKNOWN_OBJECT_NAME,
    Reason.MSG_TOO_BIG_FOR_Q,
    Reason.MSG_TOO_BIG_FOR_Q_MGR,
    Reason.Q_MGR_NAME_ERROR,
    Reason.OBJECT_TYPE_ERROR,
}
_CONNECTION = {Reason.CONNECTION_BROKEN, Reason.HOST_NOT_AVAILABLE, Reason.MAX_CONNS_LIMIT_REACHED}
_CLOSED = {Reason.HCONN_ERROR, Reason.HOBJ_ERROR}
_STORE = {Reason.RESOURCE_PROBLEM, Reason.OBJECT_DAMAGED, Reason.STORAGE_MEDIUM_FULL}


def map_error(e: MQError, context: str, closed: bool = False) -> Exception:
    """The exception to raise for ``e``, met while doing ``context`` (a few words: "queue
    'jobs' at /data"); ``closed``: the queue object was closed, so a broken connection is
    the closing, not a failure."""
    text = f"{context}: {e}"
    if closed or e.reason in _CLOSED:
        return ValueError(f"{context}: the queue is closed")
    if e.reason in _VALUE:
        return ValueError(text)
    if e.reason == Reason.NOT_AUTHORIZED:
        return PermissionError(text)
    if e.reason in _CONNECTION:
        from sweepq.net.calls import FateUnknown  # only a served queue's errors: net loaded then

        return OutcomeUnknownError(text) if isinstance(e, FateUnknown) else ConnectionError(text)
    if e.reason in _STORE:
        return OSError(text)
    return e
