"""A queue's lock, and the check that the lock rule is kept (docs/design.md, "The lock rule").

The rule is written once, in engine/queue.py ("The lock rule"). Every function that needs a
queue's lock says so in its name (``*_locked``) or belongs to the core, whose every method
needs it but the three that rule names (engine/core/lanes.py ``UNLOCKED``). Names alone do not stop a call without the
lock, so the rule is also *checked*: with checks on, a :class:`QueueLock` knows which thread
holds it, and each function that needs it starts with ``assert_held(lock)``. A call made
without the lock then fails a test at once, instead of racing in production.

Checks are on when the environment says ``SWEEPQ_CHECKS=1`` as sweepq is imported (a
constant from then on, so that a compiled module tests one C flag); the test suite turns
them on (tests/conftest.py), and the processes its tests start inherit the setting. Off,
each check is the test of that flag.

Why a lock of its own rather than ``threading.Lock``: every put and get takes a queue's lock
once, and ``threading.Lock.acquire`` parses its arguments as keywords on each call (about 400
instructions, a tenth of a put and get). Nor the interpreter's own lock (``PyThread``) called
directly, which the compiled form did before: on Linux (CPython 3.11, glibc 2.30 or later)
``PyThread_acquire_lock`` reads the monotonic clock on every acquire, even one that does not
wait, to compute a deadline it then does not use, and that read (about 45 ns in a KVM guest)
with the semaphore's two atomic operations cost a put+get pair more wall time than all its
instructions but a third (callgrind does not see it: under valgrind the clock is a system
call it does not count). Compiled, a take that finds the lock free is a test and a store of
one C field, made atomic by the GIL: every take and give runs holding it (they are methods
of a compiled class, called with the GIL like any Python call, and nothing between the test
and the store can release it; a Cython module is never run without the GIL, a free-threaded
interpreter takes the GIL back for it). Only a thread that finds the lock held uses the
interpreter's lock, as a gate it waits on without the GIL, which a give opens when someone
waits. Interpreted, the same class wraps a ``_thread`` lock.
"""

from __future__ import annotations

import _thread
import os
import threading
import time

import cython
from cython import compiled as COMPILED

if COMPILED:  # the interpreter's own lock, called directly by the compiled form
    from cython.cimports.cpython.pythread import (
        WAIT_LOCK,
        PyThread_acquire_lock,
        PyThread_allocate_lock,
        PyThread_free_lock,
        PyThread_release_lock,
    )

CHECKS = os.environ.get("SWEEPQ_CHECKS", "") not in ("", "0")
_CHECKS = CHECKS  # the compiled form's C copy (lock.pxd); other modules import CHECKS


class QueueLock:
    """A queue's lock: a non-reentrant mutex that works with ``threading.Condition`` (a
    waiter's wait releases it and takes it again) and as a context manager. ``owner`` is the
    thread that holds it, kept only with checks on (0 otherwise).

    Compiled, ``_held`` says whether a thread holds it and ``_waiting`` how many threads wait
    for it, both read and written only with the GIL held (the module docstring); ``_lock`` is
    the gate the waiters block on, closed except between a give that found a waiter and the
    waiter's wake. Interpreted, ``_lock`` is the lock itself."""

    __slots__ = ("_held", "_lock", "_waiting", "owner")

    def __init__(self) -> None:
        if COMPILED:
            self._lock = PyThread_allocate_lock()
            PyThread_acquire_lock(self._lock, WAIT_LOCK)  # the gate starts closed
            self._held = False
            self._waiting = 0
        else:
            self._lock = _thread.allocate_lock()
        self.owner = 0

    def __dealloc__(self) -> None:  # compiled only: the interpreted lock frees itself
        if COMPILED and self._lock:
            PyThread_free_lock(self._lock)

    def take(self) -> None:
        """Block until the lock is ours (the hot paths' acquire)."""
        if COMPILED:
            if self._held:
                self._wait(-1.0)
            else:
                self._held = True  # the test above and this store: one step under the GIL
        else:
            self._lock.acquire()
        if _CHECKS:
            self.owner = threading.get_ident()

    def give(self) -> None:
        """Release the lock (the hot paths' release)."""
        if _CHECKS:
            assert self.owner == threading.get_ident(), "a queue's lock released by a thread that does not hold it"
            self.owner = 0
        if COMPILED:
            self._held = False
            if self._waiting:
                PyThread_release_lock(self._lock)  # open the gate: a waiter wakes and looks again
        else:
            self._lock.release()

    def _wait(self, timeout: float) -> bool:
        """Compiled only: wait for the lock to be free and take it, for up to ``timeout``
        seconds (below 0: no limit); False when the time ran out first. A waiter counts itself
        before it looks, so a give that frees the lock opens the gate for it; a wake that finds
        the lock taken again (by a thread that came meanwhile, or a gate opened twice) waits
        again: the thread that holds it then opens the gate when it gives."""
        deadline = time.monotonic() + timeout if timeout >= 0 else 0.0
        us = -1 if timeout < 0 else int(timeout * 1e6)
        self._waiting += 1
        try:
            while self._held:
                with cython.nogil:
                    PyThread_acquire_lock_timed(self._lock, us, 0)  # type: ignore[name-defined]  # noqa: F821 - lock.pxd
                if timeout >= 0 and self._held:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    us = int(left * 1e6)
            self._held = True
            return True
        finally:
            self._waiting -= 1

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """``threading.Lock.acquire``'s contract (what a Condition calls)."""
        if COMPILED:
            if not self._held:
                self._held = True
                got = True
            elif not blocking:
                got = False
            else:
                got = self._wait(timeout)
        else:
            got = self._lock.acquire(blocking, timeout)
        if got and _CHECKS:
            self.owner = threading.get_ident()
        return got

    def release(self) -> None:
        """``threading.Lock.release``'s contract."""
        self.give()

    def locked(self) -> bool:
        if COMPILED:
            return self._held
        return self._lock.locked()

    def held(self) -> bool:
        """Whether the calling thread holds the lock (known with checks on only)."""
        return self.owner == threading.get_ident()

    # threading.Condition asks its lock this (see Lib/threading.py).
    def _is_owned(self) -> bool:
        if _CHECKS:
            return self.held()
        if self.acquire(False):
            self.release()
            return False
        return True

    def __enter__(self) -> bool:
        self.take()
        return True

    def __exit__(self, *exc: object) -> None:
        self.give()


if not COMPILED and not _CHECKS:

    class _DirectLock(QueueLock):
        """The interpreted form's :class:`QueueLock` with checks off: :meth:`take` and
        :meth:`give` are the ``_thread`` lock's own ``acquire`` and ``release``, kept in slots
        that hide the methods, so that each of a put's and a get's takes and gives is one C
        call, not a Python call around it (four per put+get pair, about a twentieth of the
        interpreted pair). Compiled, the methods are C already; with checks on, they record
        the owner."""

        __slots__ = ("give", "take")

        def __init__(self) -> None:
            super().__init__()
            self.take = self._lock.acquire  # type: ignore[method-assign]  # the slot hides the method
            self.give = self._lock.release  # type: ignore[method-assign]


def new_lock() -> QueueLock:
    """A queue's lock."""
    if not COMPILED and not _CHECKS:
        return _DirectLock()
    return QueueLock()


def assert_held(lock: object, what: str = "") -> None:
    """With checks on: the calling thread holds ``lock`` (a queue's lock), or AssertionError
    naming ``what`` needed it. Off: nothing."""
    if CHECKS and getattr(lock, "owner", None) != threading.get_ident():
        raise AssertionError(f"{what or 'this call'} needs the queue's lock, and the calling thread does not hold it")
