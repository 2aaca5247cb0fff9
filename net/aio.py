"""The asyncio client: ``await sweepq.aio.connect(url)``, then the connection API with ``await``.

The calls, their arguments, results and MQError reasons are the thread client's
(net/client.py, the same net/calls.py under both); what differs is that every call is a
coroutine and the connection is an ``async with`` context, as are its handles::

    async with await sweepq.aio.connect("unix:///var/lib/app/q/sweepq.sock") as conn:
        async with await conn.open("ORDERS", OO.INPUT_SHARED) as h:
            m = await h.get(GMO.WAIT, wait_interval=5000)

A get with WAIT waits in the server and never blocks the event loop. Cancelling it (a task's
``cancel()``, ``asyncio.timeout``) tells the server, which ends the wait having taken
nothing: the coroutine raises ``CancelledError``. If the server had already taken a message
when the cancel reached it, the get is complete and returns that message (as a task that
finished before ``cancel()`` does): a message is never taken and dropped. Cancelling any other
call lets it finish in the server; its reply is read and dropped before the next call.

One call at a time per connection (an ``asyncio.Lock`` orders concurrent coroutines); use
several connections for parallel calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time

from sweepq.engine import OO, MQError, QueueInfo, Reason

from . import calls as C
from . import protocol as P


async def connect(
    url: str,
    token: str | None = None,
    *,
    admin_token: str | None = None,
    reconnect: bool | float = False,
    tls: ssl.SSLContext | None = None,
    cafile: str | None = None,
    client: str | None = None,
    timeout: float = 10.0,
    redeliver: bool = False,
) -> AsyncConnection:
    """MQCONN over the wire, for asyncio: the arguments and errors of
    :func:`sweepq.client.connect`."""
    conn = AsyncConnection(url, token, admin_token, reconnect, tls, cafile, client, timeout)
    conn.redeliver = bool(redeliver)
    await conn._connect()
    return conn


class AsyncConnection:
    """A connection to a served queue manager, for asyncio (see the module docstring)."""

    def __init__(self, url, token, admin_token, reconnect, tls, cafile, client, timeout):
        self.endpoint = C.Endpoint.of(url, token, admin_token, reconnect, tls, cafile, client, timeout)
        self.address = self.endpoint.address
        self._lock = asyncio.Lock()
        self._handles: set[AsyncHandle] = set()
        self._uow = C.UnitOfWork()
        self._pid = os.urandom(16)  # this connection's producer id for requests done once (net/once.py)
        self._seq = 0
        self.redeliver = False  # connect(redeliver=True): a lost unit of work's commit returns 2003
        self._breaks = 0  # breaks so far: tells a break from an error the server sent
        self._closed = False
        self._why = ""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: asyncio.Task | None = None  # the reply of a cancelled call, still to come
        self.server: C.ServerInfo | None = None

    # -- the wire -------------------------------------------------------------------------------

    async def _connect(self) -> None:
        a = self.address
        try:
            if a.scheme == "unix":
                opening = asyncio.open_unix_connection(a.path)
            else:
                opening = asyncio.open_connection(a.host, a.port, ssl=self.endpoint.tls)
            reader, writer = await asyncio.wait_for(opening, self.endpoint.timeout)
        except (OSError, ssl.SSLError, TimeoutError) as e:
            raise C.connect_error(a, e) from None
        self._reader, self._writer = reader, writer
        writer.write(self.endpoint.hello(cancel=True))
        try:
            op, value = await self._read(P.HELLO_MAX_FRAME)
        except MQError:
            self._drop()
            raise
        if op != P.OK:
            self._drop()
            P.raise_error(value)
        self.server = C.ServerInfo.from_reply(value)

    async def _read(self, limit: int) -> tuple[int, object]:
        try:
            header = await self._reader.readexactly(P.HEADER_LEN)
            n, version, op = P.HEADER.unpack(header)
            if version != P.VERSION or n > limit:
                raise P.ProtocolError(f"a reply of version {version} and {n:,} bytes")
            body = await self._reader.readexactly(n)
            return op, P.unpack(body)
        except (OSError, asyncio.IncompleteReadError, P.ProtocolError) as e:
            raise self._broke(e) from None

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    def _broke(self, why: object) -> MQError:
        self._drop()
        self._why = str(why) or type(why).__name__
        self._breaks += 1
        self._uow.broke()
        return C.broken(self.address, self._why, self.endpoint.reconnect)

    async def _call(self, op: int, args: list, cancellable: bool = False):
        async with self._lock:
            return await self._exchange(op, args, cancellable)

    async def _exchange(self, op: int, args: list, cancellable: bool = False):
        if self._pending is not None:  # a cancelled call's reply: read and dropped
            pending, self._pending = self._pending, None
            with contextlib.suppress(MQError):
                await pending
        if self._writer is None:
            await self._revive()
        breaks = self._breaks
        try:
            self._writer.write(P.request(op, args))
            reply = asyncio.ensure_future(self._read(self.server.max_frame))
            try:
                rop, value = await asyncio.shield(reply)
            except asyncio.CancelledError:
                if not cancellable:
                    self._pending = reply
                    raise
                rop, value = await self._cancel(reply)
        except MQError:
            if self._breaks == breaks or not self.endpoint.reconnect or self._closed:
                raise
            return await self._resume(op, args, cancellable)
        if rop == P.OK:
            return value
        P.raise_error(value)

    async def _cancel(self, reply: asyncio.Task) -> tuple[int, object]:
        """Cancel a waiting get: the server ends it and replies "cancelled" (nothing taken:
        CancelledError goes on) or with the message it took before the cancel came."""
        if self._writer is not None:
            self._writer.write(P.frame(P.CANCEL))
        try:
            rop, value = await reply
        except asyncio.CancelledError:  # cancelled again: leave the reply to the next call
            self._pending = reply
            raise
        if rop == P.ERROR and isinstance(value, list) and value and value[0] == Reason.NO_MSG_AVAILABLE:
            raise asyncio.CancelledError
        return rop, value

    async def _resume(self, op: int, args: list, cancellable: bool):
        """The request ``op`` met a break: connect again and send it again, or not
        (net/calls.py ``after_break``)."""
        try:
            await self._revive()
        except MQError as e:
            if op == P.ONCE and e.reason == Reason.CONNECTION_BROKEN:
                raise C.fate_unknown(self.address, self._why, self.endpoint.reconnect) from None
            raise
        if C.after_break(op, args, self._uow) == C.DONE:
            return 0
        return await self._exchange(op, args, cancellable)

    async def _revive(self) -> None:
        """A new connection after a break, tried with backoff for up to ``reconnect``
        seconds, with every handle reopened (2009 without ``reconnect``)."""
        if self._closed:
            raise C.disconnected()
        attempts = C.Attempts(self.address, self._why, self.endpoint.reconnect, time.monotonic)
        while True:
            try:
                await self._connect()
                break
            except MQError as e:
                delay = attempts.wait_after(e)
            await asyncio.sleep(delay)
        for h in list(self._handles):
            try:
                await h._reopen(self._exchange)
            except MQError as e:
                if not C.closes_on_reopen(e):
                    raise
                h._closed = True
                self._handles.discard(h)

    async def _run(self, spec: tuple, ident):
        """A handle's call (net/calls.py): the unit-of-work rules, the round trip, the result."""
        op, args, syncpoint, decode = spec
        uow = self._uow
        if uow.lost:
            uow.check(syncpoint)
        waits = op == P.GET and C.waits(args[1])
        if self.endpoint.reconnect and C.once_op(op, args, syncpoint):
            value = await self._call(P.ONCE, self._once(op, args), waits)
        else:
            value = await self._call(op, args, waits)
        if syncpoint:
            uow.open = True
        return decode(value, ident)

    # -- objects and units of work ------------------------------------------------------------

    async def open(self, name: str, options: OO | int, selector: str | None = None) -> AsyncHandle:
        self._check()
        h = AsyncHandle(self, name, options, selector)
        await h._reopen(self._call)
        self._handles.add(h)
        return h

    def _once(self, op: int, args: list) -> list:
        """ONCE's arguments for ``op`` (net/once.py), as the thread client's."""
        self._seq += 1
        return [self._pid, self._seq, False, op, args]

    async def commit(self) -> Reason:
        self._check()
        uow = self._uow
        lost = uow.commit_lost()
        if lost is not None:
            if self.redeliver:
                return Reason.BACKED_OUT
            raise lost
        try:
            if self.endpoint.reconnect and uow.open:  # its fate must be known after a break
                reason = await self._call(P.ONCE, self._once(P.COMMIT, []))
            else:
                reason = await self._call(P.COMMIT, [])
        except MQError as e:
            if e.reason != Reason.BACKED_OUT:
                raise
            uow.ended()
            if self.redeliver:
                return Reason.BACKED_OUT
            raise
        uow.ended()
        return Reason(reason or 0)

    async def backout(self) -> None:
        self._check()
        if self._uow.lost:
            self._uow.ended()
            return
        await self._call(P.BACKOUT, [])
        self._uow.ended()

    async def uncommitted(self) -> int:
        """Operations in the unit of work (in the server)."""
        self._check()
        return await self._call(P.UNCOMMITTED, [])

    async def disconnect(self) -> None:
        """MQDISC: the server backs out uncommitted work and closes the handles."""
        if self._closed:
            return
        self._closed = True
        for h in list(self._handles):
            h._closed = True
        self._handles.clear()
        if self._writer is not None:
            with contextlib.suppress(MQError, OSError):
                async with self._lock:
                    self._writer.write(P.request(P.BYE, []))
                    await self._read(P.HELLO_MAX_FRAME)
            self._drop()

    close = disconnect

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.disconnect()

    def _check(self) -> None:
        if self._closed:
            raise C.disconnected()

    # -- administration and inquiry ---------------------------------------------------------

    async def inquire_queue(self, name: str) -> QueueInfo:
        self._check()
        return P.info_from_wire(await self._call(P.INQUIRE, [name]))

    async def queue_names(self) -> list[str]:
        self._check()
        return await self._call(P.NAMES, [])

    async def status(self) -> dict:
        self._check()
        return await self._call(P.STATUS, [])


class AsyncHandle(C.HandleCalls):
    """An open queue, for asyncio: the calls of :class:`sweepq.engine.Handle` (net/calls.py
    ``HandleCalls``), each returning an awaitable."""

    __slots__ = ("_closed", "_conn", "_hid", "_ident", "_open_args", "name", "options")

    def __init__(self, conn: AsyncConnection, name, options, selector):
        self._conn = conn
        self._open_args = [name, options, selector]
        self._closed = False

    async def _reopen(self, call) -> None:
        hid, name, options = await call(P.OPEN, self._open_args)
        self._hid = hid
        self.name = name
        self.options = C.open_options(options)
        self._ident = self._conn.server.ident

    def _closed_error(self) -> MQError:
        return C.disconnected() if self._conn._closed else C.handle_closed(self.name)

    async def close(self) -> Reason:
        if self._closed:
            raise C.closed_twice(self.name)
        self._closed = True
        self._conn._handles.discard(self)
        return Reason(await self._conn._call(P.CLOSE, [self._hid]))

    async def __aenter__(self) -> AsyncHandle:
        return self

    async def __aexit__(self, *exc) -> None:
        if self._closed:
            return
        with contextlib.suppress(MQError) if exc[0] is not None else contextlib.nullcontext():
            await self.close()
