"""The client: the engine's connection API on a queue manager in another process (MQ's
client mode). ``sweepq.client.connect(url)`` returns a :class:`ClientConnection`, which
satisfies :class:`~sweepq.engine.api.QueueConnection` as the in-process connection does: the
same calls, the same results (the engine's own Message and PutResult), the same MQError
reasons. Every call is one round trip; ``put_many`` and ``get_many`` move a batch in one.

MQ's client rules hold: the unit of work lives in the server, and a broken connection backs
it out there; a WAIT runs in the server; browse cursors and locks belong to the server's
handle and go when the connection does. Without ``reconnect`` a broken connection is
MQRC_CONNECTION_BROKEN (2009) on the call that meets it and on every call after. With
``reconnect`` (True: 30 s, or the seconds to try for) the call that meets the break
connects again, with backoff, reopens every handle (a temporary dynamic queue comes back as
a new one, with a new name) and goes on: a put, a get and a commit outside a unit of work
the server backed out are sent again as ONCE (net/once.py), so each is done exactly once; a
call under syncpoint in a unit of work the break backed out is BACKED_OUT (2003), as is
every such call and ``commit`` until ``commit`` or ``backout`` (net/calls.py
``UnitOfWork``): work is never silently half done. A server not back within the bound is
2009, or :class:`~sweepq.net.calls.FateUnknown` (2009 too) for a call that may or may not
have been done.

Thread safety: like an in-process connection, a connection and its handles belong to one
thread at a time (a lock keeps two threads' frames apart, nothing more). Give each thread
its own connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, cast

from sweepq.engine import OO, MQError, QueueInfo, Reason

from . import calls as C
from . import protocol as P
from .channels.admin import RemoteChannels
from .frames import Closed, FrameSocket

if TYPE_CHECKING:
    from sweepq.engine.api import GetCall

CONNECT_TIMEOUT = 10.0
_OK = P.OK


def connect(
    url: str,
    token: str | None = None,
    *,
    admin_token: str | None = None,
    reconnect: bool | float = False,
    tls: ssl.SSLContext | None = None,
    cafile: str | None = None,
    client: str | None = None,
    timeout: float = CONNECT_TIMEOUT,
    reply_timeout: float | None = None,
    redeliver: bool = False,
) -> ClientConnection:
    """MQCONN over the wire: a connection to the server at ``url`` (``unix:///path``,
    ``tcp://host:port``, ``tls://host:port``).

    ``token``: the server's token (TCP). ``admin_token``: for define, alter and delete.
    ``reconnect``: after a break, connect again with backoff for up to this many seconds
    (True: 30; False or 0: never, the call fails with 2009) and go on (the module docstring).
    ``tls`` / ``cafile``: how a ``tls://`` server's certificate is checked (the system's CAs
    by default). ``client``: a name the server's log and ``sweepq status`` show.
    ``timeout``: seconds to connect; ``reply_timeout``: seconds a reply may take before the
    connection counts as broken (None: no limit; a channel sets one, net/channels/).
    ``redeliver``: ``commit`` of a unit of work that a break backed out returns
    BACKED_OUT (2003) instead of raising it, for a consumer to whom its gets going back to
    the queue, to be delivered again, is the answer (``sweepq.Queue`` at-least-once).

    :raises MQError: HOST_NOT_AVAILABLE (2538) when nothing answers at ``url``;
        NOT_AUTHORIZED (2035) for a missing or wrong token; MAX_CONNS_LIMIT_REACHED (2025)
        when the server is full; PARM_VALUE_ERROR (3229) for an address of another form."""
    conn = ClientConnection(url, token, admin_token, reconnect, tls, cafile, client, timeout, reply_timeout)
    conn.redeliver = bool(redeliver)
    return conn


class ClientConnection:
    """A connection to a served queue manager (see the module docstring)."""

    def __init__(self, url, token, admin_token, reconnect, tls, cafile, client, timeout, reply_timeout=None):
        self.endpoint = C.Endpoint.of(url, token, admin_token, reconnect, tls, cafile, client, timeout)
        self._reply_timeout = reply_timeout
        self.address = self.endpoint.address
        self._lock = threading.RLock()
        self._handles: set[ClientHandle] = set()
        self._uow = C.UnitOfWork()
        self._pid = os.urandom(16)  # this connection's producer id for requests done once (net/once.py)
        self._seq = 0
        self.redeliver = False  # connect(redeliver=True): a lost unit of work's commit returns 2003
        self._aborted = False  # abort() ended it: a break it caused is not reconnected
        self._closed = False
        self._why = ""
        self._fs: FrameSocket | None = None
        self._frame = P.Framer().frame  # the connection's packer (used under the lock)
        self._fs = self._connect()

    # -- the wire -------------------------------------------------------------------------

    def _connect(self) -> FrameSocket:
        a = self.address
        try:
            if a.scheme == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.endpoint.timeout)
                sock.connect(a.path)
            else:
                sock = socket.create_connection((a.host, a.port), self.endpoint.timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self.endpoint.tls is not None:
                    sock = self.endpoint.tls.wrap_socket(sock, server_hostname=a.host)
        except (OSError, ssl.SSLError) as e:
            raise C.connect_error(a, e) from None
        fs = FrameSocket(sock, P.HELLO_MAX_FRAME, None)
        try:
            fs.send(self.endpoint.hello(cancel=False))
            op, body = fs.read()
            value = P.unpack(body)
        except (OSError, Closed, P.ProtocolError) as e:
            fs.close()
            raise C.connect_error(a, e) from None
        if op != P.OK:
            fs.close()
            P.raise_error(value)
        sock.settimeout(self._reply_timeout)
        fs.set_blocking_timeout()
        self.server = C.ServerInfo.from_reply(value)
        self._ident = self.server.ident
        fs.max_frame = self.server.max_frame
        return fs

    def _call(self, op: int, args: list):
        """One request and its reply: the result, or the MQError it carries. (The hot path of
        every call, so written flat: the frame is built and read here.) A break with
        ``reconnect`` connects again and goes on as :func:`calls.after_break` says."""
        with self._lock:  # re-entrant: a reconnect reopens the handles from inside a call
            fs = self._fs
            if fs is None:
                fs = self._revive()
            try:
                fs.sock.sendall(self._frame(op, args))
                rop, body = fs.read()
            except (OSError, Closed, P.ProtocolError) as e:
                error = self._broke(e)
                if not self.endpoint.reconnect or self._closed or self._aborted:
                    raise error from None
                return self._resume(op, args)
            value = P.unpack(body)
        if rop == _OK:
            return value
        P.raise_error(value)

    def _resume(self, op: int, args: list):
        """The request ``op`` met a break: connect again and send it again, or not."""
        try:
            self._revive()
        except MQError as e:
            if op == P.ONCE and e.reason == Reason.CONNECTION_BROKEN:
                raise C.fate_unknown(self.address, self._why, self.endpoint.reconnect) from None
            raise
        if C.after_break(op, args, self._uow) == C.DONE:
            return 0
        return self._call(op, args)

    def request(self, op: int, args: list):
        """One request of the protocol (docs/protocol.md) and its reply's value: what a
        channel speaks over a client connection (net/channels/).

        :raises MQError: the reply's error; CONNECTION_BROKEN (2009) when the connection
            broke (or the reply took longer than ``reply_timeout``)."""
        self._check()
        return self._call(op, args)

    def _run(self, spec: tuple, ident):
        """A handle's call (net/calls.py): the unit-of-work rules, the round trip, the result."""
        op, args, syncpoint, decode = spec
        uow = self._uow
        if uow.lost:
            uow.check(syncpoint)
        if self.endpoint.reconnect and C.once_op(op, args, syncpoint):
            value = self._call(P.ONCE, self._once(op, args))
        else:
            value = self._call(op, args)
        if syncpoint:
            uow.open = True
        return decode(value, ident)

    def _broke(self, why: object) -> MQError:
        """The connection broke: forget the socket; the error for the call that met it."""
        if self._fs is not None:
            self._fs.close()
            self._fs = None
        self._why = str(why)
        self._uow.broke()
        return C.broken(self.address, why, self.endpoint.reconnect)

    def _once(self, op: int, args: list) -> list:
        """ONCE's arguments for ``op`` (net/once.py): this connection's producer id, the next
        sequence number, not again."""
        self._seq += 1
        return [self._pid, self._seq, False, op, args]

    def _revive(self) -> FrameSocket:
        """The next call after a break: 2009 again, or (``reconnect``) a new connection, tried
        with backoff for up to ``reconnect`` seconds, with every handle reopened."""
        if self._closed:
            raise C.disconnected()
        attempts = C.Attempts(self.address, self._why, self.endpoint.reconnect, time.monotonic)
        while True:
            try:
                self._fs = self._connect()
                break
            except MQError as e:
                delay = attempts.wait_after(e)
            time.sleep(delay)
        for h in list(self._handles):
            try:
                h._reopen(self._call)
            except MQError as e:
                if not C.closes_on_reopen(e):
                    raise
                h._closed = True
                self._handles.discard(h)
        return self._fs

    # -- objects and units of work ------------------------------------------------------------

    def open(self, name: str, options: OO | int, selector: str | None = None) -> ClientHandle:
        """MQOPEN (see :meth:`sweepq.engine.Connection.open`); a model queue's name opens a new
        temporary dynamic queue, whose name is the handle's ``name``."""
        self._check()
        h = ClientHandle(self, name, options, selector)
        self._handles.add(h)
        return h

    def commit(self) -> Reason:
        """MQCMIT; NONE, or the warning OUTCOME_PENDING (2124) as in process."""
        self._check()
        uow = self._uow
        lost = uow.commit_lost()
        if lost is not None:
            if self.redeliver:
                return Reason.BACKED_OUT
            raise lost
        try:
            if self.endpoint.reconnect and uow.open:  # its fate must be known after a break
                reason = self._call(P.ONCE, self._once(P.COMMIT, []))
            else:
                reason = self._call(P.COMMIT, [])
        except MQError as e:
            if e.reason != Reason.BACKED_OUT:
                raise
            uow.ended()
            if self.redeliver:
                return Reason.BACKED_OUT
            raise
        uow.ended()
        return Reason(reason or 0)

    def backout(self) -> None:
        """MQBACK (a unit of work a reconnect lost is forgotten: the server backed it out)."""
        self._check()
        if self._uow.lost:
            self._uow.ended()
            return
        self._call(P.BACKOUT, [])
        self._uow.ended()

    @property
    def uncommitted(self) -> int:
        """Operations in the unit of work (in the server)."""
        self._check()
        return self._call(P.UNCOMMITTED, [])

    def disconnect(self) -> None:
        """MQDISC: the server backs out uncommitted work and closes the handles."""
        if self._closed:
            return
        self._closed = True
        for h in list(self._handles):
            h._closed = True
        self._handles.clear()
        with self._lock:
            if self._fs is not None:
                with contextlib.suppress(OSError, Closed, P.ProtocolError):
                    self._fs.send(P.request(P.BYE, []))
                    self._fs.read()
                self._fs.close()
                self._fs = None

    close = disconnect

    def abort(self) -> None:
        """From another thread: close the socket at once, so that a call blocked on it fails
        with CONNECTION_BROKEN (2009), and is not reconnected; nothing is sent (a channel being
        stopped, a queue object closing)."""
        self._aborted = True
        fs = self._fs
        if fs is not None:
            fs.close()

    def __enter__(self) -> ClientConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()

    def _check(self) -> None:
        if self._closed:
            raise C.disconnected()

    # -- administration and inquiry ------------------------------------------------------------

    def inquire_queue(self, name: str) -> QueueInfo:
        """MQINQ: a queue's attributes and counters."""
        self._check()
        return P.info_from_wire(self._call(P.INQUIRE, [name]))

    def queue_names(self) -> list[str]:
        self._check()
        return self._call(P.NAMES, [])

    def define_queue(self, name: str, **attributes) -> QueueInfo:
        """DEFINE QLOCAL (needs the admin token)."""
        self._check()
        return P.info_from_wire(self._call(P.DEFINE, [name, attributes]))

    def alter_queue(self, name: str, **attributes) -> QueueInfo:
        """ALTER QLOCAL (needs the admin token)."""
        self._check()
        return P.info_from_wire(self._call(P.ALTER, [name, attributes]))

    def delete_queue(self, name: str, purge: bool = False) -> None:
        """DELETE QLOCAL (needs the admin token)."""
        self._check()
        self._call(P.DELETE, [name, purge])

    def define_model_queue(self, name: str, dynamic_q_name: str = "AMQ.*", **attributes) -> None:
        """DEFINE QMODEL (needs the admin token)."""
        self._check()
        self._call(P.DEFINE_MODEL, [name, dynamic_q_name, attributes])

    def status(self) -> dict:
        """The server's queues and connections (what ``sweepq status`` prints)."""
        self._check()
        return self._call(P.STATUS, [])


