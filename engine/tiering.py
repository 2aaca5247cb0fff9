"""A queue's storage tier: its side of the sweep protocol, unsweep, and search of the chain.

:class:`QueueTier` is a collaborator the queue owns and calls (engine/queue.py); it calls the
lanes (engine/lane.py, the only writer of links) and the blob store (typed against
:class:`~sweepq.blobstore.Store`). Calls go one way: queue -> tier -> lanes / store.

Locking (the rule is written once, in engine/queue.py): methods whose names end in
``_locked`` are only called with the queue's mutex held; the others never take it. Under
the lock the tier reads no blob and syncs nothing; its one store write there is an
unsweep's move of persistent records back to their own keys (:meth:`splice_locked`),
which must be ordered with the change it records. Reads, the sweep's writes and the
cleanup of store records run without the lock.

Faults: store I/O happens before the in-memory state changes, or not at all. A read that
fails leaves the lane as it was (the get reports 2102 and the next one retries); a blob
found damaged leaves the chain (2101 names what it held) and the rest of the queue flows.
Cleanups that follow a change already made in memory (deleting a blob that came back or
emptied) cannot fail the caller: they wait in :attr:`QueueTier.cleanup` and are retried, so
the store may hold garbage for a while but never misses a message.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from sweepq.blobstore import BlobCorruptError, BlobInfo, Store, StoreError
from sweepq.sweeper.runs import choose_runs, pieces
from sweepq.sweeper.stats import SweepCounters

from .constants import Reason
from .errors import MQError
from .lane import AVAILABLE_BELOW, BATCHED, GOTTEN, LOCKED, REMOVED, Lane, LaneSet
from .record import Identity
from .swept import GOTTEN as POS_GOTTEN
from .swept import LIVE as POS_LIVE
from .swept import LOCKED as POS_LOCKED
from .swept import REMOVED as POS_REMOVED
from .swept import SweptBlob, SweptHit, msg_ids

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .durable.journal import Journal
    from .matching import Match
    from .storage import Storage

LOADED_CACHE = 4  # decoded blobs kept for searches by id (each up to max_blob_bytes)


class Need:
    """A get needs a blob's records that are not at hand: the caller reads them without the
    lock (:meth:`QueueTier.load`) and tries again."""

    __slots__ = ("blob", "lane")

    def __init__(self, lane: Lane, blob: SweptBlob):
        self.lane = lane
        self.blob = blob


class Target:
    """One contiguous run of one lane chosen for a sweep (sweeper.cycle.SweepTarget).

    ``records`` and ``ids`` are snapshotted on first use, not when the run is chosen, so that
    this work happens piece by piece, between the paced sweeper's pauses."""

    __slots__ = ("_ids", "_records", "at_head", "chain", "ident", "lane", "lanes", "slots")

    def __init__(self, lanes: LaneSet, lane: Lane, chain: bytes, at_head: bool, slots: list[int], ident: Identity):
        self.lanes = lanes
        self.lane = lane
        self.chain = chain
        self.at_head = at_head
        self.slots = slots
        self.ident = ident
        self._records: list[bytes] | None = None
        self._ids: list[bytes] | None = None

    @property
    def records(self) -> list[bytes]:
        if self._records is None:
            recs = self.lanes.recs
            # Read without the lock: a slot emptied meanwhile gives b"" and fails verification.
            self._records = [recs[i] or b"" for i in self.slots]
        return self._records

    @property
    def ids(self) -> list[bytes]:
        if self._ids is None:
            self._ids = msg_ids(self.records, self.ident)
        return self._ids


class Plan:
    """What a sweep chose (sweeper.cycle.SweepPlan); ``begun``: the lanes were marked
    sweeping (a deleted queue's plan is empty and marks nothing)."""

    __slots__ = ("begun", "targets")

    def __init__(self, targets: list[Target], begun: bool = True):
        self.targets = targets
        self.begun = begun


