"""A local queue: its attributes, its lanes, its lock, its waiters and its tier.

Locking follows CPython's ``queue.py``: one ``threading.Lock`` per queue (``mutex``);
waiting getters each wait on their own ``Condition`` bound to that lock, so that a new
message wakes exactly the waiter MQ would pick (docs/semantics.md §3: one non-browse waiter,
a specific-match waiter before a general one). **Every method whose name starts with an
underscore runs with** ``mutex`` **held by the caller**; the public methods take it
themselves. Nothing else takes a queue's lock.

A message in memory is a *slot* of the queue's :class:`~sweepq.engine.lane.LaneSet` (an
``int``); a message a get found inside a swept blob is a
:class:`~sweepq.engine.swept.SweptHit`. Both are *refs*: what get, units of work and
batches hold. The tier (engine/tiering.py) is a collaborator the queue calls for sweeping,
unsweeping and searching blobs; no store I/O happens under the lock except the sweep's link
(:meth:`LocalQueue.sweep_link` says why).

Counters kept exact under the lock (the sweeper reads them):

* ``depth`` — every message on the queue, committed or not, in memory or swept
  (CurrentQDepth);
* ``Lane.ready`` — committed, not-gotten messages in memory (y);
* ``obtained`` — destructive gets since the last :meth:`take_obtained` (x);
* ``lanes.mem_bytes`` — bytes of the records held in memory.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from sweepq.blobstore import BlobCorruptError
from sweepq.sweeper.cycle import SweepCounts
from sweepq.sweeper.stats import SweepStats, percentile

from . import checks, record
from .constants import (
    OO,
    DeliverySequence,
    IndexType,
    Persistence,
    Reason,
    Usage,
)
from .durable.journal import Batch, Journal
from .durable.layout import queue_prefix
from .errors import MQError
from .index import SlotIndex
from .lane import AVAILABLE_BELOW, BATCHED, HIDDEN, LaneSet
from .matching import Match
from .record import Identity
from .swept import SweptHit, build_index
from .tiering import Need, Plan, QueueTier, Target

if TYPE_CHECKING:
    from sweepq.blobstore import BlobInfo, Store

    from .storage import Storage

Ref = int | SweptHit  # a message a get found: a slot in memory, or a hit inside a blob

MAX_NAME = 48
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/%")


@dataclass(frozen=True)
class QueueAttributes:
    """The definition of a local queue (MQ attribute in brackets).

    ``max_depth`` defaults to MQ's maximum rather than MQ's 5000: a tiered queue is meant
    to grow deep. ``default_input`` is INPUT_SHARED or INPUT_EXCLUSIVE (DEFSOPT).
    """

    delivery_sequence: DeliverySequence = DeliverySequence.PRIORITY  # MSGDLVSQ
    default_priority: int = 0  # DEFPRTY
    default_persistence: Persistence = Persistence.NOT_PERSISTENT  # DEFPSIST
    max_depth: int = 999_999_999  # MAXDEPTH
    max_msg_length: int = 4 * 1024 * 1024  # MAXMSGL
    inhibit_get: bool = False  # GET(DISABLED)
    inhibit_put: bool = False  # PUT(DISABLED)
    shareable: bool = True  # SHARE / NOSHARE
    default_input: OO = OO.INPUT_SHARED  # DEFSOPT
    backout_threshold: int = 0  # BOTHRESH (0 = off)
    backout_requeue_q: str = ""  # BOQNAME
    index_type: IndexType = IndexType.NONE  # INDXTYPE
    usage: Usage = Usage.NORMAL  # USAGE

    def validated(self) -> QueueAttributes:
        """Return self with enums coerced, or raise MQError(PARM_VALUE_ERROR) naming the field."""

        def bad(field: str, why: str) -> MQError:
            return MQError(Reason.PARM_VALUE_ERROR, f"queue attribute {field}: {why}")

        for field in ("inhibit_get", "inhibit_put", "shareable"):
            checks.boolean(getattr(self, field), f"queue attribute {field}")
        for field in ("default_priority", "max_depth", "max_msg_length", "backout_threshold"):
            checks.integer(getattr(self, field), f"queue attribute {field}", Reason.PARM_VALUE_ERROR, 0)
        if not isinstance(self.backout_requeue_q, str):
            raise bad("backout_requeue_q", "must be a queue name (str), or '' for none")
        for field in ("delivery_sequence", "default_persistence", "index_type", "usage", "default_input"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise bad(field, f"must be one of its enum's values, not {value!r:.40}")
        try:
            out = replace(
                self,
                delivery_sequence=DeliverySequence(self.delivery_sequence),
                default_persistence=Persistence(self.default_persistence),
                index_type=IndexType(self.index_type),
                usage=Usage(self.usage),
                default_input=OO(self.default_input),
            )
        except ValueError as e:
            raise bad("enum", str(e)) from None
        if out.default_persistence == Persistence.AS_Q_DEF:
            raise bad("default_persistence", "must be PERSISTENT or NOT_PERSISTENT")
        if not 0 <= out.default_priority <= 9:
            raise bad("default_priority", f"{out.default_priority} is outside 0..9")
        if not 0 <= out.max_depth <= 999_999_999:
            raise bad("max_depth", f"{out.max_depth} is outside 0..999999999")
        if not 0 <= out.max_msg_length <= 100 * 1024 * 1024:
            raise bad("max_msg_length", f"{out.max_msg_length} is outside 0..104857600")
        if out.default_input not in (OO.INPUT_SHARED, OO.INPUT_EXCLUSIVE):
            raise bad("default_input", "must be OO.INPUT_SHARED or OO.INPUT_EXCLUSIVE")
        if not 0 <= out.backout_threshold <= 999_999_999:
            raise bad("backout_threshold", f"{out.backout_threshold} is outside 0..999999999")
        return out


@dataclass(frozen=True)
class QueueInfo:
    """A snapshot of a queue: its attributes and its current counters."""

    name: str
    attributes: QueueAttributes
    current_depth: int
    in_memory: int
    ready: int
    swept: int  # in blobs of the lanes' chains
    mem_bytes: int
    open_input_count: int
    open_output_count: int

    def as_dict(self) -> dict:
        return asdict(self)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME or set(name) - _NAME_CHARS:
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"queue name {name!r}: 1..{MAX_NAME} characters from A-Z a-z 0-9 . _ / %",
        )
    return name


class Waiter:
    """One getter blocked in a WAIT. ``match`` None means any message.

    ``browse`` is BROWSER for a browse without LOCK: every browse waiter is woken by a new
    message (docs/semantics.md §3), and each looks beyond its own cursor (engine/browse.py). A
    browse with LOCK (LOCK_BROWSER) is woken as a getter is. ``rec`` is the message that
    woke the waiter, so that one which finds nothing for itself can pass the wake-up on."""

    __slots__ = ("browse", "cond", "match", "rec")

    def __init__(self, cond: threading.Condition, match: Match | None, browse: int = 0):
        self.cond = cond
        self.match = match
        self.browse = browse
        self.rec: bytes | None = None


BROWSER = 1  # Waiter.browse: a browse waiter without LOCK
LOCK_BROWSER = 2  # Waiter.browse: a browse waiter with LOCK (woken like a getter)


_queue_ids = itertools.count(1)

# The Match field that an index of each type answers (engine/matching.py).
_INDEX_FIELD = {
    IndexType.MSG_ID: "msg_id",
    IndexType.CORREL_ID: "correl_id",
    IndexType.GROUP_ID: "group_id",
    IndexType.MSG_TOKEN: "seq",
}


class LocalQueue:
    """One local queue. Its lanes run from priority 9 to 0 in get order.

    ``ident`` turns records into MsgIds and tokens; ``storage`` (the manager's) gives the
    blob store and the read-ahead pool to the queue's tier. The sweeper drives the queue
    through :meth:`sweep_counts`, :meth:`sweep_begin`, :meth:`sweep_link`,
    :meth:`sweep_abort` and :meth:`sweep_end` (sweeper.cycle.Sweepable).
    """

    def __init__(
        self,
        name: str,
        attrs: QueueAttributes,
        ident: Identity | None = None,
        storage: Storage | None = None,
        backout_handling: bool = False,
        journal: Journal | None = None,
    ):
        self.name = name
        # Persistent messages are written through this (None: nothing is durable).
        self.journal = journal
        self.key_prefix = queue_prefix(name)
        self.backout_handling = backout_handling  # the manager's: poison messages are requeued
        self.id = next(_queue_ids)  # total order for taking several queue locks
        self.mutex = threading.Lock()
        self.lanes = LaneSet()
        self.lane_list = self.lanes.lanes  # by priority, for the hot paths
        self.depth = 0
        self.obtained = 0
        self.expired = 0
        self.waiters: list[Waiter] = []
        self.open_input = 0
        self.open_output = 0
        self.open_exclusive = False
        self.open_handles = 0
        self.deleted = False
        self.batched = 0  # messages assigned to transmission batches
        self.batches: dict[int, list[Ref]] = {}
        self.groups_started: dict = {}  # engine/groups.py: groups a get has started to take
        self.ident = ident or Identity(bytes(12))
        self.tier = QueueTier(name, self.lanes, self.ident, storage)
        self.tier.journal = journal
        self.tier.key_prefix = self.key_prefix
        self.apply(attrs)

    # -- attributes -------------------------------------------------------------------

    def apply(self, attrs: QueueAttributes) -> None:
        """Install new attributes; hot fields are copied to plain attributes for the fast path.

        Lanes never move: switching the delivery sequence changes only where *new* messages
        go, so nothing queued is reordered (seed 000).
        """
        self.attrs = attrs
        self.fifo = attrs.delivery_sequence == DeliverySequence.FIFO
        self.default_priority = attrs.default_priority
        self.default_persistent = attrs.default_persistence == Persistence.PERSISTENT
        self.max_depth = attrs.max_depth
        self.max_msg_length = attrs.max_msg_length
        self.inhibit_get = attrs.inhibit_get
        self.inhibit_put = attrs.inhibit_put
        # Gets move a message whose backout count reached this to the requeue queue (0: off).
        self.poison_limit = attrs.backout_threshold if self.backout_handling and attrs.backout_requeue_q else 0
        kind = attrs.index_type
        idx = self.lanes.index
        if kind == IndexType.NONE:
            self.lanes.index = None
        elif idx is None or idx.kind != kind:
            idx = SlotIndex(kind, self.ident)
            ls = self.lanes
            slots = list(ls.in_memory())
            idx.add_many(slots, [ls.recs[i] for i in slots])
            ls.index = idx
        self.index_field = _INDEX_FIELD.get(kind)

    @property
    def mem_bytes(self) -> int:
        return self.lanes.mem_bytes

    @property
    def in_memory(self) -> int:
        return self.lanes.count

    @property
    def ready(self) -> int:
        """Committed, not-gotten messages in memory (y, batched ones included)."""
        return sum(lane.ready for lane in self.lanes)

    def info(self) -> QueueInfo:
        with self.mutex:
            return QueueInfo(
                name=self.name,
                attributes=self.attrs,
                current_depth=self.depth,
                in_memory=self.lanes.count,
                ready=sum(lane.ready for lane in self.lanes),
                swept=sum(lane.swept for lane in self.lanes),
                mem_bytes=self.lanes.mem_bytes,
                open_input_count=self.open_input,
                open_output_count=self.open_output,
            )

    def take_obtained(self) -> int:
        """Return the destructive gets counted since the last call, and reset (sweeper x)."""
        with self.mutex:
            n, self.obtained = self.obtained, 0
            return n

    def has_uncommitted(self) -> bool:
        with self.mutex:
            st = self.lanes.st
            return any(st[i] & HIDDEN for i in self.lanes.in_memory()) or any(
                (b.flags == 2).any() for lane in self.lanes for b in lane.chain
            )

    # -- under the lock: placing and finding ---------------------------------------------

    def _insert(self, rec: bytes, lane_i: int, state: int) -> int:
        """Append a record after the last message of lane ``lane_i``; return its slot."""
        i = self.lanes.append(self.lane_list[lane_i], rec, state)
        self.depth += 1
        if state < AVAILABLE_BELOW and self.waiters:
            self._wake_for(rec)
        return i

    def _find(self, match: Match | None) -> Ref | Need | None:
        """The first available message in get order that ``match`` accepts.

        Each lane is front ⧺ chain ⧺ rear. Without a match, a lane whose front list has
        nothing available brings its chain back blob by blob (unsweep); with a match the
        chain is searched in place through its index, and nothing is brought back. Either
        may need a blob that is not in memory yet: then a :class:`Need` comes back, and the
        caller reads it without the lock and calls again.

        ``lanes.mask`` has bit p set for every lane p that may hold messages (set on append,
        cleared here lazily once a lane is found empty), so a get skips empty priorities
        without looking at them.
        """
        ls = self.lanes
        if match is not None and ls.index is not None:
            value = getattr(match, self.index_field)
            if value is not None:
                return self._find_indexed(match, value)
        mask = ls.mask
        lanes, nxt, st = ls.lanes, ls.nxt, ls.st
        while mask:
            p = mask.bit_length() - 1
            mask ^= 1 << p
            lane = lanes[p]
            if lane.ready or lane.chain:
                s = lane.front
                i = nxt[s]
                if match is None:
                    while i != s:
                        if st[i] < AVAILABLE_BELOW:
                            return i
                        i = nxt[i]
                else:
                    recs = ls.recs
                    while i != s:
                        if st[i] < AVAILABLE_BELOW and match(recs[i]):
                            return i
                        i = nxt[i]
                if lane.chain:
                    # Without a match: unsweep until something is available (or the chain is
                    # empty, when the rear list has joined the front). With one: search in place.
                    hit = self.tier.front_locked(lane) if match is None else self.tier.search_locked(lane, match)
                    if hit is not None:
                        return hit
                s = lane.rear
                i = nxt[s]
                while i != s:
                    if st[i] < AVAILABLE_BELOW and (match is None or match(ls.recs[i])):
                        return i
                    i = nxt[i]
            elif not lane.mem:
                ls.mask &= ~lane.bit
        return None

    def _find_indexed(self, match: Match, value: object) -> Ref | Need | None:
        """:meth:`_find` for a match on the indexed field: the in-memory candidates come from
        the index (O(messages with that value)), swept ones from the chain's summaries.

        Get order is kept: lanes from the highest; in a lane the front list, then the chain,
        then the rear list, each in arrival order (a message's ``seq`` is its arrival number,
        and the front list's are below the chain's, the rear list's above)."""
        ls = self.lanes
        st, recs = ls.st, ls.recs
        by_lane: dict[int, list[int]] = {}
        for i in ls.index.slots(value):
            if st[i] < AVAILABLE_BELOW and match(recs[i]):
                by_lane.setdefault(st[i] & 0x0F, []).append(i)
        lanes = ls.lanes
        top = max(by_lane, default=-1)
        for p in range(len(lanes) - 1, top, -1):  # higher lanes: only their chains may match
            if lanes[p].chain:
                hit = self.tier.search_locked(lanes[p], match)
                if hit is not None:
                    return hit
        if top < 0:
            return None
        found = by_lane[top]
        if len(found) > 1:
            found.sort(key=lambda i: record.seq_of(recs[i]))
        lane = lanes[top]
        if lane.chain and record.seq_of(recs[found[0]]) > lane.chain[0].seq_min:
            # The first candidate is behind the chain (rear list): the chain comes first.
            hit = self.tier.search_locked(lane, match)
            if hit is not None:
                return hit
        return found[0]

    def _record(self, ref: Ref) -> bytes:
        return self.lanes.recs[ref] if type(ref) is int else ref.rec

    # -- under the lock: state changes ---------------------------------------------------

    def _remove(self, ref: Ref, durable: bool = True) -> None:
        """Take a message off the queue for good. A persistent message's record goes first
        (``durable``; False: the caller wrote it already, e.g. in a commit's one write).

        :raises MQError: RESOURCE_PROBLEM (2102) when that write fails; nothing changed."""
        if durable and self.journal is not None:
            self.journal.remove(self, [ref])
        if type(ref) is not int:
            slot = self.tier.remove_hit_locked(ref)
            if slot is None:
                self.depth -= 1
                return
            if slot < 0:
                return  # its blob was found damaged: counted out then
            ref = slot  # its blob came back meanwhile: remove the slot
        lane = self.lanes.remove(ref)
        self.depth -= 1
        if lane.chain and lane.ready + lane.ahead < self.tier.readahead_low:
            self.tier.readahead_locked(lane)

    def _hide(self, ref: Ref) -> None:
        """A get under syncpoint: the message stays in place, invisible, until commit/backout."""
        if type(ref) is int:
            self.lanes.hide(ref)
        else:
            self.tier.hide_hit_locked(ref)

    def _restore(self, ref: Ref, backout: bool, batch: Batch | None = None) -> None:
        """Backout of a get: the message reappears in its place, its backout count raised.
        With ``batch``, the change that hardens a persistent message's new count is added
        to it (the caller writes it)."""
        if type(ref) is not int:
            slot = self.tier.restore_hit_locked(ref, backout)
            if slot is None:
                if backout and batch is not None:
                    Journal.add_backout(batch, self, ref, record.with_backout(ref.rec, record.backout_of(ref.rec) + 1))
                self._wake_all()  # a message is back in the chain: let every waiter look again
                return
            if slot < 0:
                return  # its blob was found damaged meanwhile: the error named it
            ref = slot
        rec = None
        if backout:
            old = self.lanes.recs[ref]
            rec = record.with_backout(old, record.backout_of(old) + 1)
        self.lanes.restore(ref, rec)
        if rec is not None and batch is not None:
            Journal.add_backout(batch, self, ref, rec)
        if self.waiters:
            self._wake_for(self.lanes.recs[ref])

    def _commit_put(self, slot: int) -> None:
        self.lanes.commit_put(slot)
        if self.waiters:
            self._wake_for(self.lanes.recs[slot])

    # -- under the lock: transmission batches (seed 003: never swept) ---------------------

    def _assign_batch(self, batch_id: int, max_messages: int, taken: list[int]) -> Need | None:
        """Assign available messages, in get order, to a batch until ``taken`` holds
        ``max_messages``; a :class:`Need` when a blob must be read first (call again after).

        Batched messages stay in place but no get sees them and no sweep moves them; they
        count as obtained (a channel servicing the queue)."""
        while len(taken) < max_messages:
            ref = self._find(None)
            if ref is None:
                break
            if type(ref) is Need:
                return ref
            self.lanes.set_flags(ref, BATCHED)
            self.batched += 1
            self.obtained += 1
            taken.append(ref)
        return None

    def _end_batch(self, batch_id: int, confirmed: bool) -> None:
        """A confirmed batch leaves the queue; a released one becomes available again.

        :raises MQError: 2102 when the records of a confirmed batch cannot be deleted; the
            batch is then still assigned."""
        if confirmed and self.journal is not None:
            self.journal.remove(self, self.batches[batch_id])
        slots = self.batches.pop(batch_id)
        self.batched -= len(slots)
        for i in slots:
            self.lanes.clear_flags(i, BATCHED)
            if confirmed:
                self._remove(i, durable=False)
            elif self.waiters:
                self._wake_for(self.lanes.recs[i])

    # -- under the lock: waiters ---------------------------------------------------------

    def _wake_for(self, rec: bytes) -> None:
        """A message became available: wake the one waiter MQ would choose for it.

        A waiter for a particular message that this one matches goes first; otherwise the
        longest-waiting general waiter (a LOCK browse counts as one). Every browse waiter
        without LOCK is woken too. The woken waiter leaves the list, so the next new
        message wakes someone else; a waiter that finds nothing re-registers.
        """
        chosen = None
        for w in self.waiters:
            if w.match is not None and w.browse != BROWSER and w.match(rec):
                chosen = w
                break
        if chosen is None:
            for w in self.waiters:
                if w.match is None and w.browse != BROWSER:
                    chosen = w
                    break
        if chosen is not None:
            self.waiters.remove(chosen)
            chosen.rec = rec
            chosen.cond.notify()
        browsers = [w for w in self.waiters if w.browse == BROWSER]
        if browsers:  # every browse waiter looks again, each beyond its own cursor
            for w in browsers:
                self.waiters.remove(w)
                w.cond.notify()

    def _wake_all(self) -> None:
        """Wake every waiter, so each re-checks the queue's state (inhibit, delete, close)."""
        for w in self.waiters:
            w.cond.notify()
        self.waiters.clear()

    # -- reading blobs (entry points: they take the lock themselves) ---------------------------

    def load(self, need: Need) -> None:
        """Read the blob a get needs, without the lock. A damaged blob leaves the chain here
        and its error is raised (2101); a failed read raises 2102 and changes nothing."""
        try:
            self.tier.load(need)
        except BlobCorruptError as e:
            with self.mutex:
                self.depth -= self.tier.quarantine_locked(need.lane, need.blob)
            self.tier.run_cleanup()
            raise self.tier.damaged(need.blob, e) from e

    def unsweep_all(self) -> int:
        """Bring every swept message back into memory, blob by blob as gets do (benchmarks, and
        a queue about to be drained for good). Returns the blobs brought back.

        :raises MQError: 2102 when a read fails (what came back so far stays), 2101 for a
            damaged blob (it leaves the queue)."""
        blobs = 0
        while True:
            need = None
            with self.mutex:
                for lane in self.lanes:
                    while lane.chain and need is None:
                        blob = lane.chain[0]
                        records = blob.records()
                        if records is None:
                            need = Need(lane, blob)
                        else:
                            self.tier.splice_locked(lane, blob, records)
                            blobs += 1
            if need is None:
                break
            self.load(need)
        self.after_get()
        return blobs

    def after_get(self) -> None:
        """Store cleanups owed by the last change (blobs that came back or emptied), run
        without the lock; they never fail the caller."""
        if self.tier.cleanup:
            self.tier.run_cleanup()

    # -- the sweeper protocol (sweeper.cycle.Sweepable) -------------------------------------------

    def sweep_counts(self) -> SweepCounts:
        """What the rule needs (sweeper.cycle.SweepCounts); x restarts from 0 for the next
        interval."""
        self.tier.run_cleanup()  # retry owed store changes once an interval
        with self.mutex:
            self.lanes.shrink()
            lanes = self.lanes.lanes
            y = sum(lane.ready for lane in lanes) - self.batched
            x, self.obtained = self.obtained, 0
            back = sum(lane.back for lane in lanes)
            swept = any(lane.chain for lane in lanes)
            return SweepCounts(y, x, back, swept, self.lanes.mem_bytes)

    def sweep_counts_bytes(self) -> int:
        with self.mutex:
            return self.lanes.mem_bytes

    def sweepable_bytes(self, keep: int) -> int:
        """What a sweep keeping ``keep`` would move: the runs are chosen as for a sweep (and
        released at once), so the count is the protocol's, never what it forbids."""
        plan = self.sweep_begin(keep)
        try:
            return sum(len(r) for t in plan.targets for r in t.records)
        finally:
            with self.mutex:
                self.tier.end_locked(count=False)

    def sweep_begin(self, keep: int) -> Plan:
        """Mark the lanes sweeping under the lock (O(lanes)), then choose the runs without it."""
        t0 = time.perf_counter()
        with self.mutex:
            if self.deleted:
                return Plan([])
            limits = self.tier.begin_locked()
        self.tier.lock_seconds(t0)
        return Plan(self.tier.choose(keep, limits))

    def sweep_link(
        self, plan: Plan, target: Target, blobs: list[BlobInfo], store: Store, write_seconds: float = 0.0
    ) -> tuple[int, str | None]:
        """Verify, link and detach ``target`` blob by blob; return (messages moved, abort reason).

        The lock is taken once per blob: a hold is O(messages in one blob), which the store
        bounds. The link (one small atomic store write) runs *under* the lock on purpose: it
        is the commit point of the move, and verifying, linking and detaching must be one
        step for every other thread, or a get could take a message that is being linked.
        A front run is linked from its tail end (each blob at the chain's head), a rear run
        from its head end: an abort stops there, and what was linked is a contiguous end of
        the run, so order holds."""
        tier = self.tier
        tier.write_seconds(write_seconds)
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
            recs = target.records[lo:hi]
            if not all(recs):
                # A get emptied a slot of this run after the sweep chose it (the records are
                # read without the lock): the run is no longer on the queue as chosen.
                self._drop_pending([c[0].blob_id for c in chunks[k:]], store)
                with self.mutex:
                    tier.counters.aborts["removed"] += 1
                return moved, "removed"
            index = build_index(recs, target.ids[lo:hi])  # without the lock
            # Persistent messages move their durable home into the blob in the same write.
            homes = [] if self.journal is None else Journal.home_keys(self.key_prefix, lane.priority, recs)
            nbytes = sum(map(len, recs))
            t0 = time.perf_counter()
            with self.mutex:
                reason = tier.verify_locked(lane, target.slots[lo:hi], recs, target.at_head)
                if reason is None:
                    try:
                        store.link(target.chain, [info.blob_id], target.at_head, homes)
                    except Exception:
                        reason = "store_error"
                if reason is None:
                    tier.detach_locked(target, lo, hi, info, index, nbytes)
            tier.lock_seconds(t0)
            if reason is not None:
                self._drop_pending([c[0].blob_id for c in chunks[k:]], store)
                with self.mutex:
                    tier.counters.aborts[reason] += 1
                return moved, reason
            moved += hi - lo
        return moved, None

    def _drop_pending(self, blob_ids: list[int], store: Store) -> None:
        """Delete an aborted sweep's pending blobs (no lock); if that fails, later."""
        try:
            store.delete_pending(blob_ids)
        except Exception:
            self.tier.cleanup.append(("delete", b"", blob_ids))
            self.tier.counters.store_retries += 1

    def sweep_abort(self, plan: Plan, target: Target, reason: str) -> None:
        with self.mutex:
            self.tier.counters.aborts[reason] += 1

    def sweep_end(self, plan: Plan) -> None:
        with self.mutex:
            self.tier.end_locked()
        self.tier.run_cleanup()

    def sweep_stats(self) -> SweepStats:
        with self.mutex:
            c = self.tier.counters
            chain_blobs = [b for lane in self.lanes for b in lane.chain]
            return SweepStats(
                queue=self.name,
                msgs_in_memory=self.lanes.count,
                bytes_in_memory=self.lanes.mem_bytes,
                msgs_swept=sum(lane.swept for lane in self.lanes),
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
                write_seconds=c.write_seconds,
            )
