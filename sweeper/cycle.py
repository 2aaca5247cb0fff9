"""The slow queue sweeper: every interval, apply the rule to each queue and move the surplus.

The sweeper never reaches into a queue's lists. It drives the small protocol below, which
a queue implements (engine/queue.py), and the blob store (typed against
:class:`~sweepq.blobstore.Store`):

1. ``sweep_counts()`` gives y and x (and starts a new interval for x);
2. the rule (policy.py) decides; ``sweep_begin(keep)`` locks the queue, marks its lanes
   sweeping (new puts go to the rear lists), chooses the target runs and unlocks;
3. without any queue lock, the targets' records are cut into bounded blobs
   (sweeper/runs.py, the cut the replay kernel makes too), compressed and written as
   *pending* blobs;
4. ``sweep_link`` re-locks and verifies each blob's messages (still there, not gotten,
   not locked, batch unchanged, still contiguous at the right end); it links the blob
   into the chain in one atomic batch and detaches the messages, or aborts: the pending
   blobs are deleted and the messages stay in memory;
5. ``sweep_end`` unmarks the lanes.

Between steps 3 and 4 an optional ``after_write`` hook runs: tests use it to change the
queue exactly there and prove that every abort reason is caught.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from sweepq.blobstore import MEMORY_HELD, BlobInfo, Store

from .clock import Clock, SystemClock
from .policy import ADAPTIVE_STATE, SweepPolicy, budget_order, decide_adaptive, over_budget
from .runs import record_ends
from .stats import LastDecision

log = logging.getLogger("sweepq.sweeper")


class SweepTarget(Protocol):
    """One contiguous run of one lane, snapshotted for writing without the lock."""

    chain: bytes  # the lane's chain name in the blob store
    at_head: bool  # a front-list run links at the chain's head, a rear-list run at its tail
    records: list[bytes]
    ids: list[bytes]


class SweepPlan(Protocol):
    """What :meth:`Sweepable.sweep_begin` chose: the runs to write, in the order to link them."""

    targets: list[Any]


class SweepCounts(NamedTuple):
    """What a queue tells the rule at an interval's end."""

    y: int  # committed, not-gotten messages in memory
    x: int  # messages obtained in the interval that ends
    back: int  # of the messages in memory, those that came back from a blob (adaptive rule)
    swept: bool  # the queue has blobs in a chain
    mem_bytes: int  # bytes of the records in memory (the memory budget)


class Sweepable(Protocol):
    """What a queue offers the sweeper. Each method takes the queue's lock itself, briefly."""

    @property
    def name(self) -> str: ...

    @property
    def obtained(self) -> int:
        """Messages obtained so far in this interval (x, read without the lock)."""
        ...

    def sweep_counts(self, reset: bool = True) -> SweepCounts:
        """y, x and the rest of :class:`SweepCounts`; the call starts a new interval for x
        (unless ``reset`` is False: a relief between intervals only looks)."""
        ...

    def sweep_begin(self, keep: int) -> SweepPlan:
        """Mark the lanes sweeping (new puts go to the rear lists) and choose the runs that
        leave ``keep`` sweepable messages in memory. Always followed by :meth:`sweep_end`."""
        ...

    # ``plan`` below is what sweep_begin returned, handed back as it came: the queue's own
    # type, so Any here (a SweepPlan parameter would refuse the queue's narrower one).
    def sweep_link(
        self, plan: Any, target: Any, blobs: list[BlobInfo], store: Store, write_seconds: float = 0.0
    ) -> tuple[int, str | None]:
        """Verify each written blob's messages under the lock, link it in ``store`` and detach
        them, or abort (the rest of the target's pending blobs are deleted). Returns (messages
        moved, abort reason or None). Never raises for a store failure."""
        ...

    def sweep_counts_bytes(self) -> int:
        """Bytes of the records in memory now (the memory budget's count)."""
        ...

    def sweepable_bytes(self, keep: int) -> int:
        """Bytes a sweep keeping ``keep`` sweepable messages would move now."""
        ...

    def sweep_abort(self, plan: Any, target: Any, reason: str) -> None:
        """Count a target that failed before linking (its blobs were never written)."""
        ...

    def sweep_end(self, plan: Any) -> None:
        """Unmark the lanes; the rear lists of lanes with no chain join their front lists."""
        ...