def abort_reason(state: int, same_record: bool) -> str | None:
    """Why a message with ``state`` can no longer move with the record that was written."""
    if state < AVAILABLE_BELOW:
        return None if same_record else "gotten"  # got and backed out meanwhile: its record changed
    if state & REMOVED:
        return "removed"
    if state & GOTTEN:
        return "gotten"
    if state & LOCKED:
        return "locked"
    if state & BATCHED:
        return "batch_changed"
    return "moved"


class QueueTier:
    """The tier of one queue (see the module docstring for the locking rule)."""

    def __init__(self, name: str, lanes: LaneSet, ident: Identity, storage: Storage):
        self.name = name
        self.lanes = lanes
        self.ident = ident
        self.storage = storage
        self.counters = SweepCounters()
        self.readahead_low = 4096
        # Store changes owed after an in-memory change: ("unlink" | "detach", chain, blob id)
        # or ("delete", b"", [blob ids]). Retried until they succeed.
        # A deque: appended under the lock, drained without it (append / popleft are atomic).
        self.cleanup: deque[tuple[str, bytes, Any]] = deque()  # Any: a blob id or a list of them
        self._loaded: deque[SweptBlob] = deque()
        # Set by a durable queue: persistent messages that come back get their own records.
        self.journal: Journal | None = None
        self.key_prefix = b""

    def store(self) -> Store:
        return self.storage.store()

    def chain_name(self, lane: Lane) -> bytes:
        return f"{self.name}/{lane.priority}".encode()

    # -- the sweep: begin, choose, verify and detach, end ----------------------------------------

    def begin_locked(self) -> list[int]:
        """Mark every lane sweeping (new puts go to the rear lists) and hold freed slots back;
        return each lane's in-memory count, which bounds its rear run."""
        for lane in self.lanes:
            lane.sweeping += 1
        self.lanes.defer_frees()
        return [lane.mem for lane in self.lanes]

    def choose(self, keep: int, rear_limits: list[int]) -> list[Target]:
        """Choose the runs, walking without the lock (every choice is verified again later).

        Which messages move is sweeper.runs.choose_runs (the replay kernel compiles the same
        function): the buffer is the first ``keep`` sweepable messages in get order across
        lanes. Front lists: the run is the longest all-sweepable stretch at the list's tail
        after the lane's share of the buffer. Rear lists: the longest all-sweepable stretch at
        the head, at most as many messages as the lane held at :meth:`begin_locked`."""
        lanes, st = self.lanes, self.lanes.st
        fronts = [list(lanes.walk(lane.front)) for lane in lanes.lanes]
        rears = []
        for lane in lanes.lanes:
            rear: list[int] = []
            for i in lanes.walk(lane.rear):
                if len(rear) >= rear_limits[lane.priority] or st[i] >= AVAILABLE_BELOW:
                    break
                rear.append(i)
            rears.append(rear)
        n = len(lanes.lanes)
        kept, moved = [0] * n, [0] * n
        sweepable = [sum(st[i] < AVAILABLE_BELOW for i in f) for f in fronts]
        choose_runs(sweepable, [len(r) for r in rears], rear_limits, keep, kept, moved)
        targets: list[Target] = []
        for lane in reversed(lanes.lanes):
            p = lane.priority
            chain = self.chain_name(lane)
            run: list[int] = []
            remaining = kept[p]
            for i in fronts[p]:
                if st[i] < AVAILABLE_BELOW:
                    if remaining:
                        remaining -= 1
                    else:
                        run.append(i)
                elif run:
                    run = []  # only the stretch after an unsweepable message can move
            # Pieces linked at the chain's head tail-first keep the run's order, and the
            # sweeper can pause between pieces.
            for lo, hi in reversed(pieces(len(run))):
                targets.append(Target(lanes, lane, chain, True, run[lo:hi], self.ident))
            rear = rears[p][: moved[p]]
            for lo, hi in pieces(len(rear)):  # head piece first, each linked at the tail
                targets.append(Target(lanes, lane, chain, False, rear[lo:hi], self.ident))
        return targets

    def verify_locked(self, lane: Lane, slots: list[int], recs: list[bytes], at_head: bool) -> str | None:
        """Every message still available with the record that was written, the run still
        contiguous, and still at the end of its list that it will leave from."""
        ls = self.lanes
        st, rec_of, nxt, prv = ls.st, ls.recs, ls.nxt, ls.prv
        prev = -1
        for i, rec in zip(slots, recs, strict=True):
            s = st[i]
            same = rec_of[i] is rec
            if s >= AVAILABLE_BELOW or not same:
                return abort_reason(s, same)
            if prev >= 0 and nxt[prev] != i:
                return "moved"
            prev = i
        if at_head:
            return None if nxt[slots[-1]] == lane.front else "moved"
        return None if prv[slots[0]] == lane.rear else "moved"

    def detach_locked(self, target: Target, lo: int, hi: int, info: BlobInfo, index: tuple, nbytes: int) -> None:
        """The blob is linked in the store: take its messages off the lane, put it in the chain."""
        lane = target.lane
        again = self.lanes.detach_run(lane, target.slots[lo:hi], nbytes)
        lane.swept += hi - lo
        self.counters.msgs_reswept += again
        blob = SweptBlob(info.blob_id, nbytes, info.comp_len, info.check, index)
        if target.at_head:
            lane.chain.appendleft(blob)
        else:
            lane.chain.append(blob)
        c = self.counters
        c.blobs_written += 1
        c.msgs_swept += hi - lo
        c.bytes_swept_raw += nbytes
        c.bytes_swept_compressed += info.comp_len

    def end_locked(self, count: bool = True) -> None:
        for lane in self.lanes:
            lane.sweeping -= 1
            self.lanes.settle(lane)
        self.lanes.release_frees()
        self.counters.sweeps += count

    # -- unsweep and search (under the lock) -----------------------------------------------------

    def front_locked(self, lane: Lane) -> int | Need | None:
        """The lane's front list has nothing available: bring the chain back blob by blob until
        an available message appears and return its slot; a :class:`Need` when a blob's records
        must be read first; None when the chain is empty (the rear list has joined the front)."""
        ls = self.lanes
        while lane.chain:
            blob = lane.chain[0]
            records = blob.records()
            if records is None:
                return Need(lane, blob)
            slots = self.splice_locked(lane, blob, records)
            if not len(slots):
                continue
            # From the first message that came back to the end of the front list: when this
            # was the last blob, the rear list has just joined the front behind it.
            st, nxt, i = ls.st, ls.nxt, slots[0]
            while i != lane.front:
                if st[i] < AVAILABLE_BELOW:
                    return i
                i = nxt[i]
        return None

    def splice_locked(self, lane: Lane, blob: SweptBlob, records: list[bytes]) -> Sequence[int]:
        """Append the blob's live messages to the front list in bulk (docs/design.md invariant 4).

        On a durable queue, when the blob holds persistent messages, their records get their
        own keys back in the same write that deletes the blob (one durable home each), made
        here under the lock, before the change in memory.

        :raises MQError: RESOURCE_PROBLEM (2102) when that write fails; nothing changed."""
        c = self.counters
        if blob.prefetch is not None or blob.loaded is not None:
            c.readahead_hits += blob.loaded is None  # loaded: a get read it itself
        flags = blob.flags
        gotten_at: Sequence[int]
        locked_at: Sequence[int]
        if blob.live == blob.count and not blob.bumps and not flags.any():
            live, gotten_at, locked_at, nbytes = records, (), (), blob.raw_bytes
            positions = None
        else:
            positions = [p for p, f in enumerate(flags.tolist()) if f != POS_REMOVED]
            live = [blob.record(records, p) for p in positions]
            gotten_at = [k for k, p in enumerate(positions) if flags[p] == POS_GOTTEN]
            locked_at = [k for k, p in enumerate(positions) if flags[p] == POS_LOCKED]
            nbytes = sum(map(len, live))
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
        slots = self.lanes.splice_front(lane, live, gotten_at, nbytes)
        if gotten_at:
            # A unit of work holds these messages through the blob: it finds them here now.
            blob.moved = {positions[k]: slots[k] for k in gotten_at}  # type: ignore[index]  # set with gotten_at
        if locked_at:
            # A browse lock comes back with its message (engine/browse.py finds it in moved).
            for k in locked_at:
                self.lanes.set_flags(slots[k], LOCKED)
            blob.moved = (blob.moved or {}) | {positions[k]: slots[k] for k in locked_at}  # type: ignore[index]
        blob.unswept = True
        if blob.prefetch is not None or blob.loaded is not None:
            lane.ahead = max(0, lane.ahead - blob.live)
        blob.loaded = None
        blob.prefetch = None
        lane.chain.popleft()
        lane.swept -= len(live)
        self.lanes.settle(lane)  # the last blob back: the rear list joins the front
        if not unlinked:
            self.cleanup.append(("unlink", self.chain_name(lane), blob.blob_id))
        c.unsweeps += 1
        c.msgs_unswept += len(live)
        c.bytes_unswept_raw += nbytes
        return slots

    def search_locked(self, lane: Lane, match: Match) -> SweptHit | Need | None:
        """Find a matching message inside the chain without unsweeping (invariant 5).

        Blobs this get already searched in full are skipped (``match.searched``): a search
        that must read more blobs than the decoded-blob cache holds (a selector makes every
        live message a candidate) would otherwise evict and re-read them for ever."""
        searched = match.searched
        for blob in lane.chain:
            if blob in searched:
                continue
            cand = blob.candidates(match.msg_id, match.correl_id, match.group_id, match.seq)
            if not len(cand):
                continue
            records = blob.records()
            if records is None:
                return Need(lane, blob)
            for pos in cand.tolist():
                rec = blob.record(records, pos)
                if match(rec):
                    return SweptHit(lane, blob, pos, rec)
            searched.add(blob)
        return None

    def readahead_locked(self, lane: Lane) -> None:
        """When the front runs low, read the next blobs in the background: enough of them to
        hold ``readahead_low`` messages, because the read-ahead thread may wait a GIL switch
        interval (5 ms) before it runs while the application gets in a tight loop.

        Callers test ``lane.ready + lane.ahead < readahead_low`` first, so this runs once per
        blob boundary, not on every get."""
        ahead = 0
        for blob in lane.chain:
            if blob.prefetch is None and blob.loaded is None:
                blob.prefetch = self.storage.readahead(self.chain_name(lane), blob.blob_id, blob.check)
            ahead += blob.live
            if lane.ready + ahead >= self.readahead_low:
                break
        lane.ahead = ahead

    # -- a swept message taken by a get (SweptHit), under the lock --------------------------------

    def remove_hit_locked(self, hit: SweptHit) -> int | None:
        """The message leaves the queue. Returns its slot if its blob came back meanwhile (the
        caller removes that slot instead), -1 if the blob was found damaged since (counted out
        then), else None."""
        blob = hit.blob
        if blob.unswept:
            return blob.moved.pop(hit.pos)  # type: ignore[union-attr]  # set as its blob came back
        if blob.damaged:
            return -1
        assert blob.flags[hit.pos] != POS_REMOVED, f"blob {blob.blob_id}: position {hit.pos} removed twice"
        blob.flags[hit.pos] = POS_REMOVED
        blob.live -= 1
        lane = hit.lane
        lane.swept -= 1
        if not blob.live:
            lane.chain.remove(blob)
            self.cleanup.append(("unlink", self.chain_name(lane), blob.blob_id))
            self.lanes.settle(lane)
        return None

    @staticmethod
    def lock_hit_locked(hit: SweptHit, locked: bool) -> None:
        """A browse lock on (or off) a message inside its blob (engine/browse.py): a locked
        position is no candidate for any search, and comes back LOCKED if the blob does."""
        hit.blob.flags[hit.pos] = POS_LOCKED if locked else POS_LIVE

    @staticmethod
    def hide_hit_locked(hit: SweptHit) -> None:
        # Always under the lock that found the hit, so the blob is still swept.
        assert not hit.blob.unswept and hit.blob.flags[hit.pos] in (POS_LIVE, POS_LOCKED), "hidden but not live"
        hit.blob.flags[hit.pos] = POS_GOTTEN

    @staticmethod
    def restore_hit_locked(hit: SweptHit, backout: bool) -> int | None:
        """Backout of a get of a swept message: back in place in its blob, its backout count
        raised. Returns its slot if the blob came back meanwhile (the caller restores that),
        -1 if the blob was found damaged since (its messages were counted out then)."""
        blob = hit.blob
        if blob.unswept:
            return blob.moved.pop(hit.pos)  # type: ignore[union-attr]  # set as its blob came back
        if blob.damaged:
            return -1
        blob.flags[hit.pos] = POS_LIVE
        if backout:
            if blob.bumps is None:
                blob.bumps = {}
            blob.bumps[hit.pos] = blob.bumps.get(hit.pos, 0) + 1
        return None

    def quarantine_locked(self, lane: Lane, blob: SweptBlob) -> int:
        """A damaged blob leaves the chain (kept in the store for inspection); every other
        blob of the queue stays reachable. Returns the messages it took with it."""
        if blob not in lane.chain:
            return 0  # another get got here first
        lane.chain.remove(blob)
        lane.swept -= blob.live
        blob.damaged = True
        self.counters.damaged_blobs += 1
        self.cleanup.append(("detach", self.chain_name(lane), blob.blob_id))
        self.lanes.settle(lane)
        return blob.live

    def check_locked(self) -> None:
        """Assert the chains' invariants (lock held; for tests and the model checks): each
        lane's ``swept`` is the live messages of its blobs; a blob in a chain is neither
        unswept nor damaged, holds at least one live message, and its flags are valid; blobs
        follow each other in arrival order. :raises AssertionError: naming what is broken."""
        for lane in self.lanes:
            live = 0
            last_seq = -1
            for blob in lane.chain:
                assert not blob.unswept and not blob.damaged, f"blob {blob.blob_id} left, but is still chained"
                n = int((blob.flags != POS_REMOVED).sum())
                assert blob.live == n, f"blob {blob.blob_id}: live {blob.live} but {n} positions not removed"
                assert n, f"blob {blob.blob_id} is empty but still chained"
                assert int(blob.flags.max(initial=0)) <= POS_LOCKED, f"blob {blob.blob_id}: bad position flag"
                assert blob.seq_min > last_seq, f"blob {blob.blob_id} out of arrival order in lane {lane.priority}"
                last_seq = blob.seq_max
                live += n
            assert lane.swept == live, f"lane {lane.priority}: swept {lane.swept} but {live} live in its chain"

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
                blob.prefetch = None
                records = None
        else:
            records = None
            self.counters.readahead_misses += 1
        if records is None:
            records = self.read(need)
        blob.loaded = records
        self._loaded.append(blob)
        while len(self._loaded) > LOADED_CACHE:
            old = self._loaded.popleft()
            if old is not blob:
                old.loaded = None

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
        held = "" if e.ids else f"; from the in-memory index: {blob.describe()}"
        return MQError(
            Reason.OBJECT_DAMAGED,
            f"queue {self.name!r}: {e}{held}. The blob left the queue; its other messages flow on "
            "(every MsgId it held is in the error's msg_ids)",
            msg_ids=list(e.ids),
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

    def write_seconds(self, seconds: float) -> None:
        self.counters.write_seconds += seconds

    def lock_seconds(self, t0: float) -> None:
        self.counters.lock_seconds.append(time.perf_counter() - t0)
