"""A WAIT on the main thread returns to Python at the end of each slice of
``sweeper/clock.py`` ``MAIN_THREAD_SLICE`` (so that Ctrl-C reaches it: tests/test_queue.py
``test_ctrl_c_ends_a_blocked_call``), and waits again in its place in the queue's line of
waiters: the longest-waiting getter still gets the next message, as MQ says, however many
slices it waited through.
"""

from __future__ import annotations

import threading

from sweepq.engine import GMO, OO, QueueManager, SweeperSettings
from sweepq.sweeper.clock import SystemClock

from helpers import wait_until


class CountingClock(SystemClock):
    """The real clock, counting which threads entered a wait and how many slices ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entered: dict[int, int] = {}
        self.slices = 0

    def wait(self, cond: threading.Condition, deadline: float | None, *, background: bool = False) -> bool:
        if not background:
            with self.lock:
                me = threading.get_ident()
                self.entered[me] = self.entered.get(me, 0) + 1
        sliced = super().wait(cond, deadline, background=background)
        if sliced:
            with self.lock:
                self.slices += 1
        return sliced


def test_the_main_threads_wait_keeps_its_place_through_its_slices():
    clock = CountingClock()
    with QueueManager(clock=clock, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        put = qm.connect().open("Q", OO.OUTPUT)
        main = threading.get_ident()
        got: dict[str, bytes] = {}

        def later_getter() -> None:
            got["later"] = qm.connect().open("Q", OO.INPUT_SHARED).get(GMO.WAIT, wait_interval=60_000).data

        def driver() -> None:
            wait_until(lambda: clock.entered.get(main, 0) >= 1, 30, "the main thread waiting")
            later = threading.Thread(target=later_getter, daemon=True)
            later.start()
            wait_until(lambda: clock.entered.get(later.ident, 0) >= 1, 30, "the later getter waiting")
            seen = clock.slices
            wait_until(lambda: clock.slices > seen, 30, "a slice of the main thread's wait ended")
            put.put(b"first")  # the main thread has waited longest: it is the one woken
            wait_until(lambda: "main" in got, 30, "the main thread's get")
            put.put(b"second")
            later.join(30)

        d = threading.Thread(target=driver, daemon=True)
        d.start()
        got["main"] = qm.connect().open("Q", OO.INPUT_SHARED).get(GMO.WAIT, wait_interval=60_000).data
        d.join(60)
        assert not d.is_alive()
    assert got == {"main": b"first", "later": b"second"}
