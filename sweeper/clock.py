"""Injectable clocks: the one source of time for WAIT intervals, put times and the sweep cycle.

Every timed wait in sweepq goes through :meth:`Clock.wait`, so a test can swap in a
:class:`ManualClock` and drive time by hand: no test sleeps on the wall clock, and every
timeout path runs deterministically (the TigerBeetle-simulator way of testing time).

Contract of ``wait(cond, deadline)``: the caller holds ``cond``'s lock; the call releases
it while waiting and holds it again on return. It returns when notified, when the deadline
has passed, or spuriously; callers loop and re-check their predicate, as with any
``threading.Condition``. On the main thread the real clock also returns at the end of each
slice of ``MAIN_THREAD_SLICE`` seconds, and says so (True), so that Ctrl-C ends any wait.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: for deadlines and intervals."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch: for put times."""
        ...

    def wait(self, cond: threading.Condition, deadline: float | None, *, background: bool = False) -> bool:
        """Wait on ``cond`` (lock held) until notified or ``now() >= deadline``.

        True only when it returned because a slice of the main thread's wait ended
        (``MAIN_THREAD_SLICE``): not notified, the deadline not reached, so the caller may
        wait again as if it had not returned. ``background`` marks a housekeeping wait (the
        sweeper's), which a manual clock does not count among the waiters a test waits for."""
        ...


# The longest the main thread blocks in one wait. A signal (Ctrl-C's SIGINT) is acted on by
# the main thread between two bytecodes; a wait blocked in the kernel is cut short for it only
# when the kernel hands the signal to that very thread during the wait. When it lands on
# another thread (the sweeper's: any thread of the process may take it) or just before the
# wait blocks, the main thread would sleep on until notified, maybe for ever, with
# KeyboardInterrupt pending. Waking within a slice, it raises it.
MAIN_THREAD_SLICE = 0.1


class SystemClock:
    """The real clock."""

    # The builtins themselves, not wrappers: wall() runs on every put.
    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    def wait(self, cond: threading.Condition, deadline: float | None, *, background: bool = False) -> bool:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if threading.current_thread() is not threading.main_thread():
            cond.wait(remaining)
            return False
        sliced = remaining is None or remaining > MAIN_THREAD_SLICE
        notified = cond.wait(MAIN_THREAD_SLICE if sliced else remaining)
        return sliced and not notified


class ManualClock:
    """A virtual clock that moves only when :meth:`advance` is called.

    Waiters block on their own condition with no real timeout; ``advance`` wakes every
    registered waiter so it can re-check its deadline. ``wait_for_waiters`` lets a test
    learn, without sleeping, that other threads have reached a timed wait.
    """

    def __init__(self, start: float = 0.0, epoch: float = 1_767_225_600.0):
        self._t = float(start)
        self._epoch = epoch
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting: dict[int, threading.Condition] = {}
        self._background: set[int] = set()
        self._token = 0

    def now(self) -> float:
        return self._t

    def wall(self) -> float:
        return self._epoch + self._t

    @property
    def waiters(self) -> int:
        """How many threads are inside :meth:`wait` right now (background waits excluded)."""
        with self._lock:
            return len(self._waiting) - len(self._background)

    def wait(self, cond: threading.Condition, deadline: float | None, *, background: bool = False) -> bool:
        if deadline is not None and self._t >= deadline:
            return False
        with self._lock:
            self._token += 1
            token = self._token
            self._waiting[token] = cond
            if background:
                self._background.add(token)
            self._changed.notify_all()
        try:
            # Re-check under cond's lock (held by the caller): advance() changes _t before
            # it takes cond's lock to notify, so a wake-up cannot be lost in between.
            if deadline is None or self._t < deadline:
                cond.wait()
        finally:
            with self._lock:
                self._waiting.pop(token, None)
                self._background.discard(token)
                self._changed.notify_all()
        return False  # no slices: a manual clock's waits are a test's, and end by advance()

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every timed waiter so it re-checks its deadline."""
        if seconds < 0:
            raise ValueError("a clock does not run backwards")
        with self._lock:
            self._t += seconds
            conds = list(self._waiting.values())
        for cond in conds:
            with cond:
                cond.notify_all()

    def wait_for_waiters(self, n: int, timeout: float = 10.0) -> bool:
        """Block (on a condition, not a sleep loop) until at least ``n`` threads wait."""
        with self._lock:
            return self._changed.wait_for(lambda: len(self._waiting) - len(self._background) >= n, timeout)

    def wait_for_background(self, n: int = 1, timeout: float = 10.0) -> bool:
        """Block until at least ``n`` background waits (the sweeper's) are in progress."""
        with self._lock:
            return self._changed.wait_for(lambda: len(self._background) >= n, timeout)
