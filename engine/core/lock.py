"""A queue's lock, and the check that the lock rule is kept (docs/design.md, "The lock rule").

The rule is written once, in engine/queue.py. Every function that needs a queue's lock says
so in its name (``*_locked``) or belongs to the core, whose every method needs it
(engine/core/lanes.py says which few do not). Names alone do not stop a call without the
lock, so the rule is also *checked*: with checks on, a queue's lock is an :class:`OwnedLock`
that knows which thread holds it, and each function that needs it starts with
``assert_held(lock)``. A call made without the lock then fails a test at once, instead of
racing in production.

Checks are on when the environment says ``SWEEPQ_CHECKS=1`` as sweepq is imported (a
constant from then on, so that a compiled module tests one C flag); the test suite turns
them on (tests/conftest.py), and the processes its tests start inherit the setting. Off, a
queue's lock is a plain ``threading.Lock`` and each check is the test of that flag.
"""

from __future__ import annotations

import os
import threading

CHECKS = os.environ.get("SWEEPQ_CHECKS", "") not in ("", "0")


class OwnedLock:
    """A ``threading.Lock`` that knows its owner: the lock of a queue while checks are on.

    It works with ``threading.Condition`` (a waiter's wait releases it and takes it again,
    and the owner follows), and as a context manager."""

    __slots__ = ("_lock", "owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            self.owner = threading.get_ident()
        return got

    def release(self) -> None:
        assert self.owner == threading.get_ident(), "a queue's lock released by a thread that does not hold it"
        self.owner = 0
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def held(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self.owner == threading.get_ident()

    # threading.Condition asks its lock these (see Lib/threading.py).
    def _is_owned(self) -> bool:
        return self.held()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def new_lock() -> threading.Lock | OwnedLock:
    """A queue's lock: an :class:`OwnedLock` while checks are on, else a plain Lock."""
    return OwnedLock() if CHECKS else threading.Lock()


def assert_held(lock: object, what: str = "") -> None:
    """With checks on: the calling thread holds ``lock`` (a queue's lock), or AssertionError
    naming ``what`` needed it. Off: nothing."""
    if CHECKS and getattr(lock, "owner", None) != threading.get_ident():
        raise AssertionError(f"{what or 'this call'} needs the queue's lock, and the calling thread does not hold it")
