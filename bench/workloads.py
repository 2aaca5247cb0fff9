"""Benchmark workloads: the same loops for sweepq and for what a user would pick instead.

Each ``pairs_*`` function does ``n`` put+get pairs of one payload and returns nothing; the
runners time them. Keeping the loops here means ``sweepq bench`` and the pytest-benchmark
files measure exactly the same code.
"""

from __future__ import annotations

import collections
import queue
import threading

from sweepq.engine import OO, QueueManager


def pairs_queue_queue(n: int, payload: bytes) -> None:
    """``queue.Queue``: the thread-safe FIFO a Python user would reach for first."""
    q = queue.Queue()
    put, get = q.put, q.get
    for _ in range(n):
        put(payload)
        get()


def pairs_deque(n: int, payload: bytes) -> None:
    """``collections.deque`` behind a lock: the floor for a locked in-memory FIFO."""
    d = collections.deque()
    lock = threading.Lock()
    append, popleft = d.append, d.popleft
    for _ in range(n):
        with lock:
            append(payload)
        with lock:
            popleft()


class SweepqPairs:
    """A queue manager with one queue, kept across rounds so set-up is not timed."""

    def __init__(self) -> None:
        self.qm = QueueManager("BENCH")
        self.qm.define_queue("B")
        self.conn = self.qm.connect()
        self.h = self.conn.open("B", OO.OUTPUT | OO.INPUT_SHARED)

    def __call__(self, n: int, payload: bytes) -> None:
        put, get = self.h.put, self.h.get
        for _ in range(n):
            put(payload)
            get()

    def close(self) -> None:
        self.qm.close()
