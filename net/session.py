"""One client connection inside the server: its engine connection, its handles, its calls.

A session is served by the server's loop (net/loop.py: ``serve_ready``) while its calls cannot
wait, else on a thread of its own (``serve``; a TLS connection always), and calls the engine's
public API only, exactly as an in-process application would: one engine
:class:`~sweepq.engine.Connection`, whose unit of work therefore lives in the server, and the
handles it opened, known to the client by number. When the connection ends for any reason
(the client's ``disconnect``, a broken socket, a bad frame, the server stopping) the engine
connection is disconnected: uncommitted work is backed out, handles close (a browse lock is
released, a temporary dynamic queue deleted), as MQ does for a client that goes away.

A get with WAIT waits in the server, in slices (``slice_s``, on the queue manager's clock):
between slices the session looks at its socket without blocking, so a waiting get ends
when its client cancels it (op CANCEL: nothing was taken) or goes away, and the wait never
holds anything another client needs.
"""

from __future__ import annotations

import contextlib
import math
import select
import threading
import time
import traceback
from typing import TYPE_CHECKING

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls (net/session.pxd; forms.py)
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize

from sweepq.engine import GMO, PMO, MQError, Reason
from sweepq.engine.handle import Handle
from sweepq.engine.message import Message, PutResult, message_read_at_us, message_record, own_data, put_record
from sweepq.engine.record import data_offset, is_persistent

from . import protocol as P
from .channels.admin import dq_admin
from .channels.receiver import channel_ops
from .frames import Closed, FrameRefused, FrameSocket
from .once import check_producer, once_key

if TYPE_CHECKING:
    from .server import Server

_WAIT = int(GMO.WAIT)
# The ops the loop's hot path tests, and the reply's, as C ints in the compiled form
# (net/session.pxd): no attribute of the protocol module read per request.
_PUT, _GET, _GET_MANY, _OK = P.PUT, P.GET, P.GET_MANY, P.OK
_STATE = {op: name.lower() for op, name in P.OP_NAMES.items()}  # what `sweepq status` shows
_NO_MSG = Reason.NO_MSG_AVAILABLE
# What ONCE wraps, and the option bits that put each under syncpoint (and the bit that says not).
_ONCE_SYNC = {
    P.PUT: (3, int(PMO.SYNCPOINT), int(PMO.NO_SYNCPOINT)),
    P.PUT_MANY: (3, int(PMO.SYNCPOINT), int(PMO.NO_SYNCPOINT)),
    P.GET: (1, int(GMO.SYNCPOINT), int(GMO.NO_SYNCPOINT)),
    P.GET_MANY: (2, int(GMO.SYNCPOINT), int(GMO.NO_SYNCPOINT)),
}


# What :meth:`Session.serve_ready` returns to the loop (net/loop.py).
STAY, THREAD, DONE = 0, 1, 2
# The calls the loop makes itself: they never wait for another client (a get only without
# WAIT); everything else (a commit that waits for its sync, administration, channels, ONCE) is
# made on a thread of the connection's own.
_ON_LOOP = frozenset({P.PUT, P.PUT_MANY, P.GET, P.GET_MANY, P.OPEN, P.CLOSE, P.INQUIRE, P.NAMES, P.UNCOMMITTED})


def ended_why(e: BaseException, session: Session) -> str:
    """The log line's reason of a connection that ``e`` ended (a server bug is logged here)."""
    if isinstance(e, Closed):
        return str(e)
    if isinstance(e, P.ProtocolError):
        return f"protocol error: {e}"
    if isinstance(e, OSError):
        return f"connection failed: {e.strerror or e}"
    if isinstance(e, MQError):  # the queue manager is closing
        return f"the queue manager refused it: {e}"
    session.server.log.error("#%d failed: %s", session.id, traceback.format_exc())
    return f"the server failed: {type(e).__name__}"


def _arguments(op, entry: tuple, args) -> list:
    """A request's unpacked ``args``, checked: a list of as many as its op takes (``entry``
    its handler's, whose first item is that count).

    :raises ProtocolError: anything else (the connection ends)."""
    if type(args) is not list or len(args) != entry[0]:
        raise P.ProtocolError(f"op {P.OP_NAMES.get(op, op)} takes a list of {entry[0]} arguments")
    return args