class RemoteQueueManager:
    """A served queue manager seen from a client: the administration of
    :class:`~sweepq.engine.api.QueueAdmin` over one connection, and :meth:`connect` for more
    (what ``sweepq define / put / get / browse --server URL`` use in place of a queue manager).

    Administration needs ``admin_token``; ``token`` is the server's token (TCP)."""

    recovery = None  # nothing was opened here: a server's recovery is in its own log

    def __init__(self, url: str, token: str | None = None, admin_token: str | None = None, **options):
        self._url, self._token, self._options = url, token, options
        self._admin = connect(url, token, admin_token=admin_token, **options)
        self.name = self._admin.server.qm

    def connect(self) -> ClientConnection:
        return connect(self._url, self._token, **self._options)

    def define_queue(self, name: str, **attributes) -> QueueInfo:
        return self._admin.define_queue(name, **attributes)

    def alter_queue(self, name: str, **attributes) -> QueueInfo:
        return self._admin.alter_queue(name, **attributes)

    def delete_queue(self, name: str, purge: bool = False) -> None:
        self._admin.delete_queue(name, purge)

    def inquire_queue(self, name: str) -> QueueInfo:
        return self._admin.inquire_queue(name)

    def queue_names(self) -> list[str]:
        return self._admin.queue_names()

    def define_model_queue(self, name: str, dynamic_q_name: str = "AMQ.*", **attributes) -> None:
        self._admin.define_model_queue(name, dynamic_q_name, **attributes)

    def status(self) -> dict:
        return self._admin.status()

    # -- distributed queuing (docs/channels.md): the same calls as a QueueManager's ------------

    def dq_admin(self, action: str, name: str | None, /, **kw):
        """A channel or remote queue administration action (net/channels/admin.py ``ACTIONS``);
        ``kw`` are its arguments (``resolve`` takes one named ``action``)."""
        return self._admin.request(P.DQ_ADMIN, [action, name, kw])

    def define_channel(self, name: str, **attributes) -> dict:
        return self.dq_admin("define_channel", name, **attributes)

    def alter_channel(self, name: str, **changes) -> dict:
        return self.dq_admin("alter_channel", name, **changes)

    def delete_channel(self, name: str) -> None:
        self.dq_admin("delete_channel", name)

    def define_remote_queue(self, name: str, **attributes) -> dict:
        return self.dq_admin("define_remote_queue", name, **attributes)

    def delete_remote_queue(self, name: str) -> None:
        self.dq_admin("delete_remote_queue", name)

    def alter_qmgr(self, **changes) -> dict:
        return self.dq_admin("alter_qmgr", None, **changes)

    @property
    def channels(self) -> RemoteChannels:
        """The server's channel agents: start, stop, status, reset, resolve."""
        return RemoteChannels(self._admin.request)

    def close(self) -> None:
        self._admin.disconnect()

    def __enter__(self) -> RemoteQueueManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ClientHandle(C.HandleCalls):
    """An open queue on a served queue manager: the calls of :class:`sweepq.engine.Handle`
    (put, put_many, get, get_many: net/calls.py ``HandleCalls``), each one round trip."""

    __slots__ = ("_closed", "_conn", "_hid", "_ident", "_open_args", "name", "options")

    # What type checkers see of get: engine/api.py's GetCall, as for the in-process Handle.
    get = cast("GetCall", C.HandleCalls.get)

    def __init__(self, conn: ClientConnection, name, options, selector):
        self._conn = conn
        self._open_args = [name, options, selector]
        self._closed = False
        self._reopen(conn._call)

    def _reopen(self, call) -> None:
        """Open on the server (again, after a reconnect: ``call`` without taking the lock)."""
        hid, name, options = call(P.OPEN, self._open_args)
        self._hid = hid
        self.name = name
        self.options = C.open_options(options)
        self._ident = self._conn._ident

    def _closed_error(self) -> MQError:
        return C.disconnected() if self._conn._closed else C.handle_closed(self.name)

    def close(self) -> Reason:
        """MQCLOSE; uncommitted work stays with the connection's unit of work."""
        if self._closed:
            raise C.closed_twice(self.name)
        self._closed = True
        self._conn._handles.discard(self)
        return Reason(self._conn._call(P.CLOSE, [self._hid]))

    def __enter__(self) -> ClientHandle:
        return self

    def __exit__(self, *exc) -> None:
        if self._closed:
            return
        if exc[0] is None:
            self.close()
        else:  # the block failed (perhaps on a broken connection): close without masking it
            with contextlib.suppress(MQError):
                self.close()
