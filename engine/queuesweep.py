"""A queue's side of the slow queue sweeper, and of the memory budget's paging.

The sweeper (sweeper/cycle.py) drives each queue through the
:class:`~sweepq.sweeper.cycle.Sweepable` protocol: the counts the rule needs, then a sweep's
steps (:meth:`QueueSweep.sweep_begin`, :meth:`~QueueSweep.sweep_link` or
:meth:`~QueueSweep.sweep_abort` per target, :meth:`~QueueSweep.sweep_end`). The memory
budget (engine/budget.py) switches a queue's paging on and off (policy PAGE) and asks when a
page is due. Both talk to this object, one per :class:`~sweepq.engine.queue.LocalQueue`
(``q.sweep``), so that the queue itself keeps its messages and the calls on them.

Every method takes the queue's lock itself, briefly (engine/queue.py, "The lock rule"); the
runs are chosen and written without it (engine/tiering.py). One sweep of a queue at a time:
:meth:`QueueSweep.sweep_begin` takes :attr:`~QueueSweep.lock` and
:meth:`~QueueSweep.sweep_end` releases it; the two are always paired.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Protocol

from sweepq.sweeper.cycle import SweepCounts
from sweepq.sweeper.stats import SweepStats, percentile

from .core.lane import Need
from .tiering import Plan, QueueTier, Target

if TYPE_CHECKING:
    from sweepq.blobstore import BlobInfo, Store

    from .core.lanes import LaneSet
    from .core.lock import QueueLock
    from .queuebatches import QueueBatches


class Owner(Protocol):
    """What a queue's sweep reads and calls of its queue (engine/queue.py's ``LocalQueue``,
    which sits above this module)."""

    obtained: int

    @property
    def name(self) -> str: ...

    @property
    def mutex(self) -> QueueLock: ...

    @property
    def lanes(self) -> LaneSet: ...

    @property
    def tier(self) -> QueueTier: ...

    @property
    def deleted(self) -> bool: ...

    @property
    def batches(self) -> QueueBatches: ...

    def load(self, need: Need) -> None: ...

    def after_get(self) -> None: ...


class QueueSweep:
    """The sweep and paging of one queue (see the module docstring); a
    :class:`~sweepq.sweeper.cycle.Sweepable`.

    ``paging`` is on while the budget pages this queue's new messages out (policy PAGE over
    the budget): they go to the rear lists, which the producers write out a page at a time;
    ``paged`` counts the bytes put since the last page-out, and ``page_bytes`` is the page
    (set by the budget)."""

    def __init__(self, q: Owner):
        self.q = q
        self.lock = threading.Lock()  # one sweep of this queue at a time (sweep_begin)
        self.paging = False
        self.paged = 0
        self.page_bytes = 256 * 1024

    @property
    def name(self) -> str:
        return self.q.name

    @property
    def obtained(self) -> int:
        """Messages obtained so far in this interval (x, read without the lock)."""
        return self.q.obtained

    # -- the sweeper protocol (sweeper.cycle.Sweepable) ----------------------------------------

    def sweep_counts(self, reset: bool = True) -> SweepCounts:
        """What the rule needs (sweeper.cycle.SweepCounts); x restarts from 0 for the next
        interval unless ``reset`` is False."""
        q = self.q
        q.tier.run_cleanup()  # retry owed store changes once an interval
        with q.mutex:
            q.lanes.shrink()
            lanes = q.lanes.lanes
            y = sum(lane.ready for lane in lanes) - q.batches.count
            x = q.obtained
            if reset:
                q.obtained = 0
            back = sum(lane.back for lane in lanes)
            swept = any(lane.chain for lane in lanes)
            return SweepCounts(y, x, back, swept, q.lanes.mem_bytes)

    def sweep_counts_bytes(self) -> int:
        with self.q.mutex:
            return self.q.lanes.mem_bytes

    def sweepable_bytes(self, keep: int) -> int:
        """What a sweep keeping ``keep`` would move: the runs are chosen as for a sweep (and
        released at once), so the count is the protocol's, never what it forbids."""
        plan = self.sweep_begin(keep)
        try:
            return sum(t.nbytes for t in plan.targets)  # counted in place: no record copied
        finally:
            self._end(plan, count=False)

    def sweep_begin(self, keep: int) -> Plan:
        """Mark the lanes sweeping under the lock (O(lanes)), then choose the runs without it.
        Waits for a sweep in progress (the cycle's or a producer's page-out)."""
        q = self.q
        self.lock.acquire()
        try:
            t0 = time.perf_counter()
            with q.mutex:
                if q.deleted:
                    return Plan([], begun=False)
                limits = q.lanes.sweeping(True)
                assert limits is not None
            q.tier.lock_seconds(t0)
            return Plan(q.tier.choose(keep, limits))
        except BaseException:
            self.lock.release()
            raise

    def _end(self, plan: Plan, count: bool) -> None:
        try:
            if plan.begun:
                with self.q.mutex:
                    self.q.lanes.sweeping(False)
                    self.q.tier.counters.sweeps += count
        finally:
            self.lock.release()

    def sweep_link(
        self, plan: Plan, target: Target, blobs: list[BlobInfo], store: Store, write_seconds: float = 0.0
    ) -> tuple[int, str | None]:
        """Verify, link and detach ``target`` blob by blob (engine/tiering.py
        :meth:`~sweepq.engine.tiering.QueueTier.link`, where the sweep's link and verify
        live); return (messages moved, abort reason)."""
        return self.q.tier.link(target, blobs, store, write_seconds)

    def sweep_abort(self, plan: Plan, target: Target, reason: str) -> None:
        with self.q.mutex:
            self.q.tier.counters.aborts[reason] += 1

    def sweep_end(self, plan: Plan) -> None:
        self._end(plan, count=True)
        self.q.tier.run_cleanup()

    def unsweep_all(self) -> int:
        """Bring every swept message back into memory, blob by blob as gets do (benchmarks, and
        a queue about to be drained for good). Returns the blobs brought back.

        :raises MQError: 2102 when a read fails (what came back so far stays), 2101 for a
            damaged blob (it leaves the queue)."""
        q = self.q
        blobs = 0
        while True:
            need = None
            with q.mutex:
                for lane in q.lanes:
                    while lane.chain and need is None:
                        blob = lane.chain[0]
                        records = blob.records()
                        if records is None:
                            need = Need(lane, blob)
                        else:
                            q.tier.unsweep_locked(lane, blob, records)
                            blobs += 1
            if need is None:
                break
            q.load(need)
        q.after_get()
        return blobs

    def stats(self) -> SweepStats:
        """The queue's sweep statistics (sweeper/stats.py :class:`SweepStats`)."""
        q = self.q
        with q.mutex:
            c = q.tier.counters
            chain_blobs = [b for lane in q.lanes for b in lane.chain]
            return SweepStats(
                queue=q.name,
                msgs_in_memory=sum(lane.mem for lane in q.lanes),
                bytes_in_memory=q.lanes.mem_bytes,
                msgs_swept=sum(lane.swept for lane in q.lanes),
                bytes_swept_raw=sum(b.raw_bytes for b in chain_blobs),
                bytes_swept_compressed=sum(b.comp_len for b in chain_blobs),
                blobs=len(chain_blobs),
                sweeps=c.sweeps,
                aborts=dict(c.aborts),
                unsweeps=c.unsweeps,
                msgs_unswept=c.msgs_unswept,
                total_msgs_swept=c.msgs_swept,
                total_bytes_swept_raw=c.bytes_swept_raw,
                total_bytes_swept_compressed=c.bytes_swept_compressed,
                bytes_unswept_raw=c.bytes_unswept_raw,
                msgs_reswept=c.msgs_reswept,
                readahead_hits=c.readahead_hits,
                readahead_misses=c.readahead_misses,
                damaged_blobs=c.damaged_blobs,
                store_retries=c.store_retries,
                lock_hold_p99_ms=percentile(c.lock_seconds, 0.99) * 1e3,
                lock_hold_max_ms=max(c.lock_seconds, default=0.0) * 1e3,
                lock_hold_cpu_p99_ms=percentile(c.lock_cpu_seconds, 0.99) * 1e3,
                write_seconds=c.write_seconds,
            )

    # -- the memory budget's paging (engine/budget.py) ------------------------------------------

    def start_paging(self) -> None:
        """The memory budget is reached and this queue's policy is PAGE: from now on its new
        messages go to the rear lists, which the producers write out a page at a time
        (:meth:`page_due`, sweeper.cycle.Sweeper.page_out)."""
        if self.paging:
            return
        with self.q.mutex:
            if not self.paging:
                self.paging = True
                self.paged = 0
                self.q.lanes.paging(True)

    def stop_paging(self) -> None:
        """Back under the budget's low mark: new messages take their usual place again."""
        with self.q.mutex:
            if self.paging:
                self.paging = False
                self.q.lanes.paging(False)

    def page_due(self) -> bool:
        """A paging queue holds a page of new messages in its rear lists."""
        return self.paged >= self.page_bytes
