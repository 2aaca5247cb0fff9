"""The door of the server: its listeners and every connection that has not finished its
handshake (TLS on a TCP listener with a certificate, then the HELLO frame), all on one thread.

Why one thread with a selector rather than a thread per connection from the start: until it
has shown a token, a connection must not cost the server anything it can run out of. Here it
costs its socket and the bytes it has sent (at most one HELLO frame, 64 KiB; the buffer grows
with the bytes), and no thread; a session thread is started only for a connection that the
server has admitted (net/server.py ``welcome``), so the connection limit counts only those.

The promises (docs/clients.md "Limits"), each kept here:

* **a deadline for the whole handshake**: TLS and HELLO complete within ``hello_timeout``
  seconds of the accept, however the bytes trickle in (one byte a second gains nothing);
  past it the connection is closed. Time is the server's ``clock`` (the real one unless a
  test gives a ManualClock), never the queue manager's, whose virtual time may run fast;
* **at most ``max_handshakes`` connections in their handshake**: one more closes the oldest
  of them (it has had the longest to finish), so slow or silent clients never keep a
  legitimate one out: it finishes in a few milliseconds, long before it is the oldest. Bytes
  that arrived are read before new connections are accepted, and at most half the limit is
  accepted per turn, so a flood of new connections cannot push out one whose HELLO is there;
* the HELLO frame is checked as it comes: the header first (protocol version, op HELLO, at
  most 64 KiB), then the body, read exactly, so nothing after it is taken from the session.

Thread safety: the door's own thread runs everything here; :meth:`close` and :meth:`counts`
may be called from any thread.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
from typing import TYPE_CHECKING

from . import protocol as P

if TYPE_CHECKING:
    from .server import Server

TICK = 0.05  # seconds: how often the door looks at its deadlines and whether it must stop
NOTE_EVERY = 10.0  # seconds between two log lines about dropped handshakes (a flood logs a few)
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class _Listener:
    __slots__ = ("sock", "transport")

    def __init__(self, sock: socket.socket, transport: str):
        self.sock = sock
        self.transport = transport


class _Pending:
    """A connection in its handshake: its socket, where from, its deadline, the bytes of HELLO."""

    __slots__ = ("buf", "deadline", "peer", "sock", "tls_done", "transport")

    def __init__(self, sock: socket.socket, transport: str, peer: str, deadline: float):
        self.sock = sock
        self.transport = transport
        self.peer = peer
        self.deadline = deadline
        self.buf = bytearray()
        self.tls_done = transport != "tls"


class Handshakes:
    """The door (see the module docstring): ``listeners`` are (listening socket, transport)
    pairs, transport "unix", "tcp" or "tls" (TLS with ``server.tls``, on TCP only)."""

    def __init__(self, server: Server, listeners: list[tuple[socket.socket, str]]):
        self.server = server
        self.clock = server.clock
        self.log = server.log
        self._sel = selectors.DefaultSelector()
        self._listeners = [_Listener(s, t) for s, t in listeners]
        self._pending: dict[int, _Pending] = {}  # by fd, oldest first (insertion order)
        self._lock = threading.Lock()  # guards the counters read by other threads
        self.dropped = 0  # closed before their handshake was done: past the deadline or the oldest at the limit
        self._noted = 0  # drops already said in the log
        self._last_note = float("-inf")
        self._stop = threading.Event()
        self.turns = 0  # turns of the loop so far: a test waits for one to know the door saw its clock
        for lst in self._listeners:
            lst.sock.setblocking(False)
            self._sel.register(lst.sock, _READ, lst)
        self._thread = threading.Thread(target=self._run, name="sweepq-door", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, close the listeners and every connection still in its handshake."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        for lst in self._listeners:
            lst.sock.close()
        for p in list(self._pending.values()):
            self._forget(p)
        self._sel.close()

    def counts(self) -> tuple[int, int]:
        """(connections in their handshake now, connections dropped before finishing one)."""
        with self._lock:
            return len(self._pending), self.dropped

    # -- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._sel.select(TICK)
            except OSError:  # closed under us
                return
            ready = []
            for key, _mask in events:
                if isinstance(key.data, _Listener):
                    ready.append(key.data)
                elif key.data.sock.fileno() in self._pending:
                    self._step(key.data)
            for lst in ready:  # after the bytes that came: new connections never push out a HELLO that is here
                self._accept(lst)
            self._expire()
            self.server.reap()
            self.turns += 1

    def _accept(self, lst: _Listener) -> None:
        for _ in range(max(1, self.server.max_handshakes // 2)):
            try:
                sock, address = lst.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: the ones held must end first
                self.log.warning("cannot accept a %s connection: %s", lst.transport, e.strerror or e)
                return
            peer = "local" if lst.transport == "unix" else f"{address[0]}:{address[1]}"
            if self.server.closed:
                sock.close()
                continue
            sock.setblocking(False)
            if lst.transport != "unix":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while len(self._pending) >= self.server.max_handshakes:
                self._drop(next(iter(self._pending.values())))
            if lst.transport == "tls":
                try:
                    sock = self.server.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ssl.SSLError) as e:
                    self.log.warning("refused tls %s: TLS failed (%s)", peer, e)
                    sock.close()
                    continue
            p = _Pending(sock, lst.transport, peer, self.clock.now() + self.server.hello_timeout)
            with self._lock:
                self._pending[sock.fileno()] = p
            self._sel.register(sock, _READ, p)
            self._step(p)  # a client sends its HELLO with its connect: often it is here already

    def _step(self, p: _Pending) -> None:
        """Go on with ``p``'s handshake as far as the bytes that came allow."""
        try:
            if not p.tls_done:
                try:
                    p.sock.do_handshake()
                except ssl.SSLWantReadError:
                    return self._want(p, _READ)
                except ssl.SSLWantWriteError:
                    return self._want(p, _WRITE)
                p.tls_done = True
                self._want(p, _READ)
            while True:
                need = self._need(p)
                if need <= 0:
                    break
                try:
                    chunk = p.sock.recv(min(need, P.HELLO_MAX_FRAME))
                except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                    return None
                except ssl.SSLWantWriteError:
                    return self._want(p, _WRITE)
                if not chunk:
                    return self._forget(p)  # the client went away
                p.buf += chunk
                if len(p.buf) == P.HEADER_LEN:
                    why = _bad_header(p.buf)
                    if why:  # not a sweepq client: said at debug level, so a flood of them logs nothing
                        self.log.debug("refused %s %s: %s", p.transport, p.peer, why)
                        return self._forget(p)
        except (OSError, ssl.SSLError) as e:
            what = "TLS failed" if not p.tls_done else "the connection failed"
            return self._forget(p, f"refused {p.transport} {p.peer}: {what} ({getattr(e, 'strerror', None) or e})")
        self._finish(p)
        return None

    def _want(self, p: _Pending, events: int) -> None:
        self._sel.modify(p.sock, events, p)

    @staticmethod
    def _need(p: _Pending) -> int:
        if len(p.buf) < P.HEADER_LEN:
            return P.HEADER_LEN - len(p.buf)
        return P.HEADER_LEN + P.HEADER.unpack_from(p.buf)[0] - len(p.buf)

    def _finish(self, p: _Pending) -> None:
        """The HELLO is here: the server decides (on this thread) and starts the session."""
        self._sel.unregister(p.sock)
        with self._lock:
            del self._pending[p.sock.fileno()]
        try:
            hello = P.unpack(memoryview(p.buf)[P.HEADER_LEN :])
        except P.ProtocolError as e:
            hello = e
        if not isinstance(hello, dict):
            self.log.debug("refused %s %s: a HELLO that is not a map", p.transport, p.peer)
            _close(p.sock)
            return
        self.server.welcome(p.sock, p.transport, p.peer, hello)

    def _expire(self) -> None:
        now = self.clock.now()
        while self._pending:
            oldest = next(iter(self._pending.values()))
            if oldest.deadline > now:
                break
            self._drop(oldest)
        if self.dropped > self._noted and now - self._last_note >= NOTE_EVERY:
            self.log.warning(
                "closed %d connection(s) that had not finished their handshake (HELLO within %g s; at most %d "
                "at once, the oldest closed first)",
                self.dropped - self._noted,
                self.server.hello_timeout,
                self.server.max_handshakes,
            )
            self._noted, self._last_note = self.dropped, now

    def _drop(self, p: _Pending) -> None:
        """Close ``p``, whose handshake ran out of time or is the oldest at the limit."""
        with self._lock:
            self.dropped += 1
        self._forget(p)

    def _forget(self, p: _Pending, why: str = "") -> None:
        if why:
            self.log.warning("%s", why)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(p.sock)
        with self._lock:
            self._pending.pop(p.sock.fileno(), None)
        _close(p.sock)


def _bad_header(header: bytes) -> str:
    n, version, op = P.HEADER.unpack_from(header)
    if version != P.VERSION:
        return f"protocol version {version}; this side speaks version {P.VERSION}"
    if op != P.HELLO:
        return f"the first frame must be HELLO, not op {op}"
    if n > P.HELLO_MAX_FRAME:
        return f"a HELLO of {n:,} bytes, over the limit of {P.HELLO_MAX_FRAME:,}"
    return ""


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