def _may_wait(op, args: list) -> bool:
    """A get that would wait for a message (GET's options and interval are its 2nd and 3rd
    arguments, GET_MANY's its 3rd and 4th)."""
    if op == _GET:
        return _waits(args[1], args[2])
    if op == _GET_MANY:
        return _waits(args[2], args[3])
    return False


class _Cancelled(Exception):
    """The client cancelled the waiting get (op CANCEL)."""


def message_to_wire(m) -> list:
    """A get's result: ``["m", record, data or None, reason, read_at_us]`` for a message (data
    None: the record's own payload, the usual case), ``["s", reason]`` for a status (UNLOCK)."""
    if type(m) is not Message:
        return ["s", int(m.reason)]
    msg = cython.cast(Message, m)  # compiled: its data and reason read as C fields
    rec = message_record(msg)  # compiled: C calls (engine/message.pxd, engine/record.pxd)
    reason = msg.reason if COMPILED else int(msg.reason)  # compiled: a C int, where int() is a call
    return ["m", rec, own_data(msg), reason, message_read_at_us(msg)]


def _kept_reply(framer: P.Framer, op: int, value) -> int:
    """The loop's reply to a call whose result is ``value`` packed in ``framer``'s buffer
    (``Session._call``; net/protocol.py ``Framer.frame_kept``): its length, or -1 when it must
    be made as bytes. PUT's and GET's are packed from their result's fields (no list made);
    -1 there sends them through the list the thread's reply is made from
    (``Session._put_reply``, :func:`message_to_wire`)."""
    if op == _PUT:
        r = cython.cast(PutResult, value)  # compiled: its reason read as a C field
        rec = put_record(r)
        return framer.frame_kept_put(_OK, r.reason, rec, data_offset(rec))
    if op == _GET:
        if type(value) is not Message:
            return -1
        msg = cython.cast(Message, value)
        rec = message_record(msg)
        return framer.frame_kept_message(_OK, rec, own_data(msg), msg.reason, message_read_at_us(msg))
    return framer.frame_kept(_OK, value)


def _header(rec: bytes) -> bytes:
    end = data_offset(rec)
    if COMPILED and 0 <= end <= len(rec):  # one copy, where a slice makes a slice object first
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(rec), end)
    return rec[:end]


