"""The server's loop: one thread that serves the admitted plain connections (Unix socket, TCP
without TLS) while their calls cannot wait, with one epoll (Linux; a selector elsewhere). A
connection admitted while no other is open goes to a thread of its own instead (net/server.py
``welcome``): alone, it is answered sooner there. Once others are open, that thread hands it
to the loop (:meth:`Loop.adopt`).

Why: with a thread per connection each request wakes its own thread, which must then take
the GIL back from the others: 64 busy connections are 64 threads handing the GIL and the
CPU around. Here one wake-up serves every connection that has a whole frame, one after the
other, holding the GIL throughout (the reads and writes never wait: net/frames.py
``read_ready`` and ``send_ready``).

A connection leaves the loop for a thread of its own (net/session.py ``serve``), for good,
when its next step may wait: a get with WAIT, a commit (it may wait for its sync, which
other connections' commits share), administration, a channel, part of a frame (its rest
comes within the deadlines of net/frames.py), a reply the socket did not take whole, or a
persistent message moved under ``sync="commit"`` (Session ``serve_ready``). On that thread it
is served as every connection was before the loop: nothing waits in the loop.

Ownership: a connection's socket is closed only by whoever serves it, after the loop has
stopped watching it; other threads end a connection by shutting its socket down
(net/frames.py ``shutdown``), which the loop sees as the peer's end.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from typing import TYPE_CHECKING

from .poller import Poller
from .session import DONE, STAY, Session, ended_why

if TYPE_CHECKING:
    from .server import Server


class Loop:
    """The loop of ``server`` (see the module docstring). :meth:`admit` and :meth:`close`
    may be called from any thread; everything else runs on the loop's own."""

    def __init__(self, server: Server):
        self.server = server
        self._sessions: dict[int, Session] = {}  # by fd: those the loop serves now
        self._new: collections.deque = collections.deque()  # admitted, not yet welcomed
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller = Poller()  # compiled: epoll_wait(2) and the turn in one call (net/poller.py)
        self._poller.register(self._wake_r)
        self._stopping = False
        # Held by admit and by the loop's end: a connection is either taken by the loop before
        # it ends or given a thread of its own, and no wake-up is written to the closed pipe
        # (whose descriptor may be another file's by then).
        self._ending = threading.Lock()
        self._ended = False
        # Named as session threads are: the engine connections are made on it (tests/net_client_mode.py
        # tells the server's own connections from a test's by that name).
        self._thread = threading.Thread(target=self._run, name="sweepq-sessions-loop", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """False once the loop's thread has ended (closed, or a bug of its own): the server
        then gives each new connection a thread of its own rather than a loop that is gone."""
        return self._thread.is_alive() and not self._stopping

    def admit(self, session: Session, hello: dict, admin: bool) -> None:
        """A connection the server admitted (on the door's thread): the loop welcomes it, or,
        when the loop ended in the meantime, a thread of its own does (as :attr:`alive` says
        the server would have done)."""
        if not self._offer(session, hello, admin):
            _on_thread(session, session.run, hello, admin)

    def adopt(self, session: Session) -> bool:
        """Take over a welcomed connection from the thread that served it alone (net/server.py
        ``to_loop``), called by that thread between two of its turns; False when the loop has
        ended meanwhile (the thread goes on serving it)."""
        return self._offer(session, None, False)  # no HELLO: welcomed already

    def _offer(self, session: Session, hello: dict | None, admin: bool) -> bool:
        """Queue a connection for the loop to take at its next turn (:meth:`_take_new`), unless
        the loop has ended: False then, and the caller keeps it."""
        with self._ending:
            if self._ended:
                return False
            self._new.append((session, hello, admin))
            self._wake()
            return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop (the server has ended its connections); what it still serves ends."""
        self._stopping = True
        with self._ending:
            if not self._ended:
                self._wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _wake(self) -> None:
        """(Holding ``_ending``, the loop not ended: its pipe is open.)"""
        with contextlib.suppress(BlockingIOError, OSError):  # full: a wake-up is pending anyway
            os.write(self._wake_w, b"x")

    # -- the loop's thread ------------------------------------------------------------------

    def _run(self) -> None:
        sessions = self._sessions
        turn = self._poller.turn
        try:
            while not self._stopping:
                left = turn(sessions)  # compiled: the wait and the turn's hot path
                if left is not None:
                    for fd, session, step in left:
                        if session is None:
                            self._take_new()
                        else:
                            self._after(fd, session, step)
        except Exception:  # a bug of the loop's own: its connections end, new ones get threads
            self.server.log.exception("the server's loop failed")
        finally:
            for fd, session in list(sessions.items()):
                self._leave(fd)
                session.end("the server stopped")
            with self._ending:  # from here admit gives a connection a thread of its own
                self._ended = True
                os.close(self._wake_r)
                os.close(self._wake_w)
            while self._new:
                session, _, _ = self._new.popleft()
                session.end("the server stopped")
            self._poller.close()

    def _take_new(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass
        while self._new:
            session, hello, admin = self._new.popleft()
            try:
                if hello is not None:  # None: adopted from its own thread, welcomed there
                    session.welcome(hello, admin)
            except Exception as e:
                session.end(ended_why(e, session))
                continue
            fd = session.fs.sock.fileno()
            self._sessions[fd] = session
            self._poller.register(fd)
            self._serve(fd, session)  # bytes sent right after the HELLO raise no event of their own

    def _serve(self, fd: int, session: Session) -> None:
        try:
            step = session.serve_ready()
        except Exception as e:
            self._after(fd, session, e)
            return
        if step != STAY:
            self._after(fd, session, step)

    def _after(self, fd: int, session: Session, step: int | Exception) -> None:
        """A connection leaves the loop: it ended (``step`` the exception, or DONE), or it goes
        on on a thread of its own (THREAD)."""
        self._leave(fd)
        if isinstance(step, Exception):
            session.end(ended_why(step, session))
            return
        if step == DONE:
            session.end("disconnected by the client")
            return
        _on_thread(session, session.serve)

    def _leave(self, fd: int) -> None:
        """Stop watching a connection (before anyone may close its socket)."""
        del self._sessions[fd]
        self._poller.unregister(fd)


def _on_thread(session: Session, serve, *args) -> None:
    """``serve(*args)``: the rest of ``session`` on a thread of its own."""
    try:
        threading.Thread(target=serve, args=args, name=f"sweepq-session-{session.id}", daemon=True).start()
    except RuntimeError:  # the system has no thread to give: the connection ends
        session.end("the server could not start a thread for it")
