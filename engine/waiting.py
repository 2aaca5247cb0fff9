"""The calls blocked in a WAIT on one queue, and MQ's rule of whom a new message wakes.

A getter blocked in a WAIT (engine/getpath.py :class:`~sweepq.engine.getpath.Wait`) waits on
its own ``Condition`` bound to the queue's lock, so that a new message wakes exactly the
waiter MQ would pick (docs/semantics.md §3): one non-browse waiter, a specific-match waiter
before a general one; every browser without LOCK.

Invariant: a waiter is in :attr:`Waiters.waiting` only while its call sleeps in
:meth:`Waiters.wait_locked`; whoever wakes it takes it out, so one message wakes one getter.
Every method here runs with the queue's lock held (engine/queue.py, the lock rule).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .core.lock import CHECKS, assert_held

if TYPE_CHECKING:
    from collections.abc import Callable

    from sweepq.sweeper.clock import Clock

    from .core.lock import QueueLock

GETTER = 0  # Waiter.kind: a destructive get (or a channel's batch)
BROWSER = 1  # a browse without LOCK: every new message wakes every browser
LOCK_BROWSER = 2  # a browse with LOCK: woken as a getter is


class Waiter:
    """One call blocked in a WAIT.

    ``match`` is the predicate a new record must pass to wake it (None: any message);
    ``kind`` is GETTER, BROWSER or LOCK_BROWSER (:meth:`Waiters.wake_for_locked` says who
    wakes whom). ``passes``: the predicate admits records the call may then be unable to
    take (a group's completeness rules, a LOCK browse's cursor), so a wake it cannot use is
    passed on (:meth:`Waiters.pass_on_locked`). ``rec`` is the record that woke it (None:
    woken by a timeout or a state change); ``offered`` the last record it was woken for, so
    that a wake passed on never comes back to it.
    """

    __slots__ = ("cond", "kind", "match", "offered", "passes", "rec")

    def __init__(
        self, cond: threading.Condition, match: Callable[[bytes], bool] | None, kind: int = GETTER, passes: bool = False
    ):
        self.cond = cond
        self.match = match
        self.kind = kind
        self.passes = passes
        self.rec: bytes | None = None
        self.offered: bytes | None = None


class Waiters:
    """The waiters of the queue whose lock is ``mutex``; their WAITs run on ``clock`` (a
    ManualClock in tests). ``waiting``: those asleep now, longest first (the hot paths test
    it before calling in)."""

    def __init__(self, mutex: QueueLock, clock: Clock):
        self.mutex = mutex
        self.clock = clock
        self.waiting: list[Waiter] = []

    def _must_hold(self, what: str) -> None:
        if CHECKS:
            assert_held(self.mutex, what)

    def new(self, match: Callable[[bytes], bool] | None, kind: int = GETTER, passes: bool = False) -> Waiter:
        """A waiter for one call, its Condition bound to the queue's lock."""
        return Waiter(threading.Condition(self.mutex), match, kind, passes)  # type: ignore[arg-type]

    def wait_locked(self, w: Waiter, deadline: float | None) -> None:
        """Wait until ``w`` is woken (a record for it, or a change of the queue's state) or
        ``deadline`` (clock time; None: never) passes. The lock is released while waiting
        and held again on return; the caller looks again and checks what may have changed."""
        self._must_hold("waiting")
        w.rec = None
        self.waiting.append(w)
        try:
            # A main thread's wait returns at the end of each slice, so that Ctrl-C reaches it
            # (sweeper/clock.py MAIN_THREAD_SLICE). Nothing happened then (whoever wakes a
            # waiter takes it out of the list): it waits again in its place in the line, not
            # at its back, which MQ gives the longest-waiting getter.
            while self.clock.wait(w.cond, deadline) and w in self.waiting:
                pass
        finally:  # also when Ctrl-C ends the wait: no waiter left behind to be woken in vain
            if w in self.waiting:
                self.waiting.remove(w)
        searched = getattr(w.match, "searched", None)
        if searched:
            searched.clear()  # a blob searched before may hold a message backed out since

    def wake_for_locked(self, rec: bytes, passed_by: Waiter | None = None) -> None:
        """A message became available: wake the one waiter MQ would choose for it.

        A waiter for a particular message that this one matches goes first; otherwise the
        longest-waiting general waiter (a LOCK browse counts as one). Every browse waiter
        without LOCK is woken too. The woken waiter leaves the list, so the next new
        message wakes someone else; a waiter that finds nothing re-registers.

        ``passed_by``: the wake is passed on by that waiter, which could not use it: only
        getters it was not offered to already are candidates (so a wake never circles), and
        no browser is woken again."""
        self._must_hold("waking a waiter")
        waiting = self.waiting

        def candidate(w: Waiter) -> bool:
            return w.kind != BROWSER and (passed_by is None or (w.kind == GETTER and w.offered is not rec))

        chosen = next((w for w in waiting if w.match is not None and candidate(w) and w.match(rec)), None)
        if chosen is None:
            chosen = next((w for w in waiting if w.match is None and candidate(w)), None)
        if chosen is not None:
            waiting.remove(chosen)
            chosen.rec = chosen.offered = rec
            chosen.cond.notify()
        if passed_by is None:
            browsers = [w for w in waiting if w.kind == BROWSER]
            for w in browsers:  # every browse waiter looks again, each beyond its own cursor
                waiting.remove(w)
                w.cond.notify()

    def pass_on_locked(self, w: Waiter) -> None:
        """``w`` was woken for a record its call then could not take: offer that record to
        the next waiter MQ would choose (only when ``w``'s predicate admits records its call
        may not take: see :class:`Waiter`)."""
        self._must_hold("passing a wake on")
        rec, w.rec = w.rec, None
        if rec is not None and w.passes and self.waiting:
            self.wake_for_locked(rec, passed_by=w)

    def wake_all_locked(self) -> None:
        """Wake every waiter, so each re-checks the queue's state (inhibit, delete, close)."""
        self._must_hold("waking every waiter")
        for w in self.waiting:
            w.cond.notify()
        self.waiting.clear()
