"""Memory for a direct task's columns, made ready while the JVM starts.

On this project's machine (a virtual machine whose balloon reports free pages to the host)
the first touch of fresh memory is what made the direct replay's stage vary: a worker
forked for the task reads the whole trace into about 18 bytes an event of new columns
(195 MB for the 10.8 M-event trace of docs/pipeline.md), and zeroing those pages took
0.15 to 1.0 s of system CPU from one run to the next for the same 50,000 page faults
(``perf``: ``clear_page_erms``, the host backing each page again), against 0.35 s of user
CPU for the whole read. A private mapping made before the fork does not help: the task's
writes would copy it page by page.

So the daemon pre-started by the driver (pipeline/prestart.py), idle while the JVM starts,
makes a *shared* mapping (a memfd) large enough for the trace's columns and touches it
(:meth:`Arena.populate`, chunk by chunk, stopping when the JVM claims the daemon), and the
workers it forks inherit it: a task's columns are then pages that exist already, mapped on
first touch without being zeroed (:func:`claimed`). One task at a time uses it: a worker
takes a POSIX lock on the memfd (held by that process; another worker's task allocates as
before, as does any task when there is no arena or it is too small).

The arena holds the replay kernel's work arrays too (``prefix``, ``marker``, ``swept_at``:
sweeper/replay.py ``WORK_BYTES_PER_SLOT``, 13 bytes a slot, 70 MB on that trace), which
were the last fresh memory of the task: it is sized at 18 + 13 bytes an event (a slot is a
put, or a lane's spare, so a trace with at most as many slots as events fits), and the task
that claims it lays the work arrays after its columns (:func:`lend_work`) and gives them to
its process's workspace (sweeper/workspace.py) for good. Each array laid in the claimed
arena is mapped into the worker in one call (``MADV_POPULATE_WRITE``; where the kernel has
none, page by page on first touch, as before): the daemon's pages are present already, and a
fault per page in the task was one more cost per event (a forked worker inherits the shared
mapping but not its page table entries). 336 MB mapped in a forked child: 0.077 s in one
call, 0.114 s touched page by page.
"""

from __future__ import annotations

import fcntl
import mmap
import os

import numpy as np

# Bytes an event takes in a direct task's columns (time 8, queue 4, op 1, bytes 4, priority 1),
# and the alignment of each column in the arena (a cache line).
EVENT_BYTES = 18
ALIGN = 64
# Touched this much at a time, so that a claim waits for one chunk at most.
CHUNK = 16 << 20
# Linux 5.14: populate page tables writable, in one call per range (the mmap module names it
# from Python 3.13 on where the kernel headers have it; the value is Linux's).
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)

_arena: Arena | None = None  # in the daemon and, inherited, in the workers it forks
_given = False  # this process has laid a task's columns in the arena (claimed): Spark reuses workers


