"""The server loop's epoll (net/loop.py) and its turn: wait until connections are ready, then
serve each (net/session.py ``serve_ready``), in one call.

Why its own module: the loop waits once per turn, and with one busy client once per request.
Python's ``select.epoll.poll`` allocates its event buffer and builds a list of ``(fd, events)``
tuples on every call (about 1.2 k instructions a request in callgrind, docs/clients.md); the
compiled form calls epoll_wait(2) into a buffer the poller keeps and serves the ready fds
straight from it. The interpreted form (SWEEPQ_PURE=1, forms.py) waits with
``select.epoll`` (a selector where there is no epoll) and serves them with the same code.

Only the loop's thread calls :meth:`Poller.turn`, :meth:`Poller.register` and
:meth:`Poller.unregister`, and :meth:`Poller.close` once it has stopped.
"""

from __future__ import annotations

import os
import select
import selectors
from typing import Any

import cython
from cython import compiled as COMPILED

from .session import STAY

if COMPILED:  # the C functions the compiled form calls (net/poller.pxd, net/cepoll.pxd)
    from cython.cimports.libc.errno import EINTR, errno
    from cython.cimports.posix.unistd import close as close_fd
    from cython.cimports.sweepq.net.cepoll import (
        EPOLL_CLOEXEC,
        EPOLL_CTL_ADD,
        EPOLL_CTL_DEL,
        EPOLLIN,
        epoll_create1,
        epoll_ctl,
        epoll_event,
        epoll_wait,
    )

_EPOLL = hasattr(select, "epoll")
# Ready connections taken per wait (the compiled form's buffer, net/poller.pxd, holds as many):
# more wait for the next turn, which comes at once.
MAX_EVENTS = 32
_STAY = STAY  # a C integer in the compiled form


class Poller:
    """The fds the loop watches for reading (see the module docstring)."""

    def __init__(self) -> None:
        self._epfd = -1
        self._py: Any = None  # the interpreted form's select.epoll (or selector)
        if COMPILED:
            self._epfd = epoll_create1(EPOLL_CLOEXEC)
            if self._epfd < 0:
                raise OSError(errno, os.strerror(errno))
        elif _EPOLL:
            self._py = select.epoll()
        else:  # pragma: no cover - not Linux
            self._py = selectors.DefaultSelector()

    def register(self, fd: int) -> None:
        if COMPILED:
            self._ctl(EPOLL_CTL_ADD, fd)
        elif _EPOLL:
            self._py.register(fd, select.EPOLLIN)
        else:  # pragma: no cover - not Linux
            self._py.register(fd, selectors.EVENT_READ)

    def unregister(self, fd: int) -> None:
        if COMPILED:
            self._ctl(EPOLL_CTL_DEL, fd)
        else:
            self._py.unregister(fd)

    def _ctl(self, op: int, fd: int) -> None:
        """epoll_ctl(2) of the compiled form (its event the fd itself, for reading)."""
        event = cython.declare(epoll_event)
        event.events = EPOLLIN
        event.data.u64 = 0
        event.data.fd = fd
        if epoll_ctl(self._epfd, op, fd, cython.address(event)) < 0:
            raise OSError(errno, os.strerror(errno))

    def close(self) -> None:
        if COMPILED:
            if self._epfd >= 0:
                close_fd(self._epfd)
                self._epfd = -1
        else:
            self._py.close()

    def turn(self, sessions: dict) -> list | None:
        """Wait until a watched fd is ready (as long as it takes), then serve each ready one
        that is a session's in ``sessions`` (by fd), and again, until one leaves the loop or
        is not a session's. Returns the ``(fd, session, step)`` of those, ``step`` being
        THREAD, DONE or the exception that ended the connection, and ``(fd, None, None)``
        for a ready fd that is not a session's (the loop's own wake-up, which also says the
        loop is stopping); None when a signal cut the wait short. Why the waits repeat here:
        the usual wait ends with every ready session served and staying, and going back to
        the loop's Python code for it cost about 600 instructions a request (docs/clients.md)."""
        out = None
        room = cython.sizeof(self._events) // cython.sizeof(epoll_event) if COMPILED else MAX_EVENTS
        while out is None:
            if COMPILED:
                with cython.nogil:
                    n = epoll_wait(self._epfd, self._events, room, -1)
                    err = errno
                if n < 0:
                    if err == EINTR:
                        return None
                    raise OSError(err, os.strerror(err))
                for i in range(n):
                    out = _serve_fd(self._events[i].data.fd, sessions, out)
            else:
                for fd in self._ready():
                    out = _serve_fd(fd, sessions, out)
        return out

    def _ready(self) -> list:
        """The interpreted form's wait: the ready fds."""
        if _EPOLL:
            return [fd for fd, _ in self._py.poll(-1, MAX_EVENTS)]
        return [key.fd for key, _ in self._py.select(None)]  # pragma: no cover - not Linux


def _serve_fd(fd: int, sessions: dict, out: list | None) -> list | None:
    """Serve the ready ``fd`` (:meth:`Poller.turn`); ``out`` with what leaves the loop added."""
    session = sessions.get(fd)
    if session is None:
        step = None
    else:
        try:
            ready = session.serve_ready()
        except Exception as e:
            step = e
        else:
            if ready == _STAY:
                return out
            step = ready
    if out is None:
        out = []
    out.append((fd, session, step))
    return out
