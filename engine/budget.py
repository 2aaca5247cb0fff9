"""The memory budget: a bound on memory, kept whatever the producers do (docs/sweeper.md,
"The memory budget").

Without a budget sweepq does what seed 003 says and no more: the sweeper wakes every
interval and sweeps the queues its rule targets. With ``MemorySettings(budget=N)``
three things are added, in this order of force:

1. **Sweeping beyond the rule.** When what is reserved (below) passes the *high mark*
   (``HIGH`` of the budget) the sweeper is woken at once, not at its next interval, and
   sweeps beyond its rule, largest sweepable queues first, each keeping its x + extra
   buffer, until the *low mark* (``LOW``); its pace rises with the pressure, from its duty
   (10 %) at the high mark to all the time at the budget.
2. **The put policy** of each queue (``memory_policy``), as Artemis's address-full policies:
   ``PAGE`` (the default), from ``PAGE_AT`` of the budget: new messages go to the rear list
   of their lane and the producer writes the queue out itself, down to its buffer, each
   page's worth (:meth:`MemoryBudget.page_size`), through the one sweep protocol
   (sweeper.cycle.Sweeper.page_out); ``BLOCK``: a put that would take what is
   reserved past the budget waits for room up to the queue's ``memory_wait_ms``, then fails
   with MQRC_STORAGE_NOT_AVAILABLE (2071); ``FAIL``: 2071 at once. Nothing already queued is
   ever dropped.
3. **Memory given back.** After ``TRIM_AFTER`` bytes (or an eighth of the peak, when that is
   less) have gone since the peak (swept, or got), the allocator is asked to return free
   memory to the system (glibc ``malloc_trim``), so resident memory falls as the queues
   drain; gets count again every ``check_every`` bytes they free, and close gives back too.

What is counted (:meth:`MemoryBudget.use`), by ``budget_counts``:

- ``"held"`` (the default without a budget, where nothing is bounded): the records in
  memory (their bytes plus ``PER_MESSAGE`` for the bytes object and the lane's arrays) and
  the store's memtables and block cache.
- ``"resident"`` (the default with a budget, ``MemorySettings``): the process's resident
  memory (what the OS, a container's limit and the OOM killer see) above its *baseline*,
  the resident memory when the queue manager opened less what was held then; or what is
  held, when that is more. Everything the process takes after the open counts: the
  interpreter's and the allocator's slack, RocksDB's own, the application's. Freed memory
  is given back sooner (a 32nd of the budget), since what glibc keeps between two trims is
  resident.

What is *reserved* is the count plus the headroom: what memory can still grow by without a
put, so that no policy admits a put into room that is already promised. The store's
memtables and block cache may fill up to their limits (a sweep writes blobs before it frees
their messages; a get reads blocks), and counting resident memory, a sweep takes
``SWEEP_PER_MESSAGE`` for a while per message in memory. The marks and the policies compare
what is reserved, so what is counted stays within the budget.

The count is refreshed every ``check_every`` bytes put to a queue, when a put does not fit
what was counted, and when a wait or the sweeper asks, from counters read without the
queues' locks. Between two counts the bytes put are added as they come (``unchecked``), and a
BLOCK or FAIL put reserves its bytes before it is made, so two producers cannot both take
the last room.

Thread safety: every method may be called from any thread, and none is called with a queue's
lock held. The budget's flags and figures (``paging``, ``room``, ``over``, ``pressure``,
``last_total``, ``reserved``, ``unchecked``, ``counts``) are plain attributes written by
whichever thread counted last: each write is atomic, and a decision made on a value one
refresh old is corrected at the next (a lost update of ``unchecked`` loses one put's bytes
until then). Only BLOCK's waits use a lock (a Condition), never taken while a queue lock is
held; the waiters take the room one at a time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .constants import MemoryPolicy, Reason
from .errors import MQError
from .record import HEAD_LEN as _HEAD_LEN

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from sweepq.sweeper import Sweeper
    from sweepq.sweeper.clock import Clock

    from .queue import LocalQueue

HIGH = 0.8  # the sweeper is woken, and sweeps beyond its rule, above this share of the budget
LOW = 0.6  # ... down to this share
PAGE_AT = 0.9  # queues with memory_policy PAGE page from here (the slack of a count stays under 1)
PER_MESSAGE = 64  # bytes a queued message costs beyond its record: the bytes object, the lane arrays
# Bytes a sweep takes for a while per message in memory (the slot numbers it walks, the runs'
# lists, the MsgIds and frames it writes): 60 to 130 measured, 300,000 messages of 100 B and
# 50,000 of 1 KiB. Resident memory pays it during every sweep: a resident budget reserves it.
SWEEP_PER_MESSAGE = 128
TRIM_AFTER = 16 * 1024 * 1024  # freed bytes after which the allocator is asked to give memory back
COUNTS = ("held", "resident")  # what a budget counts: MemorySettings.counts


def check_counts(counts: object, budget: int) -> str:
    """``budget_counts`` of a queue manager whose memory budget is ``budget`` bytes.

    :raises MQError: PARM_VALUE_ERROR for anything but ``"held"`` or ``"resident"``, or
        ``"resident"`` without a budget."""
    if counts not in COUNTS:
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"budget_counts must be 'held' (what the queues and the store hold) or 'resident' (the process's "
            f"resident memory above its baseline), not {counts!r:.40}",
        )
    if counts == "resident" and not budget:
        raise MQError(Reason.PARM_VALUE_ERROR, "budget_counts='resident' needs a memory_budget, e.g. '100MB'")
    return str(counts)


def resident_bytes() -> int:
    """The process's resident memory now (RSS, what ``ps`` and the OOM killer see): one read of
    ``/proc/self/statm`` on Linux (a few microseconds, so a budget can read it at every
    count), psutil elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        import psutil  # type: ignore[import-untyped]  # no stubs installed; one call

        return int(psutil.Process().memory_info().rss)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def peak_resident_bytes() -> int:
    """The process's peak resident memory so far (the kernel's high-water mark, ``VmHWM``
    of ``/proc/self/status`` on Linux). Not ``getrusage``'s ``ru_maxrss``: a process started
    by ``subprocess`` (vfork, then exec) inherits its parent's peak there, so a small child of
    a large parent reports the parent's."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def store_options_within(budget: int, options: dict | None, counts: str = "held") -> dict:
    """The store options of a queue manager with a memory budget: RocksDB's memtable cap and
    block cache are sized from the budget (an eighth and a sixteenth of it, never more than
    their defaults, the memtables never under RocksDB's 1 MiB floor) unless set explicitly,
    so that the store's own memory fits in what the budget bounds. Counting resident memory,
    zstd dictionaries are off unless asked for: training one takes about 12 MB for a moment,
    for each queue of small messages, at its first sweep (measured: 2,000 records of 512 B)."""
    from sweepq.blobstore.kv import DEFAULT_BLOCK_CACHE_BYTES, DEFAULT_WRITE_BUFFER_BYTES

    out = dict(options or {})
    out.setdefault("write_buffer_bytes", min(DEFAULT_WRITE_BUFFER_BYTES, max(1 << 20, budget // 8)))
    out.setdefault("block_cache_bytes", min(DEFAULT_BLOCK_CACHE_BYTES, budget // 16))
    if counts == "resident":
        out.setdefault("dictionaries", False)
    return out


@dataclass(frozen=True)
class MemoryUse:
    """What the queues and the store hold in memory, in bytes (MB = 10^6 bytes in reports),
    and with ``budget_counts="resident"`` the process's resident memory above its baseline."""

    messages: int  # records in memory and their per-message cost
    store: int  # the store's memtables and block cache
    budget: int  # 0: none
    resident: int = 0  # resident memory above the baseline (budget_counts="resident"); else 0
    baseline: int = 0  # the process's resident memory the budget does not count (ditto)

    @property
    def held(self) -> int:
        """What the queues and the store hold: the messages in memory and the store's memory."""
        return self.messages + self.store

    @property
    def total(self) -> int:
        """What the budget counts: what is held, or the resident memory above the baseline
        when that is more (``budget_counts="resident"``)."""
        return max(self.messages + self.store, self.resident)


class MemoryBudget:
    """The bound of one queue manager (see the module docstring).

    ``queues()`` lists the queues, ``store_memory()`` the store's memory by kind (with its
    limits; empty until the store opens, when ``unopened_limit`` stands for them),
    ``sweeper`` the manager's sweeper (woken and used for page-outs). ``counts``: ``"held"``
    or ``"resident"`` (the module docstring)."""

    def __init__(
        self,
        budget: int,
        queues: Callable[[], Iterable[LocalQueue]],
        store_memory: Callable[[], dict[str, int]],
        sweeper: Sweeper | None,
        clock: Clock,
        counts: str = "held",
        unopened_limit: int = 0,
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
        self.counts_resident = counts == "resident"
        self.unopened_limit = unopened_limit  # the store's limits while it reports none (not opened yet)
        self._room = threading.Condition(threading.Lock())
        self.paging = False  # PAGE_AT is reached: the put path calls before_put (PAGE queues page)
        self.room = 0  # bytes a put may have and still not need before_put (the put path tests this)
        self.pressure = 0.0  # 0 at or below the high mark, 1 at the budget
        self.waiting = 0  # puts waiting for room (BLOCK)
        self.unchecked = 0  # bytes put (or admitted) to any queue since the last count
        self.page_bytes = self.page_size(256 * 1024)  # a paging queue writes its rear lists out at this much
        self.ahead_bytes = self.ahead_size(256 * 1024)  # what a swept queue reads ahead at most (manager sets it)
        self.last_total = 0  # what the budget counted last (MemoryUse.total)
        self.headroom = 0  # what memory may still take without a put (_count)
        self.reserved = 0  # last_total + headroom: what the marks and the policies compare
        self._peak = 0  # the most held since the allocator last gave memory back
        self._churn = 0  # bytes put since then, and bytes gets moved (after_get)
        self._unswept: dict[str, int] = {}  # each queue's bytes brought back from blobs at its last count
        self._trim_step = min(TRIM_AFTER, max(1 << 20, budget // 32)) if self.counts_resident else TRIM_AFTER
        self.counts = {"wakes": 0, "page_outs": 0, "blocked": 0, "refused": 0, "trims": 0}
        self.baseline = 0
        if self.counts_resident:
            one_arena()
            # What the process holds that is not sweepq's: its resident memory now, less what
            # is counted already (messages a data directory gave back), with the allocator's
            # free memory given back first so that it does not hide in the baseline.
            give_back()
            self.baseline = max(0, resident_bytes() - self.use().held)
        if budget:
            self.refresh()  # messages a data directory gave back may reach a mark already

    @property
    def over(self) -> bool:
        """What is reserved is within ``check_every`` of the budget, as last counted: BLOCK and
        FAIL puts of more than the rest do not fit (the console shows it)."""
        return self.reserved + self.check_every > self.budget

    def ahead_size(self, blob_bytes: int) -> int:
        """How many bytes of records a swept queue reads ahead of its gets under this budget
        (engine/tiering.py ``readahead_locked``): a 32nd of the budget, one blob's worth at
        least. Read-ahead is memory no policy can refuse: a get must be served."""
        return max(blob_bytes, self.budget // 32)

    def page_size(self, blob_bytes: int) -> int:
        """How much a paging queue lets its rear lists hold before it writes them out: a
        blob's worth, but no more than an eighth of the room between PAGE_AT and the budget,
        so that many queues paging at once (each with a page in waiting) stay inside it."""
        return max(1, min(blob_bytes, (self.budget - self.page_at) // 8))

    # -- counting ---------------------------------------------------------------------------

    def use(self) -> MemoryUse:
        """What is held now (counters read without the queues' locks)."""
        return self._count()[0]

    def _count(self) -> tuple[MemoryUse, int]:
        """What is held now, and the headroom: how much more memory may be taken without the
        count seeing it first: by the store (its memtables and block cache up to their limits:
        a sweep's blobs, a get's reads), by the pages of the paging queues until each is
        written out, and, counting resident memory, by a sweep of what is in memory."""
        messages = count = pages = 0
        for q in self._queues():
            ls = q.lanes
            messages += ls.mem_bytes
            count += q.in_memory
            if q.sweep.paging:  # the rest of its page may fill before it is written out
                pages += max(0, q.sweep.page_bytes - q.sweep.paged)
        mem = self._store_memory()
        store = mem.get("memtable_bytes", 0) + mem.get("block_cache_bytes", 0)
        limits = mem.get("write_buffer_limit", 0) + mem.get("block_cache_limit", 0) if mem else self.unopened_limit
        headroom = max(0, limits - store) + pages
        resident = 0
        if self.counts_resident:
            resident = max(0, resident_bytes() - self.baseline)
            headroom += count * SWEEP_PER_MESSAGE
        use = MemoryUse(messages + count * PER_MESSAGE, store, self.budget, resident, self.baseline)
        return use, headroom

    def refresh(self) -> int:
        """Count again: update the flags and ``pressure``, wake the sweeper above the high
        mark, let waiting puts go once there is room, and ask the allocator to give memory
        back once enough has gone since the peak; return the total counted."""
        put = self.unchecked  # the bytes put from here on are counted, or stay unchecked
        use, headroom = self._count()
        total = use.total
        self.unchecked -= put
        self.last_total, self.headroom = total, headroom
        reserved = self.reserved = total + headroom
        above = reserved - self.high
        self.pressure = 0.0 if above <= 0 else min(1.0, above / max(1, self.budget - self.high))
        if reserved > self.high and self.sweeper is not None:
            self.counts["wakes"] += 1
            self.sweeper.poke()
        if self.waiting and reserved < self.budget:
            with self._room:
                self._room.notify_all()  # the waiters see whether their put fits
        self.paging = reserved >= self.page_at
        self.room = self.page_at - reserved - self.check_every
        self._give_back_freed(use, put)
        return total

    def _give_back_freed(self, use: MemoryUse, put: int) -> None:
        # Give back once what is held fell from its peak by TRIM_AFTER, or an eighth of the
        # peak when that is less (so the last megabytes of a drain go back too), never for
        # less than a megabyte. Counting resident memory, sooner: by a 32nd of the budget
        # (what glibc keeps between two trims is resident memory the budget pays for), and
        # above the high mark after every 32nd of the budget put, whatever is held: puts
        # paged out as they come free as much as they take, and the free memory glibc keeps
        # of it grows in each thread's arena until a trim.
        held = use.held
        self._peak = max(self._peak, held)
        self._churn += put
        step = min(self._trim_step, max(1 << 20, self._peak // 8))
        due = self._peak - held > step
        if self.counts_resident and self.reserved > self.high and self._churn > self._trim_step:
            due = True
        if due and give_back():
            self.counts["trims"] += 1
            self._peak = held
            self._churn = 0

    def need(self) -> int:
        """Bytes to free to bring what is reserved down to the low mark (counted now)."""
        self.refresh()
        return self.reserved - self.low

    # -- the put side ------------------------------------------------------------------------

    def before_put(self, q: LocalQueue, size: int, count: int) -> None:
        """A put to ``q`` of ``count`` messages of ``size`` bytes in all (payloads, or an
        item's estimate: engine/putpath.py) from ``PAGE_AT`` on, or larger than ``room`` (no
        queue lock held): its policy. PAGE starts paging; BLOCK and FAIL admit the put only
        if what is reserved and its bytes stay within the budget, and reserve them.

        :raises MQError: STORAGE_NOT_AVAILABLE (2071) for FAIL, or BLOCK after its wait,
            when the put does not fit."""
        nbytes = size + count * (PER_MESSAGE + _HEAD_LEN)
        if not self.paging and nbytes <= self.room:
            return
        policy = q.attrs.memory_policy
        if policy == MemoryPolicy.PAGE:
            q.sweep.start_paging()
            return
        if self._fits(nbytes):
            return
        self._recount(nbytes)
        if self._fits(nbytes):
            return
        if policy == MemoryPolicy.FAIL:
            self.counts["refused"] += 1
            raise self._full(q, "memory_policy=FAIL")
        self._wait_for_room(q, nbytes)

    def _recount(self, nbytes: int) -> None:
        """Count again before a put of ``nbytes`` is refused (the count lags by what was put
        since). Counting resident memory, when it would still not fit, the allocator gives
        back what it keeps first: items a get freed (kept as objects, they leave no record
        bytes for :meth:`after_get` to see) stay resident in glibc's heap until a trim."""
        self.refresh()
        if self.counts_resident and self.reserved + self.unchecked + nbytes > self.budget and give_back():
            self.counts["trims"] += 1
            self.refresh()

    def _fits(self, nbytes: int) -> bool:
        """Whether a put of ``nbytes`` fits; if so it is reserved at once (counted as put), so
        that a put admitted in another thread, not yet in its queue, is not admitted twice
        over. (after_put counts it again: too much, never too little, until the next count.)"""
        if self.reserved + self.unchecked + nbytes > self.budget:
            return False
        self.unchecked += nbytes
        return True

    def _wait_for_room(self, q: LocalQueue, nbytes: int) -> None:
        wait_ms = q.attrs.memory_wait_ms
        deadline = self.clock.now() + wait_ms / 1000.0
        self.counts["blocked"] += 1
        with self._room:  # the waiters take the room one at a time
            self.waiting += 1
            try:
                while True:
                    self._room.release()
                    try:
                        self._recount(nbytes)
                    finally:
                        self._room.acquire()
                    if self._fits(nbytes):
                        return
                    if self.clock.now() >= deadline:
                        self.counts["refused"] += 1
                        raise self._full(q, f"memory_policy=BLOCK, waited {wait_ms} ms")
                    self.clock.wait(self._room, min(deadline, self.clock.now() + 0.05))
            finally:
                self.waiting -= 1

    def after_get(self, q: LocalQueue) -> None:
        """A get took messages from ``q`` (no lock held): count again when puts wait for room
        (BLOCK), and every ``check_every`` bytes that left memory, so that memory is given
        back while queues drain, not only at the sweeper's next interval."""
        # What moved: the change in what the queue holds, and what blobs brought back since
        # (a get_many that brings blobs back and takes as much leaves what is held as it was).
        unswept = q.tier.counters.bytes_unswept_raw
        moved = abs(q.checked_bytes - q.lanes.mem_bytes) + max(0, unswept - self._unswept.get(q.name, 0))
        if self.waiting or moved >= self.check_every:
            q.checked_bytes = q.lanes.mem_bytes
            self._unswept[q.name] = unswept
            self._churn += moved
            self.refresh()

    def batch_limit(self, q: LocalQueue, wanted: int) -> int:
        """How many messages a ``get_many`` of ``q`` takes at once (engine/handle.py):
        ``wanted``, or, counting resident memory, no more than fit in the room between what is
        reserved and the budget, and never fewer than ``check_every``'s worth (at least one).
        The caller holds what a batch returns (each message its record and a copy of its data;
        a ``sweepq.Queue`` makes its item of that copy too: three times the record, counted),
        and that is resident memory the budget counts: a drain by ``get_many(5000)`` of 1 KiB
        messages held 11 MB at once, and the count passed a 50 MB budget by up to 9 MB
        (bench/memory.py ``fill_and_drain``). An item kept as an object adds what the last
        one put weighed (``LocalQueue.item_weight``, engine/sizes.py ``item_bytes``): its
        record is its header alone, so by the record a ``get_many(5000)`` of 1 KiB items took
        all 5,000 whatever the room. A batch cut short is not an error: ``get_many`` returns
        up to what it is asked for."""
        if not self.counts_resident:
            return wanted
        held = q.in_memory
        record = q.mem_bytes // held if held else 0
        per = PER_MESSAGE + 3 * max(record, _HEAD_LEN) + q.item_weight
        room = self.budget - self.reserved - self.unchecked
        return min(wanted, max(1, self.check_every // per, room // per))

    def after_put(self, q: LocalQueue, nbytes: int) -> None:
        """``nbytes`` were put to ``q`` (no lock held): every ``check_every`` bytes put to
        any queue, count again; a paging queue writes its rear lists out once they hold a
        page (:meth:`page_size`; the producer pays), and stops paging once under the low
        mark. The counters are updated without a lock: a lost update only moves a check by
        one put."""
        # One count of unchecked bytes for all queues, not one per queue: with many queues
        # the per-queue counts added up to a lag of check_every times the queues.
        self.unchecked += nbytes
        sweep = q.sweep  # the queue's paging (engine/queuesweep.py)
        if sweep.paging:
            sweep.paged += nbytes
        if self.unchecked >= self.check_every:
            q.checked_bytes = q.lanes.mem_bytes
            self.refresh()
            if sweep.paging and self.reserved < self.low:
                sweep.stop_paging()
        # The pages in waiting are reserved (_count), so a paging queue writes out a page at
        # a time even at the budget: writing every put out made a blob of each message,
        # which kept more resident memory than the message (a blob's index, RocksDB's keys).
        if sweep.paging and sweep.page_due():
            sweep.paged = 0
            self.counts["page_outs"] += 1
            self.sweeper.page_out(sweep)  # type: ignore[union-attr]  # a budget with queues has one

    def _full(self, q: LocalQueue, why: str) -> MQError:
        what = "resident memory above the baseline" if self.counts_resident else "held"
        return MQError(
            Reason.STORAGE_NOT_AVAILABLE,
            f"the queue manager's memory budget ({self.budget / 1e6:,.1f} MB) is full: {self.last_total / 1e6:,.1f} MB "
            f"{what}, {self.headroom / 1e6:,.1f} MB reserved for what may still grow (RocksDB's memtables and "
            f"cache up to their limits, pages in waiting); the put to {q.name!r} was refused ({why}); get messages, "
            "raise memory_budget, or use memory_policy=PAGE",
        )


_libc: ctypes.CDLL | Literal[False] | None = None  # None: not looked up yet; False: none
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``malloc_trim`` and ``mallopt``), else None."""
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(name) if name else False
            if _libc and not (hasattr(_libc, "malloc_trim") and hasattr(_libc, "mallopt")):
                _libc = False
        except OSError:
            _libc = False
    return _libc or None


def give_back() -> bool:
    """Ask the C allocator to return free memory to the system (glibc's ``malloc_trim``);
    False where there is no such call. Records over 512 bytes are malloc'd one by one, and
    glibc keeps freed blocks for reuse: without this, resident memory stays at its peak."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def one_arena() -> bool:
    """Make every thread that allocates from now on share glibc's main arena
    (``mallopt(M_ARENA_MAX, 1)``), unless ``MALLOC_ARENA_MAX`` says otherwise; False where
    there is no such call. For a resident budget: by default each thread gets an arena of
    its own, which keeps its own free memory (a producer's records are freed into its arena,
    a sweep's buffers into another's), and the demo's workload with a 24 MB budget peaked at
    1.21 x budget + baseline with its eight threads' arenas, 1.10 x with two, 1.05 x with
    one. Under the GIL, Python threads seldom allocate at the same moment: two full-speed
    producers put as fast with one arena.

    glibc fixes its arena limit the first time a thread needs an arena of its own, so this
    call only works in a process where no other thread has allocated yet; numpy's threads
    (imported with the engine) usually have. A process that wants its resident budget to
    hold starts with ``MALLOC_ARENA_MAX=1`` in its environment: ``sweepq demo`` sets it for
    its runs (docs/sweeper.md)."""
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, 1))
