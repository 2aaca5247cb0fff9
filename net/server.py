"""The server: serves one queue manager to client connections (``sweepq serve``, ``qm.serve()``).

Transport: one thread (the *door*, net/handshake.py) accepts on every listener and runs every
handshake with a selector; a connection the server admits after its HELLO gets a
:class:`~sweepq.net.session.Session`, which calls the engine as an in-process application
would. A plain connection (Unix socket, TCP) is served by the server's *loop* (net/loop.py,
one thread with epoll) while its calls cannot wait: one wake-up serves every connection
with a whole request, holding the GIL, where a thread per connection would retake it after
every read. Every engine call may block by design (a WAIT, a commit that waits for its
fsync under ``sync="commit"``, a get that reads a blob back) and the engine's group commit
gathers concurrent committers, so a connection whose call may wait leaves the loop for a
thread of its own (the rules: net/loop.py), where it blocks only its own client, as every
connection did before the loop; a TLS connection has its thread from the start. An idle
connection costs its session and a 16 KiB read buffer (figures: docs/clients.md).

Listeners: a Unix socket (created 0600; its permissions are the access control; always
plain) and, when asked, TCP (127.0.0.1 unless a host is named; the token required; TLS when
given an ``ssl.SSLContext``). Limits, each checked before the memory it guards is taken
(docs/clients.md "Limits"): connections in their handshake (``max_handshakes``, the oldest
closed first; the whole handshake within ``hello_timeout``), admitted connections
(``max_connections``, checked after the HELLO, before a thread is started:
MQRC_MAX_CONNS_LIMIT_REACHED 2025), handles per connection (``max_handles``: 2017), frame
size (``max_frame``, from the header; 64 KiB before the handshake) and the memory of large
frames in flight, server-wide (``frame_memory``, net/frames.py: 2071).

Who may do what is decided here (:meth:`Server.authorize`) and in net/session.py from the
table in net/protocol.py (``AUTHORITY``).

Thread safety: ``status``, ``close`` and ``urls`` may be called from any thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import ssl
import threading
import time
from typing import Protocol

from sweepq.engine import MQError, QueueManager, Reason
from sweepq.engine.sizes import parse_size

from . import auth
from . import protocol as P
from .frames import SERVER_BUFFER, FrameMemory, FrameSocket
from .handshake import Handshakes
from .loop import Loop
from .once import OnceTable
from .session import Session

DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_MAX_HANDLES = 1024
DEFAULT_MAX_HANDSHAKES = 1024


def parse_tcp(spec: str | int | tuple) -> tuple[str, int]:
    """``"HOST:PORT"``, ``":PORT"``, ``"PORT"``, a port number or a (host, port) pair; the host
    is 127.0.0.1 unless one is named.

    :raises MQError: PARM_VALUE_ERROR (3229) for anything else."""
    if isinstance(spec, tuple) and len(spec) == 2:
        host, port = spec
    elif isinstance(spec, int) and not isinstance(spec, bool):
        host, port = "", spec
    elif isinstance(spec, str):
        host, _, port = spec.rpartition(":")
        host = host.strip("[]")
    else:
        host, port = None, None
    try:
        port = int(port)
    except (TypeError, ValueError):
        port = -1
    if not isinstance(host, str) or not 0 <= port <= 65535:
        raise MQError(Reason.PARM_VALUE_ERROR, f"tcp={spec!r}: give HOST:PORT, e.g. 127.0.0.1:1414 (or :1414)")
    return host or "127.0.0.1", port


class Clock(Protocol):
    """What the server reads of a clock: monotonic seconds (sweepq.sweeper's clocks fit)."""

    def now(self) -> float: ...


class _Monotonic:
    """The real clock."""

    now = staticmethod(time.monotonic)


class Server:
    """Serves ``qm`` (see the module docstring). ``start()`` listens; ``close()`` stops
    accepting, ends every connection (backing out its unit of work) and waits for them.

    ``unix_path``: the Unix socket (None: none). ``tcp``: "HOST:PORT" (None: none).
    ``token``: what a TCP client must present (None with ``tcp``: a new one, in ``token``).
    ``admin_token``: what administration needs (None: no administration over connections).
    ``tls``: an ``ssl.SSLContext`` with the server's certificate, for TCP (the Unix socket
    stays plain). ``metrics``: "HOST:PORT" or a port for Prometheus text on HTTP
    (net/metrics.py). ``console``: "HOST:PORT" for the web console (net/console/,
    docs/console.md), a snapshot pushed to its pages every ``console_interval`` seconds; it
    needs the token, so a server with a console always has one. ``log``: where the one line
    per connection event goes (the ``sweepq.net`` logger by default). The limits: the module
    docstring; ``frame_memory`` None is twice the largest frame, and at least 64 MiB; a
    connection that finds it spent waits ``frame_memory_wait`` seconds. ``clock``: the
    clock of the deadlines (``hello_timeout``, ``frame_timeout``, ``idle_timeout``), the
    real one by default. Not the
    queue manager's: a simulation that runs ``qm.clock`` fast (a ManualClock advanced by a
    sweeper loop) must not close connections whose HELLO is on its way; a test of the
    deadline passes its own ManualClock here.
    """

    def __init__(
        self,
        qm: QueueManager,
        *,
        unix_path: str | os.PathLike | None = None,
        tcp: str | int | tuple | None = None,
        token: str | None = None,
        admin_token: str | None = None,
        tls: ssl.SSLContext | None = None,
        metrics: str | int | None = None,
        console: str | int | tuple | None = None,
        console_interval: float = 0.5,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_handles: int = DEFAULT_MAX_HANDLES,
        max_handshakes: int = DEFAULT_MAX_HANDSHAKES,
        max_frame: int | None = None,
        frame_memory: int | str | None = None,
        frame_memory_wait: float = 10.0,
        wait_slice: float = 0.5,
        cancel_slice: float = 0.05,
        hello_timeout: float = 10.0,
        partial_timeout: float = 30.0,
        frame_timeout: float = 30.0,
        idle_timeout: float | None = None,
        clock: Clock | None = None,
        log: logging.Logger | None = None,
    ):
        if unix_path is None and tcp is None:
            raise MQError(Reason.PARM_VALUE_ERROR, "give a Unix socket path, tcp='HOST:PORT', or both")
        if tls is not None and not isinstance(tls, ssl.SSLContext):
            raise MQError(Reason.PARM_VALUE_ERROR, "tls must be an ssl.SSLContext holding the server's certificate")
        for value, what in (
            (max_connections, "max_connections"),
            (max_handles, "max_handles"),
            (max_handshakes, "max_handshakes"),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise MQError(Reason.PARM_VALUE_ERROR, f"{what} must be a positive int")
        for value, what in ((frame_timeout, "frame_timeout"), (idle_timeout, "idle_timeout")):
            if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or not value > 0):
                raise MQError(Reason.PARM_VALUE_ERROR, f"{what}={value!r}: give seconds > 0")
        if clock is not None and not callable(getattr(clock, "now", None)):
            raise MQError(Reason.PARM_VALUE_ERROR, f"clock={clock!r}: give an object whose now() is monotonic seconds")
        for value, what in ((token, "token"), (admin_token, "admin_token")):
            auth.check_configured(value, what)
        self.qm = qm
        self.unix_path = os.fspath(unix_path) if unix_path is not None else None
        self.tcp = parse_tcp(tcp) if tcp is not None else None
        self.token = token if token is not None or (tcp is None and console is None) else auth.new_token()
        self.admin_token = admin_token
        self.tls = tls
        self.metrics_address = metrics
        self.max_connections = max_connections
        self.max_handles = max_handles
        self.max_handshakes = max_handshakes
        self.max_frame = max_frame or max(qm.max_msg_length, 16 * 1024 * 1024) + 1024 * 1024
        limit = 0 if frame_memory is None else parse_size(frame_memory, "frame_memory", minimum=1)
        self.frame_memory = FrameMemory(limit or max(2 * self.max_frame, 64 * 2**20), frame_memory_wait)
        self.wait_slice = wait_slice
        self.cancel_slice = cancel_slice
        self.hello_timeout = hello_timeout
        self.partial_timeout = partial_timeout
        self.frame_timeout = float(frame_timeout)
        self.idle_timeout = None if idle_timeout is None else float(idle_timeout)
        self.cut = 0  # connections closed for a slow frame or for being idle
        self.clock = clock or _Monotonic()
        self.log = log or logging.getLogger("sweepq.net")
        self.once = OnceTable(qm, self.log)  # requests done once, across reconnects (net/once.py)
        self.started = time.time()
        self.refused = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sessions: dict[int, Session] = {}
        # Sessions, and threads being started for them. Read without the lock by a lone
        # connection's thread after each of its turns (net/session.py ``run_alone``).
        self.admitted = 0
        self._door: Handshakes | None = None
        self._loop: Loop | None = None
        self._metrics = None
        self._console = None
        if console is not None:  # checked here, so that a bad address fails before listening
            from .console import Console

            self._console = Console(self, console, console_interval)
        self.closed = False

    # -- starting and stopping ----------------------------------------------------------------

    def start(self) -> Server:
        """Listen (in a background thread) and return self.

        :raises MQError: RESOURCE_PROBLEM (2102) when an address is taken or not allowed."""
        listeners: list[tuple[socket.socket, str]] = []
        self.once.load()
        try:
            if self.unix_path is not None:
                listeners.append((_unix_socket(self.unix_path), "unix"))
            if self.tcp is not None:
                sock = socket.create_server(self.tcp, reuse_port=False, backlog=1024)
                self.tcp = sock.getsockname()[:2]
                listeners.append((sock, "tls" if self.tls else "tcp"))
        except OSError as e:
            for sock, _ in listeners:
                sock.close()
            if listeners and listeners[0][1] == "unix":
                with contextlib.suppress(OSError):
                    os.unlink(self.unix_path)
            self.closed = True
            self.qm.internal.detach(self)
            raise MQError(
                Reason.RESOURCE_PROBLEM, f"cannot listen: {e.strerror or e} ({e.filename or self.tcp})"
            ) from e
        self._loop = Loop(self)
        self._loop.start()
        self._door = Handshakes(self, listeners)
        self._door.start()
        if self.metrics_address is not None:
            from .metrics import start_metrics

            self._metrics = start_metrics(self, self.metrics_address)
        if self._console is not None:
            try:
                self._console.start()
            except MQError:
                self.close()
                raise
        self.log.info("serving queue manager %s on %s", self.qm.name, ", ".join(self.urls))
        return self

    @property
    def urls(self) -> list[str]:
        """Where clients connect: ``unix:///path``, ``tcp://host:port`` or ``tls://host:port``."""
        out = []
        if self.unix_path is not None:
            out.append("unix://" + os.path.abspath(self.unix_path))
        if self.tcp is not None:
            out.append(f"{'tls' if self.tls else 'tcp'}://{self.tcp[0]}:{self.tcp[1]}")
        return out

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def metrics_url(self) -> str | None:
        return None if self._metrics is None else self._metrics.url

    @property
    def console_url(self) -> str | None:
        """Where the web console is (``http://HOST:PORT/``, https with TLS), or None."""
        return self._console.url if self._console is not None and self._console.url else None

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every connection (each backs out its unit of work and closes its
        handles on its own thread) and wait up to ``timeout`` seconds for them. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._door is not None:
            self._door.close()
            if self.unix_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.unix_path)
        with self._lock:
            sessions = list(self._sessions.values())
        for s in sessions:
            s.stop()
        deadline = time.monotonic() + timeout
        for s in sessions:
            # A session in a WAIT ends at its next slice; one whose wait the queue manager's
            # clock holds (a manual clock) ends when the queue manager's close wakes it.
            limit = deadline if s.state != "waiting" else min(deadline, time.monotonic() + 2 * s.slice_s)
            s.ended.wait(max(0.0, limit - time.monotonic()))
        if self._loop is not None:
            self._loop.close(max(0.0, deadline - time.monotonic()))
        if self._metrics is not None:
            self._metrics.close()
        if self._console is not None:
            self._console.close()
        self.qm.internal.detach(self)
        self.log.info("stopped serving queue manager %s", self.qm.name)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- connections ---------------------------------------------------------------------------

    def welcome(self, sock: socket.socket, transport: str, peer: str, hello: dict) -> None:
        """A connection's HELLO has come (on the door's thread, net/handshake.py): refuse it
        (2035, then 2025 at the connection limit) with one small reply, or admit it and start
        its session's thread. Never blocks: the socket is still non-blocking here."""
        try:
            admin = self.authorize(transport, hello.get("token"), hello.get("admin_token"))
        except MQError as e:
            self.log.warning("refused %s %s: %s", transport, peer, e)
            _reply_and_close(sock, P.error(e))
            return
        if self.closed:  # stopping: nothing more is admitted, and nothing was refused at a limit
            _reply_and_close(sock, P.error(MQError(Reason.CONNECTION_BROKEN, "the server is stopping")))
            return
        with self._lock:
            admitted = self.admitted < self.max_connections
            if admitted:
                self.admitted += 1
            else:
                self.refused += 1
            alone = self.admitted == 1
        if not admitted:
            self.log.warning("refused %s %s: %d connections open, the limit", transport, peer, self.max_connections)
            err = MQError(
                Reason.MAX_CONNS_LIMIT_REACHED, f"the server holds {self.max_connections} connections, its limit"
            )
            _reply_and_close(sock, P.error(err))
            return
        sock.setblocking(True)
        # The loop serves a plain connection while its calls cannot wait, unless it is the only
        # one: a lone client's request wakes a thread blocked in its recv sooner, and at less
        # CPU, than it wakes the loop's epoll (docs/clients.md "A lone connection on a thread
        # of its own"). Once others are open, that thread hands it to the loop (to_loop).
        if not alone and transport != "tls" and self._loop is not None and self._loop.alive:
            self._loop.admit(self._session(sock, transport, peer), hello, admin)
            return
        t = threading.Thread(target=self.run_session, args=(sock, transport, peer, hello, admin), daemon=True)
        try:
            t.start()
        except RuntimeError as e:  # the system has no thread to give
            with self._lock:
                self.admitted -= 1
            self.log.warning("refused %s %s: no thread for it (%s)", transport, peer, e)
            err = MQError(Reason.RESOURCE_PROBLEM, "the server cannot start a thread for this connection now")
            _reply_and_close(sock, P.error(err))

    def run_session(self, sock: socket.socket, transport: str, peer: str, hello: dict, admin: bool) -> None:
        """The body of a connection's thread: a TLS connection's (its reads may not pass
        MSG_DONTWAIT, so neither the loop nor the loop's turns serve it), one admitted alone,
        or any once the loop is gone. A plain one is served by the loop's turns, on this
        thread (net/session.py ``run_alone``)."""
        session = self._session(sock, transport, peer)
        threading.current_thread().name = f"sweepq-session-{session.id}"
        if transport == "tls":
            session.run(hello, admin)
        else:
            session.run_alone(hello, admin)

    def _session(self, sock: socket.socket, transport: str, peer: str) -> Session:
        """A new admitted connection's session, known to ``status`` from here on."""
        fs = FrameSocket(
            sock,
            self.max_frame,
            self.partial_timeout,
            SERVER_BUFFER,
            self.frame_memory,
            self.clock,
            idle=self.idle_timeout is not None,
        )
        session = Session(self, fs, next(self._ids), peer, transport)
        with self._lock:
            self._sessions[session.id] = session
        return session

    def reap(self) -> None:
        """Close the connections past a deadline (on the door's thread, each of its turns): a
        frame whose bytes have taken longer than ``frame_timeout`` since its first came, and
        a connection idle between calls for longer than ``idle_timeout``. A get waiting in
        the server is not idle."""
        now = self.clock.now()
        idle = self.idle_timeout
        with self._lock:
            sessions = list(self._sessions.values())
        for s in sessions:
            fs = s.fs
            since = fs.frame_since
            if since is not None and now - since > self.frame_timeout:
                why = f"a frame's bytes took longer than {self.frame_timeout:g} s (frame_timeout)"
            elif idle is not None and since is None and s.state == "idle" and now - fs.active_at > idle:
                why = f"idle for longer than {idle:g} s (idle_timeout)"
            else:
                continue
            with self._lock:
                self.cut += 1
            s.cut(why)

    def to_loop(self, session: Session) -> bool:
        """Hand a welcomed plain connection, served alone on its thread, to the loop now that
        others are open (net/session.py ``run_alone``, between two of its turns): beside a busy
        loop, a thread of its own would wait for the GIL for up to the switch interval at each
        request. True when the loop took it (its thread then leaves it); False while it is
        still alone or the loop is gone (its thread goes on serving it)."""
        loop = self._loop
        return self.admitted > 1 and loop is not None and loop.alive and loop.adopt(session)

    def forget(self, session: Session) -> None:
        with self._lock:
            if self._sessions.pop(session.id, None) is not None:
                self.admitted -= 1

    def authorize(self, transport: str, token: object, admin_token: object) -> bool:
        """Whether a connection that presented these tokens may administer; MQError 2035 when it
        may not connect. The admin token admits on every transport and may come in either
        field (a sender channel's ``token`` may be its partner's admin token,
        docs/channels.md "Security"); the token admits on TCP; a Unix socket needs none."""
        admin = auth.matches(admin_token, self.admin_token) or auth.matches(token, self.admin_token)
        if admin_token is not None and not auth.matches(admin_token, self.admin_token):
            raise MQError(Reason.NOT_AUTHORIZED, "wrong admin token")
        if transport == "unix" or admin or auth.matches(token, self.token):
            return admin
        raise MQError(
            Reason.NOT_AUTHORIZED,
            "a TCP connection needs the server's token: connect(url, token=...)" if token is None else "wrong token",
        )

    # -- what is going on ------------------------------------------------------------------------

    def status(self) -> dict:
        """DISPLAY QSTATUS and DISPLAY CONN: every queue with its depth, messages in memory,
        swept, handles open for input and output; every connection with its unit of work;
        the connections refused at the limit, those in their handshake and those dropped
        before finishing one; the memory of large frames in flight."""
        queues = []
        for name in self.qm.queue_names():
            try:
                info = self.qm.inquire_queue(name)
            except MQError:
                continue  # deleted in between
            queues.append(
                {
                    "name": name,
                    "depth": info.current_depth,
                    "in_memory": info.in_memory,
                    "swept": info.swept,
                    "mem_bytes": info.mem_bytes,
                    "open_input": info.open_input_count,
                    "open_output": info.open_output_count,
                }
            )
        with self._lock:
            sessions = list(self._sessions.values())
        conns = [
            {
                "id": s.id,
                "transport": s.transport,
                "peer": s.peer,
                "pid": s.pid,
                "client": s.client,
                "since": s.since,
                "handles": len(s.handles),
                "uncommitted": _uncommitted(s),
                "calls": s.calls,
                "state": f"receiving {s.fs.receiving:,} bytes" if s.fs.receiving else s.state,
            }
            for s in sessions
        ]
        handshakes, dropped = self._door.counts() if self._door is not None else (0, 0)
        fm = self.frame_memory
        return {
            "qm": self.qm.name,
            "urls": self.urls,
            "started": self.started,
            "queues": queues,
            "connections": conns,
            "refused": self.refused,
            "handshakes": handshakes,
            "dropped": dropped,
            "frame_memory": {"limit": fm.limit, "used": fm.used, "peak": fm.peak, "refused": fm.refused},
            "store_memory": {k: int(v) for k, v in self.qm.store_memory().items()},
        }


def _reply_and_close(sock: socket.socket, frame: bytes) -> None:
    """Send a refusal (a small frame: the socket's buffer takes it) and close, never blocking.
    What the client sent after its HELLO is read and dropped first: closing a socket with
    unread bytes sends a reset, which can destroy the refusal before the client reads it."""
    with contextlib.suppress(OSError):
        sock.send(frame)
        sock.shutdown(socket.SHUT_WR)
        for _ in range(16):
            if not sock.recv(65536):
                break
    with contextlib.suppress(OSError):
        sock.close()


def _uncommitted(session: Session) -> int:
    conn = session.conn  # read once: the session's thread may end it meanwhile
    return conn.uncommitted if conn is not None else 0


def _unix_socket(path: str) -> socket.socket:
    """A listening Unix socket at ``path``, mode 0600 from the start (bound under a temporary
    name, chmod-ed, then renamed into place). A socket file left by a server that died is
    replaced; one that a live server answers on is not."""
    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # stale: nobody listens
        else:
            raise OSError(98, "another server listens there", path)
        finally:
            probe.close()
    tmp = f"{path}.{os.getpid()}.tmp"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        sock.bind(tmp)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
        sock.listen(1024)
    except OSError:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return sock
