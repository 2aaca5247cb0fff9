"""A queue's lock (engine/core/lock.py): ``threading.Lock``'s contract in both forms.

Compiled, a take that finds the lock free is a test and a store under the GIL, and only a
thread that finds it held waits, on a gate a give opens; these tests hold that form (and the
interpreted one, under SWEEPQ_PURE=1) to a lock's contract: one holder at a time while the
holder lets the GIL go, a waiter woken by the give, a timed acquire that gives up, a
``threading.Condition`` on it.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from sweepq.engine.core.lock import new_lock


@pytest.fixture
def fast_switches():
    """Threads switch every 10 µs, so that a critical section is interrupted often."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def test_acquire_without_blocking_says_whether_it_got_the_lock():
    lock = new_lock()
    assert not lock.locked()
    assert lock.acquire(False)
    assert lock.locked()
    assert not lock.acquire(False)
    assert not lock.acquire(True, 0.01)  # held by this thread: a timed wait gives up
    lock.release()
    assert not lock.locked()
    with lock:
        assert lock.locked()
    assert not lock.locked()


def test_one_holder_at_a_time_while_holders_let_the_gil_go(fast_switches):
    lock = new_lock()
    count = [0]
    inside = [0]
    overlaps = []

    def work() -> None:
        for _ in range(300):
            lock.take()
            try:
                inside[0] += 1
                if inside[0] != 1:
                    overlaps.append(inside[0])
                seen = count[0]
                time.sleep(0)  # the GIL goes to another thread while the lock is held
                count[0] = seen + 1
                inside[0] -= 1
            finally:
                lock.give()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert overlaps == []
    assert count[0] == 4 * 300
    assert not lock.locked()


def test_a_waiting_thread_gets_the_lock_when_it_is_given():
    lock = new_lock()
    lock.take()
    got = threading.Event()

    def waiter() -> None:
        lock.take()
        got.set()
        lock.give()

    t = threading.Thread(target=waiter)
    t.start()
    assert not got.wait(0.05)  # held here: the waiter waits
    lock.give()
    assert got.wait(30)
    t.join(30)
    assert not lock.locked()


def test_a_timed_acquire_gives_up_and_a_later_one_succeeds():
    lock = new_lock()
    lock.take()
    results: list[bool] = []
    t = threading.Thread(target=lambda: results.append(lock.acquire(True, 0.02)))
    t.start()
    t.join(30)
    assert results == [False]
    lock.give()
    # The waiter that gave up left the lock as it was: free, taken at once, no stale holder.
    assert lock.acquire(True, 1)
    lock.release()
    assert not lock.locked()


def test_waiters_with_and_without_timeouts_all_finish(fast_switches):
    lock = new_lock()
    done = []

    def patient() -> None:
        for _ in range(200):
            with lock:
                time.sleep(0)
        done.append("patient")

    def hasty() -> None:
        got = 0
        while got < 50:
            if lock.acquire(True, 0.0001):
                got += 1
                time.sleep(0)
                lock.release()
        done.append("hasty")

    threads = [threading.Thread(target=f) for f in (patient, patient, hasty, hasty)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(done) == ["hasty", "hasty", "patient", "patient"]
    assert not lock.locked()


def test_a_condition_waits_on_it():
    lock = new_lock()
    cond = threading.Condition(lock)  # type: ignore[arg-type]
    box: list[int] = []

    def consumer() -> None:
        with cond:
            cond.wait_for(lambda: box, timeout=30)
            box.append(len(box))

    t = threading.Thread(target=consumer)
    t.start()
    with cond:
        box.append(7)
        cond.notify()
    t.join(30)
    assert box == [7, 1]
    assert not lock.locked()
