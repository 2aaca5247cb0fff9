"""A queue's storage tier: its side of the sweep protocol, unsweep, and the blob store's I/O.

:class:`QueueTier` is a collaborator the queue owns and calls (engine/queue.py); it calls the
queue core (engine/core/lanes.py, the only code that reads or writes the lanes and their
chains) and the blob store (typed against :class:`~sweepq.blobstore.Store`). Calls go one
way: queue -> tier -> core / store.

The sweep lives here, in one place: the choice of runs (:meth:`QueueTier.choose`, through the
core's walk without the lock) and, per blob written, the verify, link and detach under the
lock (:meth:`QueueTier.link`), which is the only place the tier takes the queue's lock.

Locking (the rule is written once, in engine/queue.py): methods whose names end in
``_locked`` are only called with the queue's lock held; :meth:`QueueTier.link` takes it once
per blob; the others never take it. Under the lock the tier reads no blob and syncs nothing;
its store writes there are the sweep's link and an unsweep's move of persistent records back
to their own keys (:meth:`QueueTier.unsweep_locked`), each ordered with the change it
records. Reads, the sweep's writes and the cleanup of store records run without the lock.

Faults: store I/O happens before the in-memory state changes, or not at all. A read that
fails leaves the lane as it was (the get reports 2102 and the next one retries); a blob
found damaged leaves the chain (2101 names what it held) and the rest of the queue flows.
Cleanups that follow a change already made in memory (deleting a blob that came back or
emptied) cannot fail the caller: they wait in :attr:`QueueTier.cleanup` and are retried, so
the store may hold garbage for a while but never misses a message.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from sweepq.blobstore import BlobCorruptError, BlobInfo, Store, StoreError
from sweepq.sweeper.runs import choose_runs, pieces
from sweepq.sweeper.stats import SweepCounters

from .constants import Reason
from .core.lane import Lane, Need
from .core.lanes import LaneSet
from .core.lock import CHECKS, assert_held
from .core.ref import Ref
from .core.swept import REMOVED, SweptBlob, build_index
from .errors import MQError
from .record import Identity

if TYPE_CHECKING:
    from .durable.journal import Journal
    from .storage import Storage

LOADED_CACHE = 4  # decoded blobs kept for searches by id (each up to max_blob_bytes)


class Target:
    """One contiguous run of one lane chosen for a sweep (sweeper.cycle.SweepTarget).

    ``records`` and ``ids`` are snapshotted on first use, not when the run is chosen, so that
    this work happens piece by piece, between the paced sweeper's pauses. ``slots`` are the
    core's names for the run's messages, handed back to it to verify and detach."""

    __slots__ = ("_ids", "_records", "at_head", "chain", "encode", "ident", "lane", "lanes", "nbytes", "slots")

    def __init__(
        self,
        lanes: LaneSet,
        lane: Lane,
        chain: bytes,
        at_head: bool,
        slots: list[int],
        ident: Identity,
        nbytes: int,
        encode: Callable[[object], bytes] | None = None,
    ):
        self.lanes = lanes
        self.encode = encode  # the queue's encoder of items (QueueTier.encode)
        self.lane = lane
        self.chain = chain
        self.at_head = at_head
        self.slots = slots
        self.ident = ident
        self.nbytes = nbytes  # the bytes of its records when it was chosen (counted in place)
        self._records: list[bytes] | None = None
        self._ids: list[bytes] | None = None

    @property
    def records(self) -> list[bytes]:
        if self._records is None:
            self._records = self.lanes.snapshot(self.slots, self.encode)  # without the lock
        return self._records

    @property
    def ids(self) -> list[bytes]:
        if self._ids is None:
            self._ids = self.ident.msg_ids(self.records)
        return self._ids


class Plan:
    """What a sweep chose (sweeper.cycle.SweepPlan); ``begun``: the lanes were marked
    sweeping (a deleted queue's plan is empty and marks nothing)."""

    __slots__ = ("begun", "targets")

    def __init__(self, targets: list[Target], begun: bool = True):
        self.targets = targets
        self.begun = begun


def messages_within(chain: Iterable[SweptBlob], nbytes: int) -> int:
    """The live messages of a chain's leading blobs whose records add up to ``nbytes``: the
    first blob's at least, and at least one."""
    n = held = 0
    for blob in chain:
        n += blob.live
        held += blob.raw_bytes
        if held >= nbytes:
            break
    return max(n, 1)


class QueueTier:
    """The tier of one queue (see the module docstring for the locking rule). ``mutex`` is
    the queue's lock, which :meth:`link` takes once per blob."""

    def __init__(self, name: str, lanes: LaneSet, ident: Identity, storage: Storage, mutex: Any):
        self.name = name
        self.lanes = lanes
        self.ident = ident
        self.storage = storage
        self.mutex = mutex
        self.counters = SweepCounters()
        # Read ahead when a lane's messages in memory and ahead fall below readahead_low (the
        # get path's test): the setting (readahead_messages), or under a memory budget fewer,
        # so that the blobs read ahead hold at most readahead_bytes of records (0: no bound).
        self.readahead_low = self.readahead_messages = 4096
        self.readahead_bytes = 0
        # Store changes owed after an in-memory change: ("unlink" | "detach", chain, blob id)
        # or ("delete", b"", [blob ids]). Retried until they succeed.
        # A deque: appended under the lock, drained without it (append / popleft are atomic).
        self.cleanup: deque[tuple[str, bytes, Any]] = deque()  # Any: a blob id or a list of them
        self._loaded: deque[SweptBlob] = deque()
        # Set by a durable queue: persistent messages that come back get their own records.
        self.journal: Journal | None = None
        self.key_prefix = b""
        # Set when the queue takes items (LocalQueue.keep_items): how a sweep encodes one.
        self.encode: Callable[[object], bytes] | None = None

    def store(self) -> Store:
        return self.storage.store()

    def chain_name(self, lane: Lane) -> bytes:
        return f"{self.name}/{lane.priority}".encode()

    def _held(self, what: str) -> None:
        if CHECKS:
            assert_held(self.mutex, what)

    # -- the sweep: choose, then verify, link and detach ----------------------------------------

    def choose(self, keep: int, rear_limits: list[int]) -> list[Target]:
        """Choose the runs, walking without the lock (every choice is verified again later).

        Which messages move is sweeper.runs.choose_runs (the replay kernel compiles the same
        function): the buffer is the first ``keep`` sweepable messages in get order across
        lanes. Front lists: the run is the longest all-sweepable stretch at the list's tail
        after the lane's share of the buffer. Rear lists: the longest all-sweepable stretch at
        the head, at most as many messages as the lane held when the sweep began."""
        lanes = self.lanes
        n = len(lanes.lanes)

        def counts(sweepable: list[int], rear_lens: list[int]) -> tuple[list[int], list[int]]:
            kept, moved = [0] * n, [0] * n
            choose_runs(sweepable, rear_lens, rear_limits, keep, kept, moved)
            return kept, moved

        targets: list[Target] = []
        limits = self.storage.blob_limits()  # pieces of whole blobs, about a MiB each
        for lane, run, run_sizes, rear, rear_sizes in lanes.sweep_runs(rear_limits, counts):
            chain = self.chain_name(lane)
            # Pieces linked at the chain's head tail-first keep the run's order, and the
            # sweeper can pause between pieces.
            sizes = np.asarray(run_sizes)
            for lo, hi in reversed(pieces(sizes, *limits)):
                targets.append(
                    Target(lanes, lane, chain, True, run[lo:hi], self.ident, int(sizes[lo:hi].sum()), self.encode)
                )
            sizes = np.asarray(rear_sizes)
            for lo, hi in pieces(sizes, *limits):  # head piece first, each linked at the tail
                targets.append(
                    Target(lanes, lane, chain, False, rear[lo:hi], self.ident, int(sizes[lo:hi].sum()), self.encode)
                )
        return targets

    def link(
        self, target: Target, blobs: list[BlobInfo], store: Store, write_seconds: float = 0.0
    ) -> tuple[int, str | None]:
        """Verify, link and detach ``target`` blob by blob; return (messages moved, abort reason).

        The lock is taken once per blob: a hold is O(messages in one blob), which the store
        bounds. The link (one small atomic store write) runs *under* the lock on purpose: it
        is the commit point of the move, and verifying, linking and detaching must be one
        step for every other thread, or a get could take a message that is being linked.
        A front run is linked from its tail end (each blob at the chain's head), a rear run
        from its head end: an abort stops there, and what was linked is a contiguous end of
        the run, so order holds. Seed 003's verification is the core's
        (:meth:`~sweepq.engine.core.lanes.LaneSet.move_run`)."""
        self.counters.write_seconds += write_seconds
        chunks = []
        lo = 0
        for info in blobs:
            chunks.append((info, lo, lo + info.count))
            lo += info.count
        if target.at_head:
            chunks.reverse()
        moved = 0
        for k, (info, lo, hi) in enumerate(chunks):
            recs = target.records[lo:hi]
            reason = self._link_one(target, info, lo, hi, recs, store)
            if reason is not None:
                self._drop_pending([c[0].blob_id for c in chunks[k:]], store)
                with self.mutex:
                    self.counters.aborts[reason] += 1
                return moved, reason
            moved += hi - lo
        return moved, None

    def _link_one(
        self, target: Target, info: BlobInfo, lo: int, hi: int, recs: list[bytes], store: Store
    ) -> str | None:
        """Verify, link and detach one blob of ``target`` (its records ``lo:hi``); the abort
        reason, or None.

        Everything that can be done without the lock is: the blob's index and its in-memory
        object, and the run's check (the core's ``precheck_run``), which the hold then takes
        as it is when nothing in memory changed since the sweep's last hold (the core's
        ``move_run``: any change sends the run through the whole check under the lock). So
        the hold is the store's link and the detach."""
        lanes = self.lanes
        slots = target.slots[lo:hi]
        # A slot a get emptied after the sweep chose it reads b"": the run is no longer on
        # the queue as chosen, and an empty record has no header to index.
        index = build_index(recs, target.ids[lo:hi]) if all(recs) else None  # without the lock
        # Persistent messages move their durable home into the blob in the same write.
        homes = [] if self.journal is None else self.journal.home_keys(self.key_prefix, target.lane.priority, recs)
        nbytes = sum(map(len, recs))
        blob = None if index is None else SweptBlob(info.blob_id, nbytes, info.comp_len, info.check, index)
        prechecked = blob is not None and lanes.precheck_run(target.lane, slots, recs, target.at_head)

        def link() -> str | None:
            try:
                store.link(target.chain, [info.blob_id], target.at_head, homes)
            except Exception:
                return "store_error"
            return None

        # A sweep is background work that holds the lock a foreground get or put waits for;
        # it starts each hold on a fresh turn of the CPU and of the GIL (see yield_before_hold).
        yield_before_hold()
        t0, c0 = time.perf_counter(), time.thread_time()
        with self.mutex:
            reason, again = lanes.move_run(target.lane, slots, recs, blob, target.at_head, prechecked, link)
            if reason is None:
                c = self.counters
                c.msgs_reswept += again
                c.blobs_written += 1
                c.msgs_swept += hi - lo
                c.bytes_swept_raw += nbytes
                c.bytes_swept_compressed += info.comp_len
        self.lock_seconds(t0, c0)
        return reason

    def _drop_pending(self, blob_ids: list[int], store: Store) -> None:
        """Delete an aborted sweep's pending blobs (no lock); if that fails, later."""
        try:
            store.delete_pending(blob_ids)
        except Exception:
            self.cleanup.append(("delete", b"", blob_ids))
            self.counters.store_retries += 1

    # -- unsweep (under the lock) -----------------------------------------------------------------

    def front_locked(self, lane: Lane) -> Ref | Need | None:
        """The lane's front list has nothing available: bring the chain back blob by blob until
        an available message appears and return it; a :class:`Need` when a blob's records
        must be read first; None when the chain is empty (the rear list has joined the front)."""
        while lane.chain:
            blob = lane.chain[0]
            records = blob.records()
            if records is None:
                return Need(lane, blob)
            ref = self.unsweep_locked(lane, blob, records)
            if ref is not None:
                return ref
        return None

    def unsweep_locked(self, lane: Lane, blob: SweptBlob, records: list[bytes]) -> Ref | None:
        """Bring the chain's first blob back into the front list (docs/design.md invariant 4);
        return the first available message of what came back (or of the front list after it).

        On a durable queue, when the blob holds persistent messages, their records get their
        own keys back in the same write that deletes the blob (one durable home each), made
        here under the lock, before the change in memory.

        :raises MQError: RESOURCE_PROBLEM (2102) when that write fails; nothing changed."""
        self._held("unsweeping")
        c = self.counters
        if blob.prefetch is not None or blob.loaded is not None:
            c.readahead_hits += blob.loaded is None  # loaded: a get read it itself
        live, positions, nbytes = blob.survivors(records)
        unlinked = False
        if self.journal is not None:
            homes = self.journal.homes(self.key_prefix, lane.priority, live)
            if homes:
                try:
                    self.store().unlink(self.chain_name(lane), blob.blob_id, homes)
                except StoreError as e:
                    raise MQError(
                        Reason.RESOURCE_PROBLEM,
                        f"queue {self.name!r}: bringing blob {blob.blob_id} back failed ({e}); nothing was "
                        "lost, try the get again",
                    ) from e
                unlinked = True
        ref = self.lanes.splice_blob(lane, blob, live, positions, nbytes)
        if not unlinked:
            self.cleanup.append(("unlink", self.chain_name(lane), blob.blob_id))
        c.unsweeps += 1
        c.msgs_unswept += len(live)
        c.bytes_unswept_raw += nbytes
        return ref

    def unlink_emptied_locked(self, emptied: list[tuple[Lane, SweptBlob]]) -> None:
        """Blobs whose last message was taken left their chains (the core's
        ``take_emptied()``): unlink them in the store, owed until it succeeds."""
        self._held("unlinking emptied blobs")
        for lane, blob in emptied:
            self.cleanup.append(("unlink", self.chain_name(lane), blob.blob_id))

    def readahead_locked(self, lane: Lane) -> None:
        """When the front runs low, read the next blobs in the background: enough of them to
        hold ``readahead_low`` messages, because the read-ahead thread may wait a GIL switch
        interval (5 ms) before it runs while the application gets in a tight loop.

        Callers test ``lane.ready + lane.ahead < readahead_low`` first, so this runs once per
        blob boundary, not on every get.

        Under a memory budget what is read ahead is memory the budget cannot refuse (a get must
        be served), so ``readahead_low`` becomes the messages of the leading blobs that hold
        ``readahead_bytes`` of records (one blob's at least), at most the setting: 4,096 1 KiB
        items read ahead held about 9 MB, and a drain of ten 24 MB budgets through
        ``sweepq.Queue`` peaked at 1.09-1.11 x budget + baseline against 1.03-1.05 x reading
        512 ahead (bench/memory.py ``fill_and_drain``, one load)."""
        if self.readahead_bytes:
            within = messages_within(lane.chain, self.readahead_bytes)
            self.readahead_low = min(self.readahead_messages, within)
        chain = self.chain_name(lane)
        lane.read_ahead(self.readahead_low, lambda blob: self.storage.readahead(chain, blob.blob_id, blob.check))

    def quarantine_locked(self, lane: Lane, blob: SweptBlob) -> int:
        """A damaged blob leaves the chain (kept in the store for inspection); every other
        blob of the queue stays reachable. Returns the messages it took with it."""
        self._held("quarantining a blob")
        if blob not in lane.chain:
            return 0  # another get got here first
        n = self.lanes.quarantine(lane, blob)
        self.counters.damaged_blobs += 1
        self.cleanup.append(("detach", self.chain_name(lane), blob.blob_id))
        return n

    # -- I/O without the lock ---------------------------------------------------------------------

    def load(self, need: Need) -> None:
        """Read a blob a get needs (waiting for its read-ahead if one runs).

        :raises BlobCorruptError: the blob is damaged (the caller quarantines it).
        :raises MQError: RESOURCE_PROBLEM (2102) when the read failed; nothing changed."""
        blob = need.blob
        fut = blob.prefetch
        if fut is not None:
            try:
                records = fut.result()
                self.counters.readahead_misses += 1  # it had not finished when the get came
            except BlobCorruptError:
                raise
            except Exception:  # a transient read-ahead failure: read again here
                blob.reading(None)
                records = None
        else:
            records = None
            self.counters.readahead_misses += 1
        if records is None:
            records = self.read(need)
        blob.keep(records)
        self._loaded.append(blob)
        while len(self._loaded) > LOADED_CACHE:
            old = self._loaded.popleft()
            if old is not blob:
                old.keep(None)

    def read(self, need: Need) -> list[bytes]:
        """A blob's records from the store, verified (no lock; the chain is not changed).

        :raises BlobCorruptError: damaged or missing. :raises MQError: RESOURCE_PROBLEM (2102)
            when the read failed; nothing changed."""
        blob = need.blob
        try:
            return self.store().read(blob.blob_id, self.chain_name(need.lane), blob.check)
        except BlobCorruptError:
            raise
        except (StoreError, OSError) as e:
            raise MQError(
                Reason.RESOURCE_PROBLEM,
                f"queue {self.name!r}: reading blob {blob.blob_id} failed ({e}); nothing was lost, try again",
            ) from e

    def damaged(self, blob: SweptBlob, e: BlobCorruptError) -> MQError:
        """The 2101 of a damaged blob, naming the messages it took with it: the positions not
        REMOVED. The store's manifest names every record the blob was written with, in order;
        one already consumed (taken by a get by id, or removed before a restart) is not lost,
        and naming it would have an operator send it again (a false loss)."""
        held = "" if e.ids else f"; from the in-memory index: {blob.describe()}"
        ids = list(e.ids)
        if len(ids) == blob.count:
            ids = [i for pos, i in enumerate(ids) if blob.flag(pos) != REMOVED]
        return MQError(
            Reason.OBJECT_DAMAGED,
            f"queue {self.name!r}: {e}{held}. The blob left the queue; its other messages flow on "
            "(every MsgId it held is in the error's msg_ids)",
            msg_ids=ids,
        )

    def run_cleanup(self) -> None:
        """Apply the store changes owed after in-memory changes; keep the ones that fail for
        the next call (never raises: the queue is already consistent without them)."""
        cleanup = self.cleanup
        if not cleanup:
            return
        store = self.store()
        failed = []
        while True:
            try:
                op = cleanup.popleft()
            except IndexError:
                break
            kind, chain, arg = op
            try:
                if kind == "unlink":
                    store.unlink(chain, arg)
                elif kind == "detach":
                    store.detach(chain, arg)
                else:
                    store.delete_pending(arg)
            except StoreError:
                failed.append(op)
        if failed:
            self.counters.store_retries += len(failed)
            cleanup.extend(failed)

    def lock_seconds(self, t0: float, cpu0: float | None = None) -> None:
        """Count one hold of the queue's lock by a sweep that took it at ``time.perf_counter()``
        ``t0`` (and, where the hold's own CPU time is measured, ``time.thread_time()`` ``cpu0``)."""
        c = self.counters
        c.lock_seconds.append(time.perf_counter() - t0)
        if cpu0 is not None:
            c.lock_cpu_seconds.append(time.thread_time() - cpu0)


def yield_before_hold() -> None:
    """Give up the CPU (and the GIL: ``os.sched_yield`` releases it) before a sweep takes a
    queue's lock for one blob's link.

    A sweep runs for many milliseconds between holds (encoding, compressing, writing blobs),
    so it is the thread whose time slice is most likely spent when it takes the lock: on a
    loaded machine the scheduler then preempts it *inside* the hold, and the gets and puts of
    that queue wait a whole scheduler tick or more (4 ms with HZ=250) for a hold whose own
    work is about 40 us. Likewise a thread asking for the GIL makes the sweeper drop it at the
    next switch interval, wherever it is. Yielding first starts the hold on a fresh turn of
    both. It costs one system call per blob (at most 1,024 messages), and on an idle machine
    it returns at once. Measured by ``bench/sweeping.py lock_holds`` beside other work (docs/
    performance.md, "A sweep's hold of the queue lock")."""
    os.sched_yield()
