"""Reading and writing frames (net/protocol.py) on a blocking socket: the server's sessions
and the thread client share it.

A frame's length is checked against ``max_frame`` from its header, before any memory is set
aside for its body. Waiting for the *next* frame has no time limit (an idle connection may
stay idle); once part of a frame has arrived, the rest must come within ``partial_timeout``
seconds, so a peer that sends half a frame and stops costs one closed connection.

Not thread-safe: one reader and one writer at a time (the session or client holds it).
"""

from __future__ import annotations

import contextlib
import socket

from .protocol import HEADER, HEADER_LEN, VERSION, ProtocolError

CLIENT_BUFFER = 256 * 1024  # a client reads batches of messages
SERVER_BUFFER = 16 * 1024  # a server holds one per connection, most of them idle: larger frames
# are read into a buffer of their own (read_big)


class Closed(Exception):
    """The peer closed the connection (between frames or in the middle of one)."""


class FrameSocket:
    def __init__(
        self, sock: socket.socket, max_frame: int, partial_timeout: float | None = 30.0, buffer: int = CLIENT_BUFFER
    ):
        self.sock = sock
        self.max_frame = max_frame
        self.partial_timeout = partial_timeout
        self._buf = bytearray(buffer)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._timeout = sock.gettimeout()

    def set_blocking_timeout(self) -> None:
        """Take note of the socket's timeout (set by the caller): with one set, every wait has
        that limit and ``partial_timeout`` is not applied on top."""
        self._timeout = self.sock.gettimeout()

    def buffered(self) -> bool:
        """Whether bytes of a next frame have already been read (or an SSL layer holds some)."""
        pending = getattr(self.sock, "pending", None)
        return self._end > self._start or bool(pending and pending())

    def _recv(self, partial: bool) -> None:
        """Read more bytes after ``_end`` (compacting first when the buffer's tail is full)."""
        if self._end == len(self._buf):
            n = self._end - self._start
            self._buf[:n] = self._buf[self._start : self._end]
            self._start, self._end = 0, n
        if partial and self.partial_timeout is not None and self._timeout is None:
            self.sock.settimeout(self.partial_timeout)
            try:
                got = self.sock.recv_into(self._view[self._end :])
            except TimeoutError:
                raise ProtocolError(f"half a frame, then nothing for {self.partial_timeout:g} s") from None
            finally:
                self.sock.settimeout(None)
        else:
            got = self.sock.recv_into(self._view[self._end :])
        if not got:
            raise Closed("the peer closed the connection" + (" in the middle of a frame" if partial else ""))
        self._end += got

    def read(self) -> tuple[int, memoryview | bytearray]:
        """The next frame: ``(op, body)``. ``body`` is valid until the next call.

        :raises Closed: the peer closed the connection.
        :raises ProtocolError: a frame that breaks the protocol (too long, wrong version,
            or half a frame and silence)."""
        while self._end - self._start < HEADER_LEN:
            self._recv(self._end > self._start)
        n, version, op = HEADER.unpack_from(self._buf, self._start)
        if version != VERSION:
            raise ProtocolError(f"protocol version {version}; this side speaks version {VERSION}")
        if n > self.max_frame:
            raise ProtocolError(f"a frame of {n:,} bytes, over the limit of {self.max_frame:,}")
        total = HEADER_LEN + n
        if total > len(self._buf):
            return op, self._read_big(n)
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

    def _read_big(self, n: int) -> bytearray:
        """A body longer than the buffer, read into a bytearray of its own size."""
        out = bytearray(n)
        have = min(self._end - self._start - HEADER_LEN, n)
        out[:have] = self._buf[self._start + HEADER_LEN : self._start + HEADER_LEN + have]
        self._start = self._end = 0
        view = memoryview(out)
        while have < n:
            if self.partial_timeout is not None and self._timeout is None:
                self.sock.settimeout(self.partial_timeout)
            try:
                got = self.sock.recv_into(view[have:])
            except TimeoutError:
                raise ProtocolError(f"half a frame, then nothing for {self.partial_timeout:g} s") from None
            finally:
                if self.partial_timeout is not None and self._timeout is None:
                    self.sock.settimeout(None)
            if not got:
                raise Closed("the peer closed the connection in the middle of a frame")
            have += got
        return out

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
