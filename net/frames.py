"""Reading and writing frames (net/protocol.py) on a blocking socket: the server's sessions
and the thread client share it.

A frame's length is checked against ``max_frame`` from its header, and **memory for its body
follows the bytes that arrive**: a body that fits the connection's own read buffer is read
there; a longer one grows a buffer of its own as its bytes come in, never ahead of them, so
a header that claims the largest frame costs nothing until the bytes are sent. On the
server, what such a buffer holds is taken from a :class:`FrameMemory`, the one bound for
the whole server (at most :data:`GROW` ahead of the bytes); when it is spent, the connection
waits (``wait`` seconds) for another's frame to be done, and then reads the rest of the
frame into its read buffer, dropping it, and the call fails with
MQRC_STORAGE_NOT_AVAILABLE (2071) saying why (:class:`FrameRefused`): the connection goes
on, and memory stays bounded. Per connection the bound is ``max_frame``.

Waiting for the *next* frame has no time limit here (an idle connection may stay idle,
unless the server's ``idle_timeout`` says otherwise); once part of a frame has arrived, each
read of the rest must bring bytes within ``partial_timeout`` seconds, so a peer that sends
half a frame and stops costs one closed connection. On the server (given a ``clock``) the
socket also notes when a frame's first bytes came (``frame_since``) and when the last whole
frame did (``active_at``): the server's door closes a connection whose frame takes longer
than ``frame_timeout`` however its bytes are spread (one byte a second resets no deadline),
and one idle for longer than ``idle_timeout`` (net/server.py ``reap``).

Not thread-safe: one reader and one writer at a time (the session or client holds it).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Protocol

import cython
from cython import compiled as COMPILED

from .protocol import HEADER, HEADER_LEN, VERSION, ProtocolError, unpack

if COMPILED:  # the C functions the compiled form calls (net/frames.pxd; forms.py)
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.errno import EAGAIN, EINTR, errno  # EWOULDBLOCK is EAGAIN on Linux
    from cython.cimports.sweepq.net.csocket import MSG_DONTWAIT, MSG_NOSIGNAL, recv, send
    from cython.cimports.sweepq.net.protocol import unpack_buffer

_NOWAIT = socket.MSG_DONTWAIT  # the flag of the interpreted form's reads and writes that never wait

CLIENT_BUFFER = 256 * 1024  # a client reads batches of messages
SERVER_BUFFER = 16 * 1024  # a server holds one per connection, most of them idle: larger frames
# are read into a buffer of their own, which grows as their bytes arrive
GROW = 256 * 1024  # how far ahead of the bytes that came a large frame takes frame memory (fewer takes)


class Closed(Exception):
    """The peer closed the connection (between frames or in the middle of one)."""


class FrameRefused(ProtocolError):
    """A frame was read and dropped: the server's memory for frames was in use for longer than
    the wait. ``op`` is the request's op; the connection stays usable (the session answers
    the request with MQRC_STORAGE_NOT_AVAILABLE, 2071)."""

    def __init__(self, op: int, size: int, text: str):
        super().__init__(text)
        self.op = op
        self.size = size


class FrameMemory:
    """The bytes the server's connections may hold at once for frame bodies longer than their
    read buffers (``limit``), taken as the bytes arrive and given back when the frame has been
    handled. A connection that finds it spent waits up to ``wait`` seconds for some to come
    back. Thread-safe: every session takes from the one instance."""

    def __init__(self, limit: int, wait: float = 10.0):
        self.limit = limit
        self.wait = wait
        self.used = 0
        self.peak = 0
        self.refused = 0
        self.waiting = 0  # connections waiting for some to come back
        self._cond = threading.Condition()

    def take(self, n: int, own: int) -> bool:
        """Take ``n`` more bytes for a frame that holds ``own`` already; False when they did not
        come within the wait (or never can: the frame alone would be over the limit)."""
        with self._cond:
            if own + n > self.limit:
                self.refused += 1
                return False
            deadline = None
            while self.used + n > self.limit:
                now = time.monotonic()
                deadline = deadline or now + self.wait
                if now >= deadline:
                    self.refused += 1
                    return False
                self.waiting += 1
                try:
                    self._cond.wait(deadline - now)
                finally:
                    self.waiting -= 1
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        if n:
            with self._cond:
                self.used -= n
                self._cond.notify_all()


class Clock(Protocol):
    """Monotonic seconds (net/server.py's clock)."""

    def now(self) -> float: ...


SMALL_BODY = 4096
"""A frame body up to this long is returned as bytes of its own by the compiled form (one
allocation and a copy, cheaper than a memoryview's slice); a longer one as a view of the read
buffer in both forms."""
_HEAD = HEADER_LEN  # the header's length and SMALL_BODY as C integers in the compiled form
_SMALL = SMALL_BODY
_NONE = -1  # FrameSocket._ready_at: no whole frame buffered
_REST = -2  # FrameSocket._ready_at: a header for _read_rest to check


class FrameSocket:
    """Frames on one socket (see the module docstring). ``idle``: whether ``active_at`` is kept
    (with a clock): only a server with an ``idle_timeout`` reads it, and reading the clock after
    each frame is a call per request."""

    def __init__(
        self,
        sock: socket.socket,
        max_frame: int,
        partial_timeout: float | None = 30.0,
        buffer: int = CLIENT_BUFFER,
        memory: FrameMemory | None = None,
        clock: Clock | None = None,
        idle: bool = True,
    ):
        self.sock = sock
        self.clock = clock
        self.frame_since: float | None = None  # when the frame being read began to arrive (with a clock)
        self.active_at = clock.now() if clock is not None else 0.0  # when the last whole frame came
        self._idle_clock = clock if idle else None  # the clock active_at is read from, if kept
        self._sock_recv_into = sock.recv_into  # the one call of every request's read, looked up once
        self._fd = sock.fileno()
        self.max_frame = max_frame
        self.partial_timeout = partial_timeout
        self.memory = memory
        self._held = 0  # bytes of ``memory`` the last large frame took
        self.receiving = 0  # the length of the large frame being read now (``sweepq status``)
        self._buf = bytearray(buffer)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._drained = False  # read_ready's last read took less than the buffer: the socket was empty
        self._timeout = sock.gettimeout()
        # The frame ready_op took, until ready_value decodes it: its op, where its body starts
        # in the buffer and its length (start -1: the body is ``_ready_body``).
        self._ready_op = 0
        self._ready_start = -1
        self._ready_n = 0
        self._ready_body: object = None

    def set_blocking_timeout(self) -> None:
        """Take note of the socket's timeout (set by the caller): with one set, every wait has
        that limit and ``partial_timeout`` is not applied on top."""
        self._timeout = self.sock.gettimeout()

    def buffered(self) -> bool:
        """Whether bytes of a next frame have already been read (or an SSL layer holds some)."""
        pending = getattr(self.sock, "pending", None)
        return self._end > self._start or bool(pending and pending())

    def release(self) -> None:
        """Give back what the last large frame took of the server's frame memory (its body is
        no longer referenced). The next :meth:`read` does it too."""
        if self._held and self.memory is not None:
            self.memory.give(self._held)
        self._held = 0

    def _recv_into(self, view: memoryview, partial: bool) -> int:
        """Read into ``view``; within ``partial_timeout`` when part of a frame has come."""
        if partial and self.partial_timeout is not None and self._timeout is None:
            self.sock.settimeout(self.partial_timeout)
            try:
                got = self.sock.recv_into(view)
            except TimeoutError:
                raise ProtocolError(f"half a frame, then nothing for {self.partial_timeout:g} s") from None
            finally:
                self.sock.settimeout(None)
        else:
            got = self.sock.recv_into(view)
        if not got:
            raise Closed("the peer closed the connection" + (" in the middle of a frame" if partial else ""))
        return got

    def _recv(self, partial: bool) -> None:
        """Read more bytes after ``_end`` (compacting first when the buffer's tail is full)."""
        if self._end == len(self._buf):
            n = self._end - self._start
            self._buf[:n] = self._buf[self._start : self._end]
            self._start, self._end = 0, n
        self._end += self._recv_into(self._view[self._end :], partial)

    def read(self) -> tuple[int, memoryview | bytearray | bytes]:
        """The next frame: ``(op, body)``. ``body`` is valid until the next call.

        :raises Closed: the peer closed the connection.
        :raises FrameRefused: a large frame read and dropped for want of frame memory.
        :raises ProtocolError: a frame that breaks the protocol (too long, wrong version,
            or half a frame and silence)."""
        if self._held:
            self.release()
        if self._start == self._end:
            # Nothing buffered, the usual state between calls: one read at the buffer's start
            # (waiting for a next frame has no time limit), and when it brought the whole
            # frame, as it does for every small one, the frame is returned from here.
            got = self._sock_recv_into(self._buf)
            if not got:
                raise Closed("the peer closed the connection")
            self._start, self._end = 0, got
            if got >= _HEAD:
                if COMPILED:  # the header read in place: no tuple, no call
                    p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(self._buf))
                    n = (cython.cast(cython.Py_ssize_t, p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]
                    version = p[4]
                    op = p[5]
                else:
                    n, version, op = HEADER.unpack_from(self._buf)
                total = _HEAD + n
                if total <= got and version == VERSION and n <= self.max_frame:
                    if total == got:
                        self._end = 0
                    else:
                        self._start = total
                    if self._idle_clock is not None:
                        self.active_at = self._idle_clock.now()
                    if COMPILED and n <= _SMALL:
                        return op, PyBytes_FromStringAndSize(cython.cast(cython.p_char, p) + _HEAD, n)
                    return op, self._view[_HEAD:total]
        if self.clock is not None:
            self.frame_since = self.clock.now()
        try:
            op, body = self._read_rest()
        finally:
            self.frame_since = None
        if self._idle_clock is not None:
            self.active_at = self._idle_clock.now()
        return op, body

    def _read_rest(self) -> tuple[int, memoryview | bytearray]:
        """The frame whose first bytes (if any) are buffered: its header, then its body."""
        while self._end - self._start < HEADER_LEN:
            self._recv(self._end > self._start)
        n, version, op = HEADER.unpack_from(self._buf, self._start)
        if version != VERSION:
            raise ProtocolError(f"protocol version {version}; this side speaks version {VERSION}")
        if n > self.max_frame:
            raise ProtocolError(f"a frame of {n:,} bytes, over the limit of {self.max_frame:,}")
        total = HEADER_LEN + n
        if total > len(self._buf):
            return op, self._read_big(op, n)
        while self._end - self._start < total:
            if self._start + total > len(self._buf):  # make room: the frame fits once compacted
                have = self._end - self._start
                self._buf[:have] = self._buf[self._start : self._end]
                self._start, self._end = 0, have
            self._recv(True)
        body = self._view[self._start + HEADER_LEN : self._start + total]
        self._start += total
        if self._start == self._end:
            self._start = self._end = 0
        return op, body

    def _read_big(self, op: int, n: int) -> bytearray:
        """A body longer than the read buffer: a bytearray that grows as its bytes arrive,
        each step taken from the server's frame memory once the bytes are here (at most
        :data:`GROW` ahead of them), so a header alone takes nothing."""
        body = bytearray(self._view[self._start + HEADER_LEN : self._end])  # came with the header
        self._start = self._end = 0
        self.receiving = n
        try:
            while len(body) < n:
                got = self._recv_into(self._view[: min(n - len(body), len(self._buf))], True)
                have = len(body) + got
                if self.memory is not None and have > self._held:
                    more = min(n, have + GROW) - self._held
                    if not self.memory.take(more, self._held):
                        return self._refuse(op, n, have)
                    self._held += more
                body += self._view[:got]
        finally:
            self.receiving = 0
        return body

    def _refuse(self, op: int, n: int, have: int):
        """Read the rest of the frame into the read buffer, dropping it, then say why."""
        self.release()
        left = n - have
        while left:
            left -= self._recv_into(self._view[: min(left, len(self._buf))], True)
        m = self.memory
        if n > m.limit:
            why = f"this frame of {n:,} bytes is larger than the server's memory for large frames ({m.limit:,} bytes)"
            raise FrameRefused(op, n, f"{why}: it was read and dropped; the server's frame_memory must be raised")
        raise FrameRefused(
            op,
            n,
            f"the server's memory for large frames ({m.limit:,} bytes) was in use by other connections for "
            f"{m.wait:g} s: this frame of {n:,} bytes was read and dropped; try again",
        )

    # -- the server's loop (net/loop.py): reads and writes that never wait ----------------------

    def read_ready(self) -> tuple | None:
        """The next frame if all its bytes are here, reading what the socket holds without
        waiting when nothing is buffered: ``(op, body)`` as :meth:`read` returns it, or None
        when no whole frame is buffered (nothing came, or part of one: :meth:`partial`).
        A socket of the loop stays blocking: each read passes MSG_DONTWAIT, so a thread may
        take the connection over between two reads (net/session.py). After a read that
        left the socket empty, the call that finds its frames all served returns None
        without reading: called again only when epoll says the socket has bytes.

        :raises Closed: the peer closed the connection.
        :raises ProtocolError: a header that breaks the protocol (:meth:`read`'s checks)."""
        start = self._ready_at()
        if start == _NONE:
            return None
        if start == _REST:
            return self._read_rest()  # the checks and their errors are :meth:`read`'s (it raises)
        n = self._ready_n
        if COMPILED and n <= _SMALL:
            p = cython.cast(cython.p_char, PyByteArray_AS_STRING(self._buf))
            return self._ready_op, PyBytes_FromStringAndSize(p + start, n)
        return self._ready_op, self._view[start : start + n]

    def ready_op(self) -> int:
        """:meth:`read_ready` for the loop's request path (net/session.py): the next whole
        frame's op, its body kept for :meth:`ready_value`; -1 where read_ready returns None.
        Compiled, a small body stays where it lies in the read buffer until ready_value
        decodes it from there, where read_ready copies it to bytes of its own first.

        :raises Closed, ProtocolError: as :meth:`read_ready`."""
        self._ready_body = None
        start = self._ready_at()
        if start == _NONE:
            return -1
        if start == _REST:
            self._ready_op, self._ready_body = self._read_rest()
            start = -1
        self._ready_start = start
        return self._ready_op

    def ready_value(self) -> object:
        """The body of the frame :meth:`ready_op` took, decoded (net/protocol.py ``unpack``);
        called before anything else reads from the socket.

        :raises ProtocolError: a body that is not one MessagePack value."""
        start, n = self._ready_start, self._ready_n
        if start < 0:
            body, self._ready_body = self._ready_body, None
            return unpack(body)
        if COMPILED and n <= _SMALL:
            return unpack_buffer(cython.cast(cython.p_uchar, PyByteArray_AS_STRING(self._buf)) + start, n)
        return unpack(self._view[start : start + n])

    def _ready_at(self) -> int:
        """Where the next whole buffered frame's body starts in the buffer (its op and length
        in ``_ready_op`` and ``_ready_n``; the frame taken off the buffer), reading what the
        socket holds as :meth:`read_ready` says; -1 when no whole frame is buffered, -2 when
        its header is for :meth:`_read_rest` to check."""
        if self._held:
            self.release()
        if self._start == self._end:
            if self._drained:
                # The last read left the socket empty and every frame it brought is served: a
                # read now would almost always find nothing, a system call per request for
                # the loop's lone clients. What came since, the loop's epoll (level-triggered)
                # reports at its next wait.
                self._drained = False
                return _NONE
            got = self._recv_nowait()
            if got < 0:
                return _NONE
            if not got:
                raise Closed("the peer closed the connection")
            self._start, self._end = 0, got
            self._drained = got < len(self._buf)
        have = self._end - self._start
        if have < _HEAD:
            return _NONE
        if COMPILED:
            p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(self._buf)) + self._start
            n = (cython.cast(cython.Py_ssize_t, p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]
            version = p[4]
            op = p[5]
        else:
            n, version, op = HEADER.unpack_from(self._buf, self._start)
        if version != VERSION or n > self.max_frame:
            return _REST
        total = _HEAD + n
        if total > have:
            return _NONE
        start = self._start
        if total == have:
            self._start = self._end = 0
        else:
            self._start = start + total
        if self._idle_clock is not None:
            self.active_at = self._idle_clock.now()
        self._ready_op, self._ready_n = op, n
        return start + _HEAD

    def partial(self) -> bool:
        """Whether part of a next frame is buffered (after :meth:`read_ready` returned None)."""
        return self._end > self._start

    def fill(self) -> None:
        """Wait for the socket's next bytes and read them into the buffer, for :meth:`ready_op`
        to serve: a lone connection's thread waits here where the loop waits in epoll
        (net/session.py ``run_alone``). Called with nothing buffered (:meth:`partial` false).

        :raises Closed: the peer closed the connection."""
        assert self._start == self._end, "fill() with bytes still buffered"
        if self._held:
            self.release()
        got = self._sock_recv_into(self._buf)
        if not got:
            raise Closed("the peer closed the connection")
        self._start, self._end = 0, got
        self._drained = got < len(self._buf)  # as after read_ready's read: the socket is empty

    def _recv_nowait(self) -> int:
        """Read into the buffer's start what the socket holds: the count, 0 at the peer's end,
        -1 when nothing has come (the compiled form calls recv(2) itself, holding the GIL: it
        cannot wait)."""
        if COMPILED:
            while True:
                got = recv(self._fd, PyByteArray_AS_STRING(self._buf), len(self._buf), MSG_DONTWAIT)
                if got >= 0:
                    return got
                if errno == EAGAIN:
                    return -1
                if errno != EINTR:
                    raise OSError(errno, os.strerror(errno))
        try:
            return self._sock_recv_into(self._buf, 0, _NOWAIT)
        except BlockingIOError:
            return -1

    def send_ready(self, data: bytes) -> int:
        """Send what the socket takes of ``data`` now, without waiting: the count sent."""
        if COMPILED:
            return _send_nowait(self._fd, PyBytes_AS_STRING(data), len(data))
        try:
            return self.sock.send(data, _NOWAIT)
        except BlockingIOError:
            return 0

    def send_ready_from(self, buf: bytearray, n: int) -> int:
        """:meth:`send_ready` of ``buf[:n]`` (a reply packed in place: net/protocol.py
        ``Framer.frame_kept``), with no copy made of it."""
        if COMPILED:
            return _send_nowait(self._fd, PyByteArray_AS_STRING(buf), n)
        try:
            return self.sock.send(memoryview(buf)[:n], _NOWAIT)
        except BlockingIOError:
            return 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown(self) -> None:
        """End the connection from any thread without closing the socket: a read or write under
        way fails (or the loop sees the end), and the socket's owner closes it (:meth:`close`),
        so that its descriptor is never reused while the loop still watches it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the socket (any thread may: a read under way then fails). What the last large
        frame took of the frame memory is given back by the reading thread (:meth:`release`)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _send_nowait(fd: int, p, n: int) -> int:
    """The compiled form's send(2) of ``n`` bytes at ``p`` without waiting, holding the GIL:
    the count sent, 0 when the socket takes nothing now."""
    while True:
        sent = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
        if sent >= 0:
            return sent
        if errno == EAGAIN:
            return 0
        if errno != EINTR:
            raise OSError(errno, os.strerror(errno))
