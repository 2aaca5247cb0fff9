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


def drain_queue_queue(n: int, payload: bytes) -> None:
    """``queue.Queue``: put ``n`` (a backlog builds), then get them all."""
    q = queue.Queue()
    put, get = q.put, q.get
    for _ in range(n):
        put(payload)
    for _ in range(n):
        get()


def drain_deque(n: int, payload: bytes) -> None:
    """``collections.deque`` behind a lock: put ``n``, then get them all."""
    d = collections.deque()
    lock = threading.Lock()
    append, popleft = d.append, d.popleft
    for _ in range(n):
        with lock:
            append(payload)
    for _ in range(n):
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

    def fill_drain(self, n: int, payload: bytes) -> None:
        put, get = self.h.put, self.h.get
        for _ in range(n):
            put(payload)
        for _ in range(n):
            get()

    def fill_drain_many(self, n: int, payload: bytes, batch: int) -> None:
        """The same with ``put_many`` / ``get_many`` in batches of ``batch``."""
        put_many, get_many = self.h.put_many, self.h.get_many
        chunk = [payload] * batch
        for i in range(0, n, batch):
            put_many(chunk[: min(batch, n - i)])
        got = 0
        while got < n:
            got += len(get_many(min(batch, n - got)))

    def close(self) -> None:
        self.qm.close()
