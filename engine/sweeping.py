"""How a queue takes part in sweeping: the engine's side of the sweeper protocol, and unsweep.

:class:`SweepingMixin` gives :class:`~sweepq.engine.queue.LocalQueue` the methods that
``sweepq.sweeper.cycle`` drives (``sweep_counts``, ``sweep_begin``, ``sweep_link``,
``sweep_abort``, ``sweep_end``) and the under-lock operations that bring swept messages
back (``_unsweep_for_get``) or find them in place (``_search_chain``).

Lock discipline (DESIGN.md "The sweeper"):

* ``sweep_begin`` holds the lock only to mark the lanes sweeping and note each rear list's
  current end: O(lanes). The runs are chosen by walking the lists *without* the lock:
  unlinked nodes keep their forward pointers, so a walk always reaches the live list
  again, and every choice it makes is checked later under the lock.
* ``sweep_link`` takes the lock once per blob: verify that blob's messages, link it,
  detach them. A hold is O(messages in one blob), which the store bounds, so the time
  under the lock does not grow with the size of the run.
* A front-list run is linked blob by blob from its tail end, each at the chain's head; a
  rear-list run from its head end, each at the chain's tail. An abort stops the run
  there: what was linked is a contiguous end of the run, so order holds.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from sweepq.sweeper.stats import SweepCounters, SweepStats, percentile

from . import record
from .constants import Reason
from .errors import MQError
from .lane import AVAILABLE_BELOW, BATCHED, GOTTEN, LOCKED, REMOVED, Lane, Node
from .swept import GOTTEN as SLOT_GOTTEN
from .swept import LIVE as SLOT_LIVE
from .swept import REMOVED as SLOT_REMOVED
from .swept import SweptBlob, SweptHit, build_index, msg_ids

if TYPE_CHECKING:
    from .matching import Match


TARGET_MAX = 16_384  # messages per target: the sweeper's unit of work between pauses


class Target:
    """One contiguous run of one lane chosen for a sweep (see sweeper.cycle.SweepTarget).

    ``records`` and ``ids`` are snapshotted on first use, not when the run is chosen, so
    that this work happens piece by piece, between the paced sweeper's pauses."""

    __slots__ = ("_ident", "_ids", "_records", "at_head", "chain", "lane", "nodes")

    def __init__(self, lane: Lane, chain: bytes, at_head: bool, nodes: list[Node], ident: record.Identity):
        self.lane = lane
        self.chain = chain
        self.at_head = at_head
        self.nodes = nodes
        self._ident = ident
        self._records: list[bytes] | None = None
        self._ids: list[bytes] | None = None

    @property
    def records(self) -> list[bytes]:
        if self._records is None:
            self._records = [n.rec for n in self.nodes]
        return self._records

    @property
    def ids(self) -> list[bytes]:
        if self._ids is None:
            self._ids = msg_ids(self.records, self._ident)
        return self._ids


class Plan:
    __slots__ = ("targets",)

    def __init__(self, targets: list[Target]):
        self.targets = targets


def _abort_reason(node: Node, rec: bytes) -> str | None:
    """Why ``node`` can no longer move with the snapshot ``rec`` taken of it, or None."""
    st = node.state
    if st < AVAILABLE_BELOW:
        return None if node.rec is rec else "gotten"  # got and backed out meanwhile: rec changed
    if st & REMOVED:
        return "removed"
    if st & GOTTEN:
        return "gotten"
    if st & LOCKED:
        return "locked"
    if st & BATCHED:
        return "batch_changed"
    return "moved"


