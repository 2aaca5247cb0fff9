"""The memory budget: a bound on what the queues and the store hold in memory, kept whatever
the producers do (docs/sweeper.md, "The memory budget").

Without a budget sweepq does what seed 003 says and no more: the sweeper wakes every
interval and sweeps the queues its rule targets. With ``QueueManager(memory_budget=N)``
three things are added, in this order of force:

1. **Sweeping beyond the rule.** When what the queues and the store hold passes the *high
   mark* (``HIGH`` of the budget) the sweeper is woken at once, not at its next interval,
   and sweeps beyond its rule, largest sweepable queues first, each keeping its x + extra
   buffer, until the *low mark* (``LOW``); its pace rises with the pressure, from its duty
   (10 %) at the high mark to all the time at the budget.
2. **The put policy** of each queue (``memory_policy``), as Artemis's address-full policies:
   ``PAGE`` (the default), from ``PAGE_AT`` of the budget: new messages go to the rear list
   of their lane and the producer writes the queue out itself, down to its buffer, each
   blob's worth, through the one sweep protocol (sweeper.cycle.Sweeper.page_out); once the
   budget itself is reached, ``BLOCK``: a put waits for room up to the queue's
   ``memory_wait_ms``, then fails with MQRC_STORAGE_NOT_AVAILABLE (2071); ``FAIL``: 2071 at
   once. Nothing already queued is ever dropped.
3. **Memory given back.** After ``TRIM_AFTER`` bytes (or an eighth of the peak, when that is
   less) have gone since the peak (swept, or got), the allocator is asked to return free
   memory to the system (glibc ``malloc_trim``), so resident memory falls as the queues
   drain; gets count again every ``check_every`` bytes they free, and close gives back too.

What is counted (:meth:`MemoryBudget.use`): the records in memory (their bytes plus
``PER_MESSAGE`` for the bytes object and the lane's arrays) and the store's memtables and
block cache. The count is refreshed every ``check_every`` bytes put to a queue and when a
wait or the sweeper asks, from counters read without the queues' locks: it may lag one
refresh behind, never more.

Thread safety: every method may be called from any thread, and none is called with a queue's
lock held. The budget's flags and figures (``over``, ``paging``, ``pressure``,
``last_total``, ``counts``) are plain attributes written by whichever thread counted last:
each write is atomic, and a decision made on a value one refresh old is corrected at the
next. Only BLOCK's waits use a lock (a Condition), never taken while a queue lock is held.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .constants import MemoryPolicy, Reason
from .errors import MQError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from sweepq.sweeper import Sweeper
    from sweepq.sweeper.clock import Clock

    from .queue import LocalQueue

HIGH = 0.8  # the sweeper is woken, and sweeps beyond its rule, above this share of the budget
LOW = 0.6  # ... down to this share
PAGE_AT = 0.9  # queues with memory_policy PAGE page from here (the slack of a count stays under 1)
MIN_BUDGET = 16 * 1024  # a smaller budget holds no more than a few messages: refused as a likely missing unit
PER_MESSAGE = 64  # bytes a queued message costs beyond its record: the bytes object, the lane arrays
TRIM_AFTER = 16 * 1024 * 1024  # freed bytes after which the allocator is asked to give memory back


def store_options_within(budget: int, options: dict | None) -> dict:
    """The store options of a queue manager with a memory budget: RocksDB's memtable cap and
    block cache are sized from the budget (an eighth and a sixteenth of it, never more than
    their defaults, the memtables never under RocksDB's 1 MiB floor) unless set explicitly,
    so that the store's own memory fits in what the budget bounds."""
    from sweepq.blobstore.kv import DEFAULT_BLOCK_CACHE_BYTES, DEFAULT_WRITE_BUFFER_BYTES

    out = dict(options or {})
    out.setdefault("write_buffer_bytes", min(DEFAULT_WRITE_BUFFER_BYTES, max(1 << 20, budget // 8)))
    out.setdefault("block_cache_bytes", min(DEFAULT_BLOCK_CACHE_BYTES, budget // 16))
    return out


@dataclass(frozen=True)
class MemoryUse:
    """What the queues and the store hold in memory, in bytes (MB = 10^6 bytes in reports)."""

    messages: int  # records in memory and their per-message cost
    store: int  # the store's memtables and block cache
    budget: int  # 0: none

    @property
    def total(self) -> int:
        return self.messages + self.store


class MemoryBudget:
    """The bound of one queue manager (see the module docstring).

    ``queues()`` lists the queues, ``store_memory()`` the store's memory by kind,
    ``sweeper`` the manager's sweeper (woken and used for page-outs)."""

    def __init__(
        self,
        budget: int,
        queues: Callable[[], Iterable[LocalQueue]],
        store_memory: Callable[[], dict[str, int]],
        sweeper: Sweeper | None,
        clock: Clock,
    ):
        self.budget = budget
        self.high = int(budget * HIGH)
        self.low = int(budget * LOW)
        self.page_at = int(budget * PAGE_AT)
        self.check_every = max(16 * 1024, budget // 256)
        self._queues = queues
        self._store_memory = store_memory
        self.sweeper = sweeper
        self.clock = clock
        self._room = threading.Condition(threading.Lock())
        self.over = False  # the budget itself is reached: BLOCK and FAIL refuse puts
        self.paging = False  # PAGE_AT is reached: PAGE queues page (the put path tests this first)
        self.pressure = 0.0  # 0 at or below the high mark, 1 at the budget
        self.waiting = 0  # puts waiting for room (BLOCK)
        self.unchecked = 0  # bytes put to any queue since the last count
        self.page_bytes = self.page_size(256 * 1024)  # a paging queue writes its rear lists out at this much
        self.last_total = 0
        self._peak = 0  # the highest total since the allocator last gave memory back
        self.counts = {"wakes": 0, "page_outs": 0, "blocked": 0, "refused": 0, "trims": 0}

    def page_size(self, blob_bytes: int) -> int:
        """How much a paging queue lets its rear lists hold before it writes them out: a
        blob's worth, but no more than an eighth of the room between PAGE_AT and the budget,
        so that many queues paging at once (each with a page in waiting) stay inside it."""
        return max(1, min(blob_bytes, (self.budget - self.page_at) // 8))

    # -- counting ---------------------------------------------------------------------------

    def use(self) -> MemoryUse:
        """What is held now (counters read without the queues' locks)."""
        messages = 0
        for q in self._queues():
            ls = q.lanes
            messages += ls.mem_bytes + ls.count * PER_MESSAGE
        mem = self._store_memory()
        return MemoryUse(messages, mem.get("memtable_bytes", 0) + mem.get("block_cache_bytes", 0), self.budget)

    def refresh(self) -> int:
        """Count again: update ``over`` and ``pressure``, wake the sweeper above the high
        mark, let waiting puts go once under the budget, and ask the allocator to give
        memory back once ``TRIM_AFTER`` bytes have gone since the peak; return the total."""
        total = self.use().total
        self.last_total = total
        self.pressure = 0.0 if total <= self.high else min(1.0, (total - self.high) / max(1, self.budget - self.high))
        if total > self.high and self.sweeper is not None:
            self.counts["wakes"] += 1
            self.sweeper.poke()
        over = total >= self.budget
        if self.over and not over:
            with self._room:
                self._room.notify_all()
        self.over = over
        self.paging = total >= self.page_at
        self._peak = max(self._peak, total)
        # Give back at TRIM_AFTER freed, or an eighth of the peak when that is less (so the
        # last megabytes of a drain go back too), never for less than a megabyte.
        if self._peak - total > min(TRIM_AFTER, max(1 << 20, self._peak // 8)) and give_back():
            self.counts["trims"] += 1
            self._peak = total
        return total

    # -- the put side ------------------------------------------------------------------------

    def before_put(self, q: LocalQueue) -> None:
        """A put to ``q`` from ``PAGE_AT`` on: its policy (no queue lock held).

        :raises MQError: STORAGE_NOT_AVAILABLE (2071) for FAIL, or BLOCK after its wait,
            once the budget itself is reached."""
        policy = q.attrs.memory_policy
        if policy == MemoryPolicy.PAGE:
            q.start_paging()
            return
        if not self.over:
            return
        if policy == MemoryPolicy.FAIL:
            self.counts["refused"] += 1
            raise self._full(q, "memory_policy=FAIL")
        self._wait_for_room(q)

    def _wait_for_room(self, q: LocalQueue) -> None:
        wait_ms = q.attrs.memory_wait_ms
        deadline = self.clock.now() + wait_ms / 1000.0
        self.counts["blocked"] += 1
        with self._room:
            self.waiting += 1
            try:
                while self.over:
                    if self.clock.now() >= deadline:
                        self.counts["refused"] += 1
                        raise self._full(q, f"memory_policy=BLOCK, waited {wait_ms} ms")
                    self._room.release()
                    try:
                        self.refresh()
                    finally:
                        self._room.acquire()
                    if self.over:
                        self.clock.wait(self._room, min(deadline, self.clock.now() + 0.05))
            finally:
                self.waiting -= 1

    def after_get(self, q: LocalQueue) -> None:
        """A get took messages from ``q`` (no lock held): count again when puts wait for room
        (BLOCK), and every ``check_every`` bytes that left memory, so that memory is given
        back while queues drain, not only at the sweeper's next interval."""
        if self.waiting or q.checked_bytes - q.lanes.mem_bytes >= self.check_every:
            q.checked_bytes = q.lanes.mem_bytes
            self.refresh()

    def after_put(self, q: LocalQueue, nbytes: int) -> None:
        """``nbytes`` were put to ``q`` (no lock held): every ``check_every`` bytes put to
        any queue, count again; a paging queue writes its rear lists out once they hold a
        page (:meth:`page_size`; at every put over the budget itself: the producer pays),
        and stops paging once under the low mark. The counters are updated
        without a lock: a lost update only moves a check by one put."""
        # One count of unchecked bytes for all queues, not one per queue: with many queues
        # the per-queue counts added up to a lag of check_every times the queues.
        self.unchecked += nbytes
        if q.paging:
            q.paged += nbytes
        if self.unchecked >= self.check_every:
            self.unchecked = 0
            q.checked_bytes = q.lanes.mem_bytes
            self.refresh()
            if q.paging and self.last_total < self.low:
                q.stop_paging()
        # Over the budget itself a paging queue writes out at every put, whatever its page
        # holds: the pages in waiting on every queue must not carry the count further.
        if q.paging and (q.page_due() or self.over):
            q.paged = 0
            self.counts["page_outs"] += 1
            self.sweeper.page_out(q)  # type: ignore[union-attr]  # a budget with queues has one

    def _full(self, q: LocalQueue, why: str) -> MQError:
        return MQError(
            Reason.STORAGE_NOT_AVAILABLE,
            f"the queue manager's memory budget ({self.budget / 1e6:,.1f} MB) is full: {self.last_total / 1e6:,.1f} MB "
            f"held; the put to {q.name!r} was refused ({why}); get messages, raise memory_budget, or use "
            "memory_policy=PAGE",
        )


_libc: ctypes.CDLL | Literal[False] | None = None  # None: not looked up yet; False: none


def give_back() -> bool:
    """Ask the C allocator to return free memory to the system (glibc's ``malloc_trim``);
    False where there is no such call. Records over 512 bytes are malloc'd one by one, and
    glibc keeps freed blocks for reuse: without this, resident memory stays at its peak."""
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(name) if name else False
            if _libc and not hasattr(_libc, "malloc_trim"):
                _libc = False
        except OSError:
            _libc = False
    if not _libc:
        return False
    _libc.malloc_trim(0)
    return True
