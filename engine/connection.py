"""Connections (MQCONN): open handles, own one unit of work, commit and back it out.

Thread safety: a :class:`~sweepq.engine.manager.QueueManager` may be shared by any number of
threads. A :class:`Connection` and its handles serve one call at a time, as an MQ connection
handle does: a call made on another thread while one is in progress fails at once with
MQRC_CALL_IN_PROGRESS (2219) and changes nothing. Give each thread its own connection.
Queues are protected by their own locks (engine/queue.py, the lock rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import browse, checks, groups
from .constants import OO, Reason
from .errors import MQError, options_error
from .handle import Handle, _Call
from .handlestate import HandleState
from .options import INPUT_OPTS, check_open
from .selector import compile_selector
from .uow import UnitOfWork

if TYPE_CHECKING:
    from .internals import Manager
    from .queue import LocalQueue


class Connection:
    """A connection to a queue manager. It owns at most one unit of work.

    Use it as a context manager: leaving the block disconnects, which backs out any
    uncommitted work (MQ's implicit backout) and closes every handle.
    """

    def __init__(self, qm: Manager):
        self.qm = qm
        self.uow = UnitOfWork()
        # One call at a time (2219 otherwise): every call pops the one token and puts it
        # back when it ends. list.pop() is atomic, and much cheaper than a Lock's acquire.
        self.token = [True]
        self._handles: set[Handle] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once disconnected (by the application or by the queue manager's close)."""
        return self._closed

    # -- objects ------------------------------------------------------------------------

    def open(self, name: str, options: OO | int, selector: str | None = None, *, qmgr: str = "") -> Handle:
        """Open a queue (MQOPEN). The handle can do only what ``options`` allow (§4.3, §7).

        ``selector`` is a selection string (docs/semantics.md §10): the handle's gets and
        browses then return only messages it selects. It is compiled here, once: a syntax
        error is MQError 2459, a selector that can never be TRUE 2504.

        ``qmgr`` is MQOD's ObjectQMgrName: "" (or this queue manager's name) for a queue
        here; another queue manager's name opens ``name`` there, for output, through a
        transmission queue, as a remote queue definition does (MQ's name resolution,
        engine/distributed/resolve.py; docs/channels.md).

        :raises MQError: OPTIONS_ERROR (2046), UNKNOWN_OBJECT_NAME (2085), OBJECT_IN_USE
            (2042), the selector's reasons, or the closed connection's; for a remote queue
            OPTION_NOT_VALID_FOR_TYPE (2045) unless opened for output only, and the reasons
            of name resolution (2087, 2196, 2091, ...)."""
        with _Call(self.token):
            self.check()
            checks.name(name)
            checks.name(qmgr, "queue manager name")
            opts = checks.flags(options, "open options")
            err = check_open(opts)
            if err:
                raise options_error(err)
            sel = compile_selector(selector)
            q, route = self.qm.internal.route(name, qmgr)
            if route is not None and opts & (INPUT_OPTS | OO.BROWSE):
                raise MQError(
                    Reason.OPTION_NOT_VALID_FOR_TYPE,
                    f"{name!r} is a queue on queue manager {route.remote_qmgr!r}: open it for output only",
                )
            inp = _input_mode(q, opts)
            q.open_counted(opts, inp)
            state = HandleState(self, q, opts, inp, sel)
            state.xmit = route
            h = Handle(state, opts | inp)
            self._handles.add(h)
            return h

    def close_handle(self, h: Handle) -> Reason:
        """MQCLOSE of ``h`` (Handle.close): the open counts go down, its browse lock ends, and
        a group it leaves incomplete is reported (2242 / 2241, a warning)."""
        s = h._s
        s.closed = True
        q = s.queue
        exclusive = bool(h.options & OO.INPUT_EXCLUSIVE)
        q.close_counted(s.can_get, s.can_put, exclusive, lambda: browse.release_locked(q, s.cursor))
        self._handles.discard(h)
        self.qm.internal.dynamic.handle_closed(q)  # a temporary dynamic queue goes with its last handle
        return groups.closed(s)

    # -- unit of work --------------------------------------------------------------------

    def commit(self) -> Reason:
        """MQCMIT: puts become visible, got messages are deleted.

        Returns ``Reason.NONE``, or the WARNING OUTCOME_PENDING (2124) when the commit is
        made but syncing it to disk failed (sync="commit"): a later sync hardens it; do not
        repeat the unit of work. :raises MQError: BACKED_OUT (2003) when the commit could not
        be written: the unit of work was backed out instead."""
        with _Call(self.token):
            self.check()
            return self.uow.commit()

    def backout(self) -> None:
        """MQBACK: puts are deleted, got messages reappear in place with BackoutCount + 1.

        A get marked with MARK_SKIP_BACKOUT stays got and forms a new unit of work."""
        with _Call(self.token):
            self.check()
            self.uow.backout(application_requested=True)

    @property
    def uncommitted(self) -> int:
        """Operations in the current unit of work (counted against max_uncommitted)."""
        return len(self.uow)

    def disconnect(self) -> None:
        """MQDISC: back out uncommitted work (a marked get is restored too) and close handles."""
        if self._closed:
            return
        with _Call(self.token):
            self.end()

    close = disconnect

    def end(self) -> None:
        """Disconnect without the one-call rule: the queue manager's close ends every
        connection, even one whose call is waiting (the wait then ends with 2009)."""
        if self._closed:
            return
        for h in list(self._handles):
            if not h._s.closed:
                self.close_handle(h)
        self.uow.backout(application_requested=False)
        self._closed = True
        self.qm.internal.forget_connection(self)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def check(self) -> None:
        """:raises MQError: HCONN_ERROR (2018) once disconnected, CONNECTION_BROKEN (2009)
        once the queue manager is closed."""
        if self._closed:
            raise MQError(Reason.HCONN_ERROR, "this connection is disconnected; connect again")
        if self.qm.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager has been closed")


def _input_mode(q: LocalQueue, opts: int) -> int:
    """The INPUT_* mode a handle opened with ``opts`` gets (INPUT_AS_Q_DEF resolved, a
    NOSHARE queue making INPUT_SHARED exclusive), or 0."""
    inp: int = opts & INPUT_OPTS
    if inp == OO.INPUT_AS_Q_DEF:
        inp = int(q.attrs.default_input)
    if inp == OO.INPUT_SHARED and not q.attrs.shareable:
        inp = int(OO.INPUT_EXCLUSIVE)
    return inp