class SweepingMixin:
    """Sweeping and unsweeping for LocalQueue. Attributes it relies on are set there."""

    # Set by LocalQueue.__init__ / the queue manager.
    name: str
    lanes: list[Lane]
    get_order: list[Lane]
    depth: int
    mem_bytes: int
    obtained: int
    batched: int
    tier: object  # the manager's tier: store() and readahead()
    ident: record.Identity

    def _init_sweeping(self) -> None:
        self.counters = SweepCounters()
        self.readahead_low = 2048
        for lane in self.lanes:
            lane.chain = deque()

    def chain_name(self, lane: Lane) -> bytes:
        return f"{self.name}/{lane.priority}".encode()

    # -- the sweeper protocol -----------------------------------------------------------------

    def sweep_counts(self) -> tuple[int, int]:
        """(y, x): committed, not-gotten, unbatched messages in memory; messages obtained
        since the last call, which starts a new interval."""
        with self.mutex:
            y = sum(lane.ready for lane in self.lanes) - self.batched
            x, self.obtained = self.obtained, 0
        return y, x

    def sweep_begin(self, keep: int) -> Plan:
        t0 = time.perf_counter()
        with self.mutex:
            if self.deleted:
                return Plan([])
            for lane in self.lanes:
                lane.sweeping = True  # from now on new messages go to the rear lists
            rear_limits = {id(lane): lane.mem for lane in self.lanes}
        self.counters.lock_seconds.append(time.perf_counter() - t0)
        return Plan(self._choose(keep, rear_limits))

    def _choose(self, keep: int, rear_limits: dict[int, int]) -> list[Target]:
        """Choose the runs, walking without the lock (every choice is re-checked later).

        Front lists, in get order across lanes: the first ``keep`` sweepable messages are
        the buffer; the run is the longest all-sweepable stretch at the list's tail after
        it. Rear lists: the longest all-sweepable stretch at the head, as it was at
        sweep_begin (at most as many messages as the lane then held).
        """
        targets: list[Target] = []
        remaining = keep
        for lane in self.get_order:
            run: list[Node] = []
            head = lane.front.head
            n = head.next
            while n is not head:
                if n.state < AVAILABLE_BELOW:
                    if remaining:
                        remaining -= 1
                    else:
                        run.append(n)
                elif run:
                    run = []  # only the stretch after an unsweepable message can move
                n = n.next
            if run:
                # Pieces of at most TARGET_MAX messages, tail piece first: each is linked at the
                # chain's head, so linking them tail-first keeps the run's order, and the
                # sweeper can pause between pieces.
                pieces = [run[i : i + TARGET_MAX] for i in range(0, len(run), TARGET_MAX)]
                for piece in reversed(pieces):
                    targets.append(Target(lane, self.chain_name(lane), True, piece, self.ident))
            rear: list[Node] = []
            head = lane.rear.head
            n = head.next
            limit = rear_limits[id(lane)]
            while n is not head and len(rear) < limit and n.state < AVAILABLE_BELOW:
                rear.append(n)
                n = n.next
            for i in range(0, len(rear), TARGET_MAX):  # head piece first, each linked at the tail
                targets.append(Target(lane, self.chain_name(lane), False, rear[i : i + TARGET_MAX], self.ident))
        return targets

    def sweep_link(
        self, plan: Plan, target: Target, blobs: list, store, write_seconds: float = 0.0
    ) -> tuple[int, str | None]:
        """Verify, link and detach ``target`` blob by blob; return (messages moved, abort reason)."""
        self.counters.write_seconds += write_seconds
        chunks = []
        lo = 0
        for info in blobs:
            chunks.append((info, lo, lo + info.count))
            lo += info.count
        if target.at_head:
            chunks.reverse()
        lane = target.lane
        moved = 0
        for k, (info, lo, hi) in enumerate(chunks):
            nodes = target.nodes[lo:hi]
            recs = target.records[lo:hi]
            index = build_index(recs, target.ids[lo:hi])  # without the lock
            nbytes = sum(map(len, recs))
            t0 = time.perf_counter()
            with self.mutex:
                reason = self._verify_run(lane, nodes, recs, target.at_head)
                if reason is None:
                    try:
                        store.link(target.chain, [info.blob_id], target.at_head)
                    except Exception:
                        reason = "store_error"
                if reason is None:
                    self._detach_run(lane, nodes, nbytes, info, index, target.at_head)
            self.counters.lock_seconds.append(time.perf_counter() - t0)
            if reason is not None:
                store.delete_pending([c[0].blob_id for c in chunks[k:]])
                self.counters.aborts[reason] += 1
                return moved, reason
            moved += len(nodes)
        return moved, None

    def sweep_abort(self, plan: Plan, target: Target, reason: str) -> None:
        with self.mutex:
            self.counters.aborts[reason] += 1

    def sweep_end(self, plan: Plan) -> None:
        with self.mutex:
            for lane in self.lanes:
                lane.sweeping = False
                lane.settle()
            self.counters.sweeps += 1

    def _verify_run(self, lane: Lane, nodes: list[Node], recs: list[bytes], at_head: bool) -> str | None:
        """Under the lock: every node still available with the record that was written, the
        run still contiguous, and still at the end of its list that it will leave from."""
        prev = None
        for node, rec in zip(nodes, recs, strict=True):
            if node.state >= AVAILABLE_BELOW or node.rec is not rec:
                return _abort_reason(node, rec)
            if prev is not None and prev.next is not node:
                return "moved"
            prev = node
        if at_head:
            return None if nodes[-1].next is lane.front.head else "moved"
        return None if nodes[0].prev is lane.rear.head else "moved"

    def _detach_run(self, lane: Lane, nodes: list[Node], nbytes: int, info, index, at_head: bool) -> None:
        first, last = nodes[0], nodes[-1]
        p, nx = first.prev, last.next
        p.next = nx
        nx.prev = p
        for n in nodes:
            n.state |= REMOVED  # anything still holding a detached node sees it is gone
        count = len(nodes)
        lane.mem -= count
        lane.ready -= count
        lane.swept += count
        self.mem_bytes -= nbytes
        blob = SweptBlob(info.blob_id, nbytes, info.comp_len, index)
        if at_head:
            lane.chain.appendleft(blob)
        else:
            lane.chain.append(blob)
        c = self.counters
        c.blobs_written += 1
        c.msgs_swept += count
        c.bytes_swept_raw += nbytes
        c.bytes_swept_compressed += info.comp_len

    # -- unsweep and search (under the lock) ----------------------------------------------------

    def _unsweep_for_get(self, lane: Lane) -> Node | None:
        """Bring the chain back blob by blob until an available message appears; return it."""
        head = lane.front.head
        while lane.chain:
            start = head.prev
            self._unsweep_head(lane)
            n = start.next
            while n is not head:
                if n.state < AVAILABLE_BELOW:
                    return n
                n = n.next
        return None

    def _blob_records(self, blob: SweptBlob) -> list[bytes]:
        """The blob's records: from its read-ahead when that has finished, else read now."""
        fut = blob.prefetch
        try:
            if fut is not None:
                if fut.done():
                    self.counters.readahead_hits += 1
                else:
                    self.counters.readahead_misses += 1
                return fut.result()
            self.counters.readahead_misses += 1
            return self.tier.store().read(blob.blob_id)
        except Exception as e:
            blob.prefetch = None
            raise self._store_failure(e, blob) from e

    def _store_failure(self, e: Exception, blob: SweptBlob) -> MQError:
        from sweepq.blobstore import BlobCorruptError

        if isinstance(e, BlobCorruptError):
            return MQError(Reason.OBJECT_DAMAGED, f"queue {self.name!r}: {e}")
        return MQError(Reason.RESOURCE_PROBLEM, f"queue {self.name!r}: reading blob {blob.blob_id} failed: {e}")

    def _unsweep_head(self, lane: Lane) -> None:
        """Append the live messages of the chain's first blob to the front list (invariant 4)."""
        blob = lane.chain[0]
        try:
            records = self._blob_records(blob)
        except MQError as err:
            if err.reason == Reason.OBJECT_DAMAGED:
                self._quarantine(lane, blob)
            raise
        lane_i = lane.priority
        head = lane.front.head
        last = head.prev
        if blob.live == blob.count and not blob.bumps and not (blob.flags == SLOT_GOTTEN).any():
            # The common case, written straight: every record comes back available.
            for rec in records:
                node = Node()
                node.rec = rec
                node.state = lane_i
                node.prev = last
                last.next = node
                last = node
            added = ready = len(records)
            nbytes = sum(map(len, records))
        else:
            added = ready = nbytes = 0
            flags = blob.flags.tolist()
            for slot, rec in enumerate(records):
                f = flags[slot]
                if f == SLOT_REMOVED:
                    continue
                if blob.bumps and slot in blob.bumps:
                    rec = blob.record(records, slot)
                node = Node()
                node.rec = rec
                if f == SLOT_GOTTEN:
                    node.state = lane_i | GOTTEN
                    if blob.nodes is None:
                        blob.nodes = {}
                    blob.nodes[slot] = node  # a unit of work holds this slot: it finds the node here
                else:
                    node.state = lane_i
                    ready += 1
                node.prev = last
                last.next = node
                last = node
                added += 1
                nbytes += len(rec)
        last.next = head
        head.prev = last
        blob.unswept = True
        lane.chain.popleft()
        self.tier.store().unlink(self.chain_name(lane), blob.blob_id)
        lane.mem += added
        lane.ready += ready
        lane.swept -= added
        self.mem_bytes += nbytes
        c = self.counters
        c.unsweeps += 1
        c.msgs_unswept += added
        c.bytes_unswept_raw += nbytes
        lane.settle()  # the last blob back: the rear list joins the front

    def _quarantine(self, lane: Lane, blob: SweptBlob) -> None:
        """A damaged blob leaves the chain (kept in the store for inspection): the error named
        its messages once, and every other blob of the queue stays reachable."""
        lane.chain.remove(blob)
        lane.swept -= blob.live
        self.depth -= blob.live
        self.counters.damaged_blobs += 1
        self.tier.store().detach(self.chain_name(lane), blob.blob_id)
        lane.settle()

    def _search_chain(self, lane: Lane, match: Match) -> SweptHit | None:
        """Find a matching message inside the chain without unsweeping (invariant 5)."""
        for blob in lane.chain:
            cand = blob.candidates(match.msg_id, match.correl_id, match.group_id, match.seq)
            if not len(cand):
                continue
            records = self._blob_records(blob)
            for slot in cand.tolist():
                rec = blob.record(records, slot)
                if match(rec):
                    return SweptHit(lane, blob, slot, rec)
        return None

    def _maybe_readahead(self, lane: Lane) -> None:
        """When the front runs low, read the next blobs in the background: enough of them to
        hold ``readahead_low`` messages, because the read-ahead thread may wait a full GIL
        switch interval (5 ms) before it runs while the application gets in a tight loop."""
        ahead = 0
        for blob in lane.chain:
            if blob.prefetch is None:
                blob.prefetch = self.tier.readahead(blob.blob_id)
            ahead += blob.live
            if ahead >= self.readahead_low:
                break

    # -- a swept message taken by a get (SweptHit), under the lock --------------------------------

    def _remove_swept(self, hit: SweptHit) -> None:
        blob = hit.blob
        if blob.unswept:  # brought back since: act on its node
            self._remove(blob.nodes.pop(hit.slot))
            return
        blob.flags[hit.slot] = SLOT_REMOVED
        blob.live -= 1
        lane = hit.lane
        lane.swept -= 1
        self.depth -= 1
        hit.state |= REMOVED
        if not blob.live:
            lane.chain.remove(blob)
            self.tier.store().unlink(self.chain_name(lane), blob.blob_id)
            lane.settle()

    def _hide_swept(self, hit: SweptHit) -> None:
        # Always under the lock that found the hit, so the blob is still swept.
        hit.blob.flags[hit.slot] = SLOT_GOTTEN

    def _restore_swept(self, hit: SweptHit, backout: bool) -> None:
        blob = hit.blob
        if blob.unswept:
            self._restore(blob.nodes.pop(hit.slot), backout)
            return
        blob.flags[hit.slot] = SLOT_LIVE
        if backout:
            if blob.bumps is None:
                blob.bumps = {}
            blob.bumps[hit.slot] = blob.bumps.get(hit.slot, 0) + 1
        self._wake_all()  # a message is back in the chain: let every waiter look again

    # -- statistics -------------------------------------------------------------------------

    def sweep_stats(self) -> SweepStats:
        with self.mutex:
            c = self.counters
            chain_blobs = [b for lane in self.lanes for b in lane.chain]
            return SweepStats(
                queue=self.name,
                msgs_in_memory=sum(lane.mem for lane in self.lanes),
                bytes_in_memory=self.mem_bytes,
                msgs_swept=sum(lane.swept for lane in self.lanes),
                bytes_swept_raw=sum(b.raw_bytes for b in chain_blobs),
                bytes_swept_compressed=sum(b.comp_len for b in chain_blobs),
                blobs=len(chain_blobs),
                sweeps=c.sweeps,
                aborts=dict(c.aborts),
                unsweeps=c.unsweeps,
                msgs_unswept=c.msgs_unswept,
                readahead_hits=c.readahead_hits,
                readahead_misses=c.readahead_misses,
                damaged_blobs=c.damaged_blobs,
                lock_hold_p99_ms=percentile(c.lock_seconds, 0.99) * 1e3,
                lock_hold_max_ms=max(c.lock_seconds, default=0.0) * 1e3,
                write_seconds=c.write_seconds,
            )


__all__ = ["Plan", "SweepingMixin", "Target"]
