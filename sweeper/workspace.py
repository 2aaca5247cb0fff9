"""A per-process pool of work arrays, so that a call that needs large scratch memory reuses
pages that are present already instead of faulting in fresh ones.

Why: on this project's machine (a virtual machine whose balloon hands free pages back to the
host) the first touch of fresh memory costs the kernel's zeroing of each page
(``clear_page_erms``), and how much varies from run to run. The replay kernel
(sweeper/replay.py) needs about 13 bytes of scratch per slot (70 MB on the 10.8 M-event
trace of docs/pipeline.md); a second replay in the same process (a what-if grid, a reused
Spark worker) takes the first one's pages from here, and a direct task's come from memory the
pipeline's daemon made present while the JVM started (pipeline/arena.py).

Invariant: an array is either in the pool or lent to exactly one caller, never both; an
array handed out by :meth:`Workspace.take` is not handed out again until it is given back
by :meth:`Workspace.give`. So two threads never share a work array, and nothing a caller
keeps may alias an array it has given back (the caller's part: results are copies or fresh
arrays, never views of work arrays). The pool keeps at most ``per_type`` arrays of each
dtype and at most ``max_bytes`` in all; what a give would put beyond that is dropped (left
to the garbage collector), the larger arrays kept before the smaller.
"""

from __future__ import annotations

import os
import threading

import numpy as np

PER_TYPE = 4  # arrays kept per dtype
MAX_BYTES = 512 << 20  # bytes kept in all


class Workspace:
    """A thread-safe pool of 1-d arrays by dtype (see the module's invariant)."""

    def __init__(self, per_type: int = PER_TYPE, max_bytes: int = MAX_BYTES) -> None:
        self.per_type = per_type
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._free: dict[np.dtype, list[np.ndarray]] = {}
        self._bytes = 0

    def take(self, n: int, dtype) -> np.ndarray:
        """A 1-d array of ``dtype`` with at least ``n`` elements, its contents undefined: the
        smallest kept one that is large enough, taken out of the pool, else a fresh
        ``np.empty(n)``. Give it back with :meth:`give` when done."""
        dt = np.dtype(dtype)
        with self._lock:
            kept = self._free.get(dt, [])
            fits = [i for i, a in enumerate(kept) if len(a) >= n]
            if fits:
                # By place, not list.remove, which compares arrays with == (element-wise).
                a = kept.pop(min(fits, key=lambda i: len(kept[i])))
                self._bytes -= a.nbytes
                return a
        return np.empty(n, dt)

    def give(self, a: np.ndarray) -> None:
        """Put ``a`` (from :meth:`take`, or memory a caller lends for good, such as the
        pipeline's arena) back in the pool; the caller must not use it after. Past the
        limits, the smallest arrays of its dtype (``a`` among them) are dropped."""
        if a.ndim != 1 or not a.flags.writeable or not a.flags.c_contiguous or a.nbytes > self.max_bytes:
            return  # not a work array, or one too large to keep at all
        with self._lock:
            kept = self._free.setdefault(a.dtype, [])
            if any(k is a for k in kept):
                return  # given twice: kept once
            kept.append(a)
            self._bytes += a.nbytes
            kept.sort(key=len, reverse=True)
            while len(kept) > self.per_type or (self._bytes > self.max_bytes and kept):
                self._bytes -= kept.pop().nbytes
            if self._bytes > self.max_bytes:  # other dtypes' too: the smallest first
                for others in sorted(self._free.values(), key=lambda v: v[-1].nbytes if v else 0):
                    while others and self._bytes > self.max_bytes:
                        self._bytes -= others.pop().nbytes

    def clear(self) -> None:
        """Drop every array kept (their memory goes back when nothing else holds them)."""
        with self._lock:
            self._free.clear()
            self._bytes = 0

    def kept(self) -> list[np.ndarray]:
        """The arrays kept now (for tests and the bench): a snapshot."""
        with self._lock:
            return [a for v in self._free.values() for a in v]

    def _reinit_after_fork(self) -> None:
        """In a child just forked: a new lock. The parent's may have been held by another of
        its threads at the fork, which the child does not have: it would wait on it for ever.
        The arrays kept stay (the child's copies: its own from then on)."""
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays kept now."""
        return self._bytes


POOL = Workspace()  # this process's; a forked child inherits a copy (its own from then on)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL._reinit_after_fork)