class Session:
    """One client connection (see the module docstring). Its fields are read by ``status``."""

    def __init__(self, server: Server, fs: FrameSocket, sid: int, peer: str, transport: str):
        self.server = server
        self.qm = server.qm
        self.fs = fs
        self.id = sid
        self.peer = peer
        self.transport = transport
        self.since = time.time()
        self.pid = 0
        self.client = ""
        self.admin = False
        self.calls = 0
        self.state = "handshake"
        self.conn = None
        self.backed_out = 0
        self.handles: dict = {}
        self.producers: set[bytes] = set()  # producer ids this connection sent ONCE with
        self._next_hid = 1
        self.slice_s = server.wait_slice
        self.ended = threading.Event()
        self._cut_why = ""  # why the server cut the connection (``cut``), for its log line
        self._framer = P.Framer()
        self._pending = None  # a call the loop read and left to a thread: (op, entry, args)
        self._unsent = None  # the part of a reply the loop could not send without waiting
        self._kept_n = -1  # the length of the reply _call packed in the framer's buffer
        self._said_bye = False  # that reply was BYE's: the connection ends once it is sent
        self._syncs_at_commit = False  # the queue manager syncs at commit (``welcome``)
        self._syncs = False  # this connection moved a message that its call syncs: off the loop
        self._handlers = {
            P.OPEN: (3, self._open),
            P.CLOSE: (1, self._close),
            P.PUT: (4, self._put),
            P.PUT_MANY: (4, self._put_many),
            P.GET: (11, self._get),
            P.GET_MANY: (4, self._get_many),
            P.COMMIT: (0, self._commit),
            P.BACKOUT: (0, self._backout),
            P.UNCOMMITTED: (0, self._uncommitted),
            P.INQUIRE: (1, self._inquire),
            P.DEFINE: (2, self._define),
            P.ALTER: (2, self._alter),
            P.DELETE: (2, self.qm.delete_queue),
            P.NAMES: (0, self.qm.queue_names),
            P.DEFINE_MODEL: (3, self._define_model),
            P.STATUS: (0, self.server.status),
            P.DQ_ADMIN: (3, self._dq_admin),
            P.ONCE: (5, self._once),
        }
        self.channel = None  # a receiving channel's agent, once a sender started one (net/channels/)
        self._handlers.update(channel_ops(self))
        # op -> (argument count, call, the state `sweepq status` shows, administration only?)
        self._handlers = {
            op: (argc, call, _STATE[op], op in P.ADMIN_OPS) for op, (argc, call) in self._handlers.items()
        }
        # PUT's and GET's, kept apart: the loop takes them without a lookup (serve_ready).
        self._put_entry = self._handlers[P.PUT]
        self._get_entry = self._handlers[P.GET]

    # -- the thread -------------------------------------------------------------------------

    def run(self, hello: dict, admin: bool) -> None:
        """Serve the connection on this thread until it ends; ``hello`` is its handshake, which
        the server has checked (net/handshake.py, net/server.py ``welcome``), ``admin`` its
        authority."""
        try:
            self.welcome(hello, admin)
        except BaseException as e:
            self.end(ended_why(e, self))
            if not isinstance(e, Exception):
                raise
            return
        self.serve()

    def run_alone(self, hello: dict, admin: bool) -> None:
        """:meth:`run` for a plain connection on a thread of its own from the start (admitted
        alone, or with no loop: net/server.py ``welcome``): the loop's turns (:meth:`serve_ready`)
        on this thread, each after a wait in its recv (FrameSocket ``fill``) where the loop waits
        in epoll, until a turn hands the connection on as it would leave the loop (a call that
        may wait, part of a frame, a reply not taken whole, a sync); :meth:`serve` goes on.
        Once others are open, the loop takes the connection over after a turn (net/server.py
        ``to_loop``) and this thread leaves it."""
        try:
            self.welcome(hello, admin)
            fs, server = self.fs, self.server
            while True:
                step = self.serve_ready()  # first for bytes sent right after the HELLO
                if step != STAY:
                    break
                if server.admitted > 1 and server.to_loop(self):
                    return  # the loop's now: nothing buffered, nothing owed to the client
                fs.fill()
        except BaseException as e:
            self.end(ended_why(e, self))
            if not isinstance(e, Exception):
                raise
            return
        if step == DONE:
            self.end("disconnected by the client")
            return
        self.serve()

    def serve(self) -> None:
        """Serve the connection on this thread until it ends (after its welcome; what the loop
        left undone first)."""
        why = "closed by the client"
        try:
            why = self._loop()
        except BaseException as e:
            why = ended_why(e, self)
            if not isinstance(e, Exception):
                raise
        finally:
            self.end(why)

    def welcome(self, hello: dict, admin: bool) -> None:
        """The reply to HELLO: who this server is, its limits, this connection's authority."""
        self.admin = admin
        self.pid = hello.get("pid") if type(hello.get("pid")) is int else 0
        self.client = str(hello.get("client", ""))[:100]
        if hello.get("cancel"):
            self.slice_s = self.server.cancel_slice
        self.conn = self.qm.connect()
        journal = self.qm.journal
        self._syncs_at_commit = journal is not None and journal.policy == "commit"
        self.state = "idle"
        reply = {
            "version": P.VERSION,
            "qm": self.qm.name,
            "run_id": self.qm.ident.run_id,
            "conn": self.id,
            "max_frame": self.server.max_frame,
            "max_handles": self.server.max_handles,
            "admin": self.admin,
        }
        self.fs.send(P.ok(reply))
        self.server.log.info(
            "connect #%d %s %s pid=%s client=%s%s",
            self.id,
            self.transport,
            self.peer,
            self.pid,
            self.client or "-",
            " admin" if self.admin else "",
        )

    def _loop(self) -> str:
        # The hot path of every request on a thread, so written flat: one read (net/frames.py
        # returns a small frame from its single recv), one dict lookup, the call, one send; the
        # reply is packed by this connection's own packer (net/protocol.py Framer). What the
        # loop left to this thread (``serve``) comes first.
        fs, handlers, unpack = self.fs, self._handlers, P.unpack
        send = fs.sock.sendall
        if self._unsent is not None:
            send(self._unsent)
            self._unsent = None
            if self._said_bye:
                return "disconnected by the client"
        if self._pending is not None:
            op, entry, args = self._pending
            self._pending = None
            send(self._call(op, entry, args))
        while True:
            try:
                op, body = fs.read()
            except FrameRefused as e:  # read and dropped: the call fails, the connection goes on
                self.server.log.warning("refused a frame of %d bytes from #%d: %s", e.size, self.id, e)
                send(self._framer.error(MQError(Reason.STORAGE_NOT_AVAILABLE, str(e))))
                continue
            entry = handlers.get(op)
            if entry is None:
                if op == P.CANCEL:
                    continue  # late: the get it meant has replied already
                if op == P.BYE:
                    send(self._bye())
                    return "disconnected by the client"
                raise P.ProtocolError(f"unknown op {op}")
            args = _arguments(op, entry, unpack(body))
            body = None  # a large frame's memory goes back to the server at the next read
            send(self._call(op, entry, args))

    def serve_ready(self) -> int:
        """The loop's turn (net/loop.py): serve every whole frame the socket holds whose call
        cannot wait, replying without waiting. Returns :data:`STAY` (wait for more bytes in
        the loop), :data:`THREAD` (the connection goes on on a thread of its own,
        :meth:`serve`: a call that may wait, part of a frame, a reply the socket did not take
        whole, a message that must be synced) or :data:`DONE` (the client said BYE).

        :raises Closed, ProtocolError, OSError: as :meth:`serve` ends the connection."""
        fs, handlers = self.fs, self._handlers
        while True:
            op = fs.ready_op()  # compiled: the body decoded where it lies in the read buffer (ready_value)
            if op < 0:
                return THREAD if fs.partial() else STAY
            if op == _PUT:  # the usual two without a lookup (compiled: no int object made for it)
                entry = self._put_entry
            elif op == _GET:
                entry = self._get_entry
            else:
                entry = handlers.get(op)
            if entry is None:
                if op == P.CANCEL:
                    continue
                if op == P.BYE:
                    reply = self._bye()
                    sent = fs.send_ready(reply)
                    if sent == len(reply):
                        return DONE
                    self._unsent, self._said_bye = reply[sent:], True
                    return THREAD
                raise P.ProtocolError(f"unknown op {op}")
            args = _arguments(op, entry, fs.ready_value())
            if (op != _PUT and op != _GET and op not in _ON_LOOP) or _may_wait(op, args):
                self._pending = (op, entry, args)
                return THREAD
            reply = self._call(op, entry, args, True)
            if reply is None:  # compiled: the usual reply, packed in the framer's buffer (_call)
                kept = self._framer.kept
                sent = fs.send_ready_from(kept, self._kept_n)
                if sent != self._kept_n:
                    self._unsent = bytes(kept[sent : self._kept_n])
                    return THREAD
            else:
                sent = fs.send_ready(reply)
                if sent != len(reply):
                    self._unsent = reply[sent:]
                    return THREAD
            if self._syncs:
                return THREAD

    def _call(self, op, entry: tuple, args: list, kept: bool = False) -> bytes | None:
        """The reply frame of one call (the call made; a failure is the reply, unless the
        connection must end). With ``kept`` (the loop's calls), None when the reply is the
        first ``_kept_n`` bytes of the framer's buffer (net/protocol.py ``Framer.frame_kept``),
        which the caller sends before the next call."""
        _, call, state, admin_only = entry
        self.calls += 1
        self.state = state
        try:
            if admin_only and not self.admin:
                raise P.not_authorized(f"administration ({state})")
            self._kept_n = -1
            if op == _PUT:  # the usual two called directly (compiled: a C call, no argument tuple)
                value = self._put_result(args[0], args[1], args[2], args[3])
            elif op == _GET:
                value = self._got(
                    args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8], args[9], args[10]
                )
            else:
                value = call(*args)
            if kept:
                self._kept_n = _kept_reply(self._framer, op, value)
            if self._kept_n < 0 and op == _PUT:
                value = self._put_reply(value)
            elif self._kept_n < 0 and op == _GET:
                value = message_to_wire(value)
            reply = None if self._kept_n >= 0 else self._framer.frame(_OK, value)
        except MQError as e:
            if e.reason == Reason.NOT_AUTHORIZED:
                self.server.log.warning("refused #%d %s: %s", self.id, P.OP_NAMES[op], e)
            reply = self._framer.error(e)
        except _Cancelled:
            reply = self._framer.error(MQError(_NO_MSG, "the waiting get was cancelled; nothing was taken"))
        except (Closed, P.ProtocolError):
            raise
        except Exception as e:  # a server bug: this call fails, the connection and the server go on
            self.server.log.error("#%d %s failed: %s", self.id, P.OP_NAMES[op], traceback.format_exc())
            reply = self._framer.error(MQError(Reason.UNEXPECTED_ERROR, f"the server failed: {type(e).__name__}: {e}"))
        self.state = "idle"
        return reply

    def _bye(self) -> bytes:
        """BYE: disconnect before the reply, so that the client's next call sees it done."""
        self._release()
        for pid in self.producers:  # a client that said goodbye sends nothing again
            self.server.once.forget(pid)
        self.server.forget(self)  # and its next connect finds the slot free
        return self._framer.ok(None)

    def _release(self) -> None:
        """Disconnect the engine connection: back out its unit of work, close its handles."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        self.backed_out = conn.uncommitted
        with contextlib.suppress(MQError):  # the queue manager is closing: it backs out what is left
            conn.disconnect()

    def end(self, why: str) -> None:
        """The connection is over (on the thread that serves it): back out, close, log it."""
        why = self._cut_why or why
        self._release()
        if self.channel is not None:  # after the backout: only then may another sender start it
            self.channel.end()
        self.fs.close()
        self.fs.release()
        self.server.forget(self)
        if self.state != "handshake":
            extra = f"; backed out {self.backed_out} uncommitted operation(s)" if self.backed_out else ""
            self.server.log.info("disconnect #%d (%s)%s", self.id, why, extra)
        self.ended.set()

    def cut(self, why: str) -> None:
        """From the door's thread: end a connection past a deadline (net/server.py ``reap``)."""
        self._cut_why = why
        self.fs.shutdown()

    def stop(self) -> None:
        """From another thread (the server stopping): end the connection; the session's thread
        then ends its call and disconnects its engine connection itself."""
        self.fs.shutdown()

    # -- handles --------------------------------------------------------------------------

    def _handle(self, hid):
        try:
            return self.handles[hid]
        except (KeyError, TypeError):
            raise MQError(Reason.HOBJ_ERROR, f"handle number {hid!r} is not open on this connection") from None

    def _open(self, name, options, selector):
        if len(self.handles) >= self.server.max_handles:
            raise MQError(
                Reason.HANDLE_NOT_AVAILABLE,
                f"this connection has {len(self.handles)} handles open, the server's limit; close some first",
            )
        h = self.conn.open(name, options, selector)
        hid = self._next_hid
        self._next_hid += 1
        self.handles[hid] = h
        return [hid, h.name, int(h.options)]

    def _close(self, hid):
        h = self._handle(hid)
        del self.handles[hid]
        return int(h.close())

    # -- messages ----------------------------------------------------------------------------

    def _put(self, hid, data, md, options):
        return self._put_reply(self._put_result(hid, data, md, options))

    def _put_reply(self, r) -> list:
        return [r.reason, _header(put_record(r))]

    def _put_result(self, hid, data, md, options):
        """PUT's call: the engine's result, whose reply :meth:`_put` makes (or ``_call``, in place)."""
        h = self.handles.get(hid) if type(hid) is int else None
        if h is None:
            h = self._handle(hid)
        if md is not None:
            md = P.md_from_wire(md)
        # On a Handle, compiled: a C call (engine/handle.pxd), no method lookup, no arguments parsed.
        r = cython.cast(Handle, h).put(data, md, options) if type(h) is Handle else h.put(data, md, options)
        rec = put_record(r)  # compiled: a C call, where the property is an attribute lookup
        if self._syncs_at_commit and is_persistent(rec):
            self._syncs = True  # its sync waited: the connection leaves the loop (serve_ready)
        return r

    def _put_many(self, hid, datas, md, options):
        rs = self._handle(hid).put_many(datas, P.md_from_wire(md), options)
        if self._syncs_at_commit and any(is_persistent(r.record) for r in rs):
            self._syncs = True
        return [rs[0].reason if rs else 0, [_header(r.record) for r in rs]]

    def _get(self, hid, options, wait_interval, buffer_length, match, msg_id, correl_id, group, seq, offset, token):
        return message_to_wire(
            self._got(hid, options, wait_interval, buffer_length, match, msg_id, correl_id, group, seq, offset, token)
        )

    def _got(self, hid, options, wait_interval, buffer_length, match, msg_id, correl_id, group, seq, offset, token):
        """GET's call: the engine's message (or status), whose reply :meth:`_get` makes (or
        ``_call``, in place)."""
        h = self.handles.get(hid) if type(hid) is int else None
        if h is None:
            h = self._handle(hid)
        if type(options) is int and not options & _WAIT:  # no wait: the usual get, straight through
            if type(h) is Handle:  # compiled: a C call (engine/handle.pxd), as PUT's
                m = cython.cast(Handle, h)._get(
                    options, wait_interval, buffer_length, match, msg_id, correl_id, group, seq, offset, token
                )
            else:
                m = h.get(options, wait_interval, buffer_length, match, msg_id, correl_id, group, seq, offset, token)
            if self._syncs_at_commit and type(m) is Message and is_persistent(message_record(m)):
                self._syncs = True  # its sync waited: the connection leaves the loop (serve_ready)
            return m
        rest = (buffer_length, match, msg_id, correl_id, group, seq, offset, token)
        if _waits(options, wait_interval):
            return self._get_waiting(h, options, wait_interval, rest)
        return h.get(options, wait_interval, *rest)

    def _get_waiting(self, h, options, wait_interval, rest: tuple):
        # (A method of its own: the compiled _get, a C method, cannot hold the closure.)
        return self._waiting(lambda ms: h.get(options, ms, *rest), wait_interval)

    def _get_many(self, hid, max_messages, options, wait_interval):
        h = self._handle(hid)
        if _waits(options, wait_interval):
            try:
                ms = self._waiting(lambda ms: _some(h.get_many(max_messages, options, ms)), wait_interval)
            except MQError as e:
                if e.reason != _NO_MSG:
                    raise
                ms = []  # get_many's "nothing came": an empty list, not 2033
        else:
            ms = h.get_many(max_messages, options, wait_interval)
        records = [m.record for m in ms]
        if self._syncs_at_commit and any(is_persistent(rec) for rec in records):
            self._syncs = True
        return records

    def _waiting(self, call, wait_interval: int):
        """``call(ms)`` in slices until it returns, the wait interval ends (2033), the client
        cancels (:class:`_Cancelled`) or goes away (:class:`Closed`)."""
        clock = self.qm.clock
        deadline = None if wait_interval < 0 else clock.now() + wait_interval / 1000.0
        slice_ms = max(1, int(self.slice_s * 1000))
        self.state = "waiting"
        while True:
            ms = slice_ms if deadline is None else max(0, min(slice_ms, math.ceil((deadline - clock.now()) * 1000)))
            try:
                return call(ms)
            except MQError as e:
                if e.reason != _NO_MSG or (deadline is not None and clock.now() >= deadline):
                    raise
            self._check_cancel()

    def _check_cancel(self) -> None:
        fs = self.fs
        if not fs.buffered():
            poller = select.poll()  # not select(): a server with 1,000 connections has fds past 1024
            poller.register(fs.sock, select.POLLIN)
            if not poller.poll(0):
                return
        op, _ = fs.read()
        if op == P.CANCEL:
            raise _Cancelled
        raise P.ProtocolError(f"op {op} sent while a call was in progress (one call at a time)")

    # -- requests done once (net/once.py) ---------------------------------------------------

    def _once(self, pid, seq, again, op, args):
        """``op(*args)`` done once for (``pid``, ``seq``): the reply it had when it was done
        already; a commit sent ``again`` and not done was backed out with the broken
        connection (2003); nothing done for a connection older than the producer's newest
        (2009, net/once.py)."""
        pid = check_producer(pid, seq)
        table = self.server.once
        self.producers.add(pid)
        with table.holding(pid) as last:
            table.claim(pid, self.id)  # a request read after its producer's newer connection's: not done
            if last is not None and last[0] == seq:
                return last[1]  # done before its reply was lost: the same reply, nothing done again
            if last is not None and seq < last[0]:
                raise MQError(Reason.PARM_VALUE_ERROR, f"ONCE sequence number {seq} is behind {last[0]}, done already")
            if op == P.COMMIT:
                reply = self._commit_once(pid, seq, bool(again))
            elif op in _ONCE_SYNC and type(args) is list and len(args) == self._handlers[op][0]:
                reply = self._op_once(pid, seq, op, args)
            else:
                raise MQError(
                    Reason.PARM_VALUE_ERROR, f"ONCE wraps PUT, PUT_MANY, GET, GET_MANY or COMMIT, not op {op!r}"
                )
            table.remember(pid, seq, reply)
            return reply

    def _commit_once(self, pid: bytes, seq: int, again: bool):
        conn, journal = self.conn, self.server.once.journal
        if again and not conn.uncommitted:  # its connection broke first: the server backed the work out
            raise MQError(
                Reason.BACKED_OUT,
                "the connection broke before this commit was done: the unit of work was backed out in the server",
            )
        if journal is not None:
            conn.uow.harden(journal, once_key(pid), self.server.once.value(seq, 0))
        return int(conn.commit() or 0)

    def _op_once(self, pid: bytes, seq: int, op: int, args: list):
        """A put or get outside syncpoint, done under syncpoint and committed with its record
        when a message it moved is persistent (a non-persistent one does not outlive the
        server, nor need its record); when the connection holds no unit of work: else done
        as it came."""
        at, sync, no_sync = _ONCE_SYNC[op]
        call = self._handlers[op][1]
        conn, journal = self.conn, self.server.once.journal
        options = args[at]
        if journal is None or conn.uncommitted or type(options) is not int or options & sync:
            return call(*args)
        args = list(args)
        args[at] = (options & ~no_sync) | sync
        reply = call(*args)
        try:
            if any(is_persistent(rec) for rec in _records(op, reply)):  # else it dies with the server anyway
                conn.uow.harden(journal, once_key(pid), self.server.once.value(seq, reply))
            conn.commit()
        except BaseException:
            with contextlib.suppress(MQError):
                conn.backout()
            raise
        return reply

    # -- units of work and administration ---------------------------------------------------

    def _commit(self):
        return int(self.conn.commit() or 0)

    def _backout(self):
        self.conn.backout()

    def _uncommitted(self):
        return self.conn.uncommitted

    def _inquire(self, name):
        return P.info_to_wire(self.qm.inquire_queue(name))

    def _define(self, name, attributes):
        return P.info_to_wire(self.qm.define_queue(name, **_attributes(attributes)))

    def _alter(self, name, attributes):
        return P.info_to_wire(self.qm.alter_queue(name, **_attributes(attributes)))

    def _define_model(self, name, dynamic_q_name, attributes):
        self.qm.define_model_queue(name, dynamic_q_name, **_attributes(attributes))

    def _dq_admin(self, action, name, arguments):
        return dq_admin(self.qm, self.admin, action, name, _attributes(arguments))


def _records(op: int, reply) -> list:
    """The message records (or headers) in the reply of a put or get done once."""
    if op == P.PUT:
        return [reply[1]]
    if op == P.PUT_MANY:
        return reply[1]
    if op == P.GET:
        return [reply[1]] if reply[0] == "m" else []
    return reply  # GET_MANY


def _waits(options, wait_interval) -> bool:
    """A get that waits in slices: WAIT with a valid interval other than 0 (anything else goes
    to the engine as it came, which then answers as it does in process)."""
    return (
        type(options) is int
        and options & _WAIT
        and type(wait_interval) is int
        and (wait_interval > 0 or wait_interval == -1)
    )


def _some(messages: list):
    """get_many under WAIT in slices: an empty slice is a 2033 to the slicing loop."""
    if not messages:
        raise MQError(_NO_MSG, "no message yet")
    return messages


def _attributes(value) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise MQError(Reason.PARM_VALUE_ERROR, "queue attributes must be a map of attribute names to values")
    return value