class SweepSource(Protocol):
    """What the sweeper sweeps: the queues and the store (the queue manager)."""

    def sweepables(self) -> Iterable[Sweepable]: ...

    def blob_store(self) -> Store: ...


@dataclass(frozen=True)
class QueueDecision:
    queue: str
    y: int
    x: int
    keep: int | None  # None: the rule did not sweep this queue
    msgs_swept: int = 0
    blobs: int = 0
    aborts: dict = field(default_factory=dict)
    budget: bool = False  # swept (also) because memory was over the budget


@dataclass(frozen=True)
class SweepReport:
    """What one cycle did."""

    at: float
    decisions: tuple[QueueDecision, ...]
    seconds: float

    @property
    def msgs_swept(self) -> int:
        return sum(d.msgs_swept for d in self.decisions)

    @property
    def swept_queues(self) -> list[str]:
        return [d.queue for d in self.decisions if d.keep is not None]

    def decision(self, queue: str) -> QueueDecision:
        for d in self.decisions:
            if d.queue == queue:
                return d
        raise KeyError(queue)


class Sweeper:
    """Runs the sweep cycle: :meth:`run_once` on demand, or every ``policy.interval`` seconds
    of ``clock`` time on a background thread between :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        source: SweepSource,
        policy: SweepPolicy | None = None,
        clock: Clock | None = None,
        after_write: Callable[[Sweepable, Any], None] | None = None,
        duty: float = 0.1,
    ):
        if not 0 < duty <= 1:
            raise ValueError("duty is a fraction of the time in (0, 1]")
        self.source = source
        self.policy = policy or SweepPolicy()
        self.clock = clock or SystemClock()
        self.after_write = after_write
        self.duty = duty
        self.reports: list[SweepReport] = []  # the most recent cycles, newest last
        # Each queue's most recent decision (a cycle's, or a relief's that swept it): what the
        # console shows as the rule at work. Replaced whole, so readers need no lock.
        self.last: dict[str, LastDecision] = {}
        self.errors: list[BaseException] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._poked = False  # the memory budget's high mark was crossed: relieve now
        self._run_lock = threading.Lock()  # one cycle at a time, thread or caller
        # The queue manager's memory budget (engine/budget.py), or None: its pressure (0..1)
        # raises the pace; it is counted again after each cycle. Any: this layer does not
        # import the engine.
        self.budget: Any = None
        self.cycles = 0
        self._adaptive: dict[str, np.ndarray] = {}  # the adaptive rule's state per queue

    # -- one cycle ------------------------------------------------------------------------

    def run_once(self, paced: bool = False) -> SweepReport:
        """One sweep cycle over every queue; returns what it decided and did.

        First the rule, queue by queue (the seed's, or the adaptive one: policy.py); then,
        with a memory budget, sweeps beyond the rule while the bytes in memory (messages and
        the store's own) are over it: the queues with the most sweepable bytes first, each
        keeping its x + extra buffer (policy.budget_order, the replay's choice too).

        ``paced`` (the background thread's mode) pauses after each target so that the
        sweeper's own Python work takes at most ``duty`` of the time: under CPython's GIL
        that work is taken from the application's threads, so a background sweeper must
        leave them the rest. The pause is real time, not clock time: it shares a CPU."""
        with self._run_lock:
            t0 = time.perf_counter()
            queues = list(self.source.sweepables())
            counts = [q.sweep_counts() for q in queues]
            decisions = [self._apply_rule(q, c, paced) for q, c in zip(queues, counts, strict=True)]
            if self.policy.memory_budget > 0:
                decisions = self._apply_budget(queues, counts, decisions, paced)
            return self._report(decisions, t0, relief=False)

    def relieve(self, paced: bool = False) -> SweepReport:
        """Between intervals, when the memory budget's high mark was crossed: sweep beyond the
        rule (no rule is applied, and x keeps counting for the interval) until what is held
        falls to the budget's low mark, most sweepable queues first, each keeping its x +
        extra buffer (engine/budget.py)."""
        with self._run_lock:
            t0 = time.perf_counter()
            budget = self.budget
            queues = list(self.source.sweepables())
            counts = [q.sweep_counts(reset=False) for q in queues]
            decisions = [QueueDecision(q.name, c.y, c.x, None) for q, c in zip(queues, counts, strict=True)]
            if budget is not None:
                need = budget.need()
                decisions = self._sweep_beyond(queues, counts, decisions, need, paced)
            return self._report(decisions, t0, relief=True)

    def _report(self, decisions: list[QueueDecision], t0: float, relief: bool) -> SweepReport:
        report = SweepReport(self.clock.now(), tuple(decisions), time.perf_counter() - t0)
        self.reports = [*self.reports[-99:], report]
        p = self.policy
        last = dict(self.last) if relief else {}  # a cycle covers every queue: those gone are dropped
        for d in decisions:
            if relief and d.keep is None:
                continue  # a relief applies no rule: the cycle's decision stands
            last[d.queue] = LastDecision.of(
                report.at, d.y, d.x, d.keep, d.msgs_swept, d.aborts, d.budget, p.factor, p.extra
            )
        self.last = last
        if self.budget is not None:
            self.budget.refresh()  # counts again; gives memory back once enough has gone
        with self._cond:
            self.cycles += 1
            self._cond.notify_all()
        return report

    def wait_cycles(self, n: int, timeout: float = 10.0) -> bool:
        """Block (on a condition, no sleep loop) until ``n`` cycles or reliefs have ended in
        all; for tests and tools that must know the background thread has run."""
        with self._cond:
            return self._cond.wait_for(lambda: self.cycles >= n, timeout)

    def _apply_rule(self, q: Sweepable, c: SweepCounts, paced: bool) -> QueueDecision:
        p = self.policy
        keep: int | None
        if p.rule == "adaptive":
            state = self._adaptive.setdefault(q.name, np.zeros(ADAPTIVE_STATE, np.int64))
            keep = decide_adaptive(c.y, c.x, c.back, c.swept, state, p.factor, p.extra)
            keep = None if keep < 0 else keep
        else:
            keep = p.keep(c.y, c.x)
        if keep is None:
            return QueueDecision(q.name, c.y, c.x, None)
        moved, blobs, aborts = self.sweep(q, keep, paced)
        return QueueDecision(q.name, c.y, c.x, keep, moved, blobs, aborts)

    def _apply_budget(
        self, queues: list[Sweepable], counts: list[SweepCounts], decisions: list[QueueDecision], paced: bool
    ) -> list[QueueDecision]:
        """At an interval's end, sweep beyond the rule while memory is over the budget (see
        :meth:`run_once`; the replay models exactly this)."""
        mem = self.source.blob_store().memory()
        in_memory = sum(q.sweep_counts_bytes() for q in queues) + mem.get(MEMORY_HELD, 0)
        need = over_budget(in_memory, self.policy.memory_budget)
        return self._sweep_beyond(queues, counts, decisions, need, paced)

    def _sweep_beyond(
        self,
        queues: list[Sweepable],
        counts: list[SweepCounts],
        decisions: list[QueueDecision],
        need: int,
        paced: bool,
    ) -> list[QueueDecision]:
        """Free ``need`` bytes beyond the rule: the queues with the most sweepable bytes first
        (policy.budget_order), each keeping its x + extra buffer."""
        if need <= 0:
            return decisions
        p = self.policy
        sweepable = np.array([q.sweepable_bytes(c.x + p.extra) for q, c in zip(queues, counts, strict=True)], np.int64)
        chosen = np.zeros(len(queues), np.int64)
        out = list(decisions)
        for j in chosen[: budget_order(sweepable, need, chosen)].tolist():
            q, c, d = queues[j], counts[j], out[j]
            moved, blobs, aborts = self.sweep(q, c.x + p.extra, paced)
            for r, n in d.aborts.items():
                aborts[r] = aborts.get(r, 0) + n
            keep = d.keep if d.keep is not None else c.x + p.extra
            out[j] = QueueDecision(q.name, c.y, c.x, keep, d.msgs_swept + moved, d.blobs + blobs, aborts, True)
        return out

    def page_out(self, q: Sweepable) -> tuple[int, int, dict[str, int]]:
        """A queue paging under the memory budget writes its messages out, in the caller's
        thread (its producer's), unpaced, down to its buffer: x (as counted so far in this
        interval, read without the lock) + extra. The first page-out also moves what the
        front lists held beyond the buffer; later ones find only the rear lists."""
        return self.sweep(q, q.obtained + self.policy.extra, paced=False)

    def sweep(self, q: Sweepable, keep: int, paced: bool = False) -> tuple[int, int, dict[str, int]]:
        """Sweep ``q`` down to ``keep`` sweepable messages; (moved, blobs, aborts by reason).
        The one implementation of the protocol's steps 2-5, for the cycle and page-outs; the
        queue admits one sweep at a time (its ``sweep_begin`` waits for one in progress)."""
        store = self.source.blob_store()
        plan = q.sweep_begin(keep)
        moved = blobs = 0
        aborts: dict[str, int] = {}
        try:
            targets = plan.targets
            for k, target in enumerate(targets):
                # The plan lets go of each target as it is taken: a target keeps its records
                # (snapshotted to write them), and a plan holding every target to the end kept
                # a whole lane's records alive after their messages were linked and no longer
                # counted by the memory budget (twice the budget resident, under producers
                # that refilled what the count said was free).
                targets[k] = None
                if self._stopping:
                    break  # stop() asked: leave the rest in memory, nothing is half done
                t0 = time.perf_counter()
                if not all(target.records):
                    # A get took a message of the run after the sweep chose it (records are
                    # read without the lock; a taken one reads as b""): no blob is written.
                    q.sweep_abort(plan, target, "removed")
                    aborts["removed"] = aborts.get("removed", 0) + 1
                    continue
                try:
                    ends = record_ends(target.records, store.max_blob_bytes, store.max_blob_records)
                    written = store.write_pending(target.chain, target.records, target.ids, ends, q.name.encode())
                except Exception as e:  # a failed write: nothing moves, nothing is lost
                    log.warning("sweep of %s: writing blobs failed: %s", q.name, e)
                    q.sweep_abort(plan, target, "store_error")
                    aborts["store_error"] = aborts.get("store_error", 0) + 1
                    continue
                if self.after_write is not None:
                    self.after_write(q, target)
                t1 = time.perf_counter()
                n, reason = q.sweep_link(plan, target, written, store, t1 - t0)
                moved += n
                blobs += len(written) if reason is None else 0
                if reason is not None:
                    aborts[reason] = aborts.get(reason, 0) + 1
                duty = self.pace()
                if paced and duty < 1:
                    # Writing releases the GIL; choosing, indexing and verifying do not.
                    busy = time.perf_counter() - t1 + (t1 - t0) * 0.25
                    self._pause(busy * (1 - duty) / duty)
        finally:
            q.sweep_end(plan)
        return moved, blobs, aborts

    def pace(self) -> float:
        """The share of the time the paced sweeper's own work may take: its duty, rising with
        the memory budget's pressure to all of the time at the budget."""
        budget = self.budget
        if budget is None or not budget.pressure:
            return self.duty
        return self.duty + (1.0 - self.duty) * budget.pressure

    def poke(self) -> None:
        """Relieve memory now, not at the next interval (the budget's high mark was crossed).
        Thread-safe and cheap: the background thread does the work."""
        if not self._poked:
            with self._cond:
                self._poked = True
                self._cond.notify_all()

    def _pause(self, seconds: float) -> None:
        with self._cond:
            if not self._stopping:
                self._cond.wait(min(seconds, 1.0))

    # -- the background cycle ----------------------------------------------------------------

    def start(self) -> None:
        """Run a cycle every ``policy.interval`` seconds of clock time until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="sweepq-sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        t = self._thread
        if t is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        t.join(timeout)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _loop(self) -> None:
        clock = self.clock
        with self._cond:
            due = clock.now() + self.policy.interval
            while not self._stopping:
                poked = self._poked
                if clock.now() < due and not poked:
                    clock.wait(self._cond, due, background=True)
                    continue
                self._poked = False
                self._cond.release()
                try:
                    if clock.now() >= due:
                        report = self.run_once(paced=True)
                        due = max(due + self.policy.interval, clock.now())
                    else:
                        report = self.relieve(paced=True)
                    budget = self.budget
                    if report.msgs_swept and budget is not None and budget.reserved > budget.high:
                        self._poked = True  # still over the high mark and sweeping helps: again
                except Exception as e:  # keep sweeping; the error is kept for inspection
                    log.exception("sweep cycle failed")
                    self.errors = [*self.errors[-9:], e]
                finally:
                    self._cond.acquire()