class Arena:
    """A shared, anonymous mapping of ``size`` bytes (a memfd), for one task's columns at a
    time; its pages are made present by :meth:`populate`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.fd = os.memfd_create("sweepq-arena", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED)
        self.touched = 0

    def populate(self, stop=lambda: False) -> int:
        """Make the pages present, a chunk at a time, until done or ``stop()`` says so; returns
        the bytes made present."""
        while self.touched < self.size and not stop():
            n = min(CHUNK, self.size - self.touched)
            try:
                self.map.madvise(MADV_POPULATE_WRITE, self.touched, n)
            except (OSError, ValueError):  # an older kernel: a write to each page does it
                np.frombuffer(self.map, np.uint8, n, self.touched)[:: mmap.PAGESIZE] = 0
            self.touched += n
        return self.touched

    def map_in(self, start: int = 0, length: int | None = None) -> bool:
        """Map the pages of ``[start, start + length)`` (default: all) into this process's page
        tables now, in one call (a worker forked from the daemon has the memfd's pages but not
        their entries: it would fault once a page); pages the daemon had not made present yet
        are made so. False where the kernel cannot (before Linux 5.14): the pages are then
        mapped on first touch, as before."""
        end = self.size if length is None else min(self.size, start + length)
        start -= start % mmap.PAGESIZE  # madvise takes a page-aligned start
        if end <= start:
            return True
        try:
            self.map.madvise(MADV_POPULATE_WRITE, start, end - start)
        except (OSError, ValueError, AttributeError):
            return False
        return True

    def allocator(self) -> Allocator:
        """``empty(n, dtype)``: arrays laid one after the other in the arena, ``np.empty``'s
        once it is full."""
        return Allocator(self)


class Allocator:
    """``empty(n, dtype)`` for one task: arrays laid one after the other in an arena, each at a
    cache line's start, and ``np.empty``'s for one that does not fit in what is left."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.at = 0

    def fits(self, sizes: list[int]) -> bool:
        """Whether arrays of these byte ``sizes``, laid in turn, fit in what is left."""
        at = self.at
        for n in sizes:
            at = -(-at // ALIGN) * ALIGN + n
        return at <= self.arena.size

    def __call__(self, n: int, dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        start = -(-self.at // ALIGN) * ALIGN
        if start + n * dt.itemsize > self.arena.size:
            return np.empty(n, dt)
        self.at = start + n * dt.itemsize
        # Mapped in as laid: only what a task uses (the arena is sized for the worst case).
        self.arena.map_in(start, n * dt.itemsize)
        return np.frombuffer(self.arena.map, dt, n, start)


def per_event() -> int:
    """Bytes of the arena per event of the trace: its columns' and the kernel's work arrays'
    for one slot (18 + 13)."""
    from sweepq.sweeper.replay import WORK_BYTES_PER_SLOT

    return EVENT_BYTES + WORK_BYTES_PER_SLOT


def bytes_for(path: str) -> int:
    """Bytes of the arena for the Parquet trace at ``path`` (its rows from the footers, times
    :func:`per_event`); 0 when it is not one that a direct task would read (a CSV,
    unreadable, or more than direct.MAX_READS events)."""
    from sweepq.pipeline.direct import MAX_READS
    from sweepq.sweeper.traces import TraceError, parquet_files, row_groups

    if path.endswith(".csv"):
        return 0
    try:
        rows = sum(n for _, _, n in row_groups(*parquet_files(path)))
    except (OSError, TraceError):
        return 0
    return rows * per_event() + 8 * ALIGN if 0 < rows <= MAX_READS else 0


def prepare(path: str | None, stop=lambda: False) -> Arena | None:
    """In the pre-started daemon, before it forks: the arena for the trace at ``path``, made
    present until ``stop()``; None when there is none to make."""
    global _arena
    size = bytes_for(path) if path else 0
    if size <= 0:
        return None
    _arena = Arena(size)
    _arena.populate(stop)
    return _arena


def claimed() -> Allocator | None:
    """In a task: an ``empty(n, dtype)`` that lays its arrays in the daemon's arena when this
    process holds it (the first to ask, for as long as it lives), else None; at most once a
    process, since a reused worker may still hold the columns it laid there before. Each
    array's pages are mapped into this process as it is laid (:meth:`Arena.map_in`)."""
    global _given
    if _arena is None or _given:  # once a process: a second read must not overlay the first's columns
        return None
    try:
        fcntl.lockf(_arena.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    _given = True
    return _arena.allocator()


def lend_work(empty: Allocator, slots: int) -> bool:
    """Lay the replay kernel's work arrays for ``slots`` slots in the arena after what
    ``empty`` laid there, and give them to this process's workspace for good (the next
    replay here takes them: sweeper/replay.py ``work_of``). Nothing when they do not all fit
    (the kernel's work is then fresh memory, as before); returns whether they did."""
    from sweepq.sweeper.replay import WORK_DTYPES, keep_work

    if not empty.fits([slots * dt.itemsize for dt in WORK_DTYPES]):
        return False
    keep_work(*(empty(slots, dt) for dt in WORK_DTYPES))
    return True
