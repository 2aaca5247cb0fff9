"""A local queue: its attributes, its lanes, its lock, its waiters and its tier.

**The lock rule** (the one place it is written; every other docstring refers here). Each
queue has one ``threading.Lock``, ``mutex``. It protects everything of the queue that
changes: the lanes (engine/lane.py), the counters below, the waiters, the chains of swept
blobs and their in-memory indexes, the batches and the group bookkeeping.

* **Who takes it**: the queue's own public methods; the get path (engine/getpath.py) and
  the put path (engine/putpath.py), around one find-and-take or one placement; the browse
  and group calls (engine/browse.py, engine/groups/) through the get path's
  :func:`~sweepq.engine.getpath.obtain`; the unit of work (engine/uow.py), which takes the
  locks of every queue a commit or backout touches in queue-id order (so two commits never
  deadlock); the connection's open and close of a handle (open counts); the manager's
  alter, delete and close. Nothing else.
* **Naming**: a function or method whose name ends in ``_locked`` is called with the
  queue's lock held and never takes it. The lanes' methods (engine/lane.py) are all called
  so: the lanes are this queue's storage, as the deque is ``queue.Queue``'s.
* **No lock is held across a blob read, a sync, a sweep's compression or write, or a
  wait** (a waiter waits on a Condition bound to the lock, which releases it). The only
  store I/O under the lock is a write that must be ordered with the change it records,
  never synced there: the journal's writes for persistent messages
  (engine/durable/journal.py), the sweep's link of a written blob into its chain
  (:meth:`LocalQueue.sweep_link`) and an unsweep's move of persistent records back to
  their own keys (engine/tiering.py). Each is one small atomic RocksDB write batch.
* Two queue locks are held together only by a commit or backout and by the poison move
  (engine/poison.py), always taken in queue-id order, so no two threads deadlock.

Waiters (``wait_locked``): a getter blocked in a WAIT waits on its own ``Condition`` bound
to ``mutex``, so that a new message wakes exactly the waiter MQ would pick
(docs/semantics.md §3: one non-browse waiter, a specific-match waiter before a general one;
every browser without LOCK).

A message in memory is a *slot* of the queue's :class:`~sweepq.engine.lane.LaneSet` (an
``int``); a message a get found inside a swept blob is a
:class:`~sweepq.engine.swept.SweptHit`. Both are *refs*: what gets, units of work and
batches hold. The tier (engine/tiering.py) is a collaborator the queue calls for sweeping,
unsweeping and searching blobs.

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
from sweepq.sweeper.clock import Clock, SystemClock
from sweepq.sweeper.cycle import SweepCounts
from sweepq.sweeper.stats import SweepStats, percentile

from . import checks, record
from .constants import (
    OO,
    DeliverySequence,
    IndexType,
    MemoryPolicy,
    Persistence,
    Reason,
    Usage,
)
from .durable.journal import Batch, Journal
from .durable.layout import queue_prefix
from .errors import MQError
from .found import Found
from .index import SlotIndex
from .lane import _SENTINELS, AVAILABLE_BELOW, BATCHED, HIDDEN, LANE_MASK, LaneSet
from .matching import Match
from .record import Identity
from .swept import SweptHit, build_index
from .tiering import Need, Plan, QueueTier, Target

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sweepq.blobstore import BlobInfo, Store

    from .budget import MemoryBudget
    from .storage import Storage
    from .swept import SweptBlob

# A message a get found: a slot in memory, or a hit inside a blob. Code tells them apart with
# `type(ref) is int`, the cheapest test; a type checker narrows only its true branch (int has
# subclasses), so a line that uses a SweptHit in the other branch carries a `type: ignore`.
Ref = int | SweptHit

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
    # Under the queue manager's memory budget (engine/budget.py): what a put does once the
    # budget is reached (as Artemis's address-full policy), and how long BLOCK waits.
    memory_policy: MemoryPolicy = MemoryPolicy.PAGE
    memory_wait_ms: int = 10_000

    def validated(self) -> QueueAttributes:
        """Return self with enums coerced, or raise MQError(PARM_VALUE_ERROR) naming the field."""

        def bad(field: str, why: str) -> MQError:
            return MQError(Reason.PARM_VALUE_ERROR, f"queue attribute {field}: {why}")

        for field in ("inhibit_get", "inhibit_put", "shareable"):
            checks.boolean(getattr(self, field), f"queue attribute {field}")
        for field in ("default_priority", "max_depth", "max_msg_length", "backout_threshold", "memory_wait_ms"):
            checks.integer(getattr(self, field), f"queue attribute {field}", Reason.PARM_VALUE_ERROR, 0)
        if not isinstance(self.backout_requeue_q, str):
            raise bad("backout_requeue_q", "must be a queue name (str), or '' for none")
        enums = ("delivery_sequence", "default_persistence", "index_type", "usage", "default_input", "memory_policy")
        for field in enums:
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
                memory_policy=MemoryPolicy(self.memory_policy),
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


GETTER = 0  # Waiter.kind: a destructive get (or a channel's batch)
BROWSER = 1  # a browse without LOCK: every new message wakes every browser
LOCK_BROWSER = 2  # a browse with LOCK: woken as a getter is


class Waiter:
    """One call blocked in a WAIT (engine/getpath.py :class:`~sweepq.engine.getpath.Wait`).

    ``match`` is the predicate a new record must pass to wake it (None: any message);
    ``kind`` is GETTER, BROWSER or LOCK_BROWSER (:meth:`LocalQueue.wake_for_locked` says
    who wakes whom). ``passes``: the predicate admits records the call may then be unable
    to take (a group's completeness rules, a LOCK browse's cursor), so a wake it cannot use
    is passed on (:meth:`LocalQueue.pass_on_locked`). ``rec`` is the record that woke it
    (None: woken by a timeout or a state change); ``offered`` the last record it was woken
    for, so that a wake passed on never comes back to it.
    """

    __slots__ = ("cond", "kind", "match", "offered", "passes", "rec")

    def __init__(
        self, cond: threading.Condition, match: Callable[[bytes], bool] | None, kind: int = GETTER, passes: bool = False
    ):
        self.cond = cond
        self.match = match
        self.kind = kind
        self.passes = passes
        self.rec: bytes | None = None
        self.offered: bytes | None = None


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
        clock: Clock | None = None,
    ):
        self.name = name
        # WAITs and expiry run on the queue manager's clock (a ManualClock in tests).
        self.clock: Clock = clock or SystemClock()
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
        self.batches: dict[int, list[int]] = {}  # slots: a batch is never swept
        self.groups_started: dict = {}  # engine/groups/: groups a get has started to take
        self.sweep_lock = threading.Lock()  # one sweep of this queue at a time (sweep_begin)
        self.temporary = False  # a temporary dynamic queue (engine/dynamic.py): no persistent puts
        # The memory budget (engine/budget.py): the manager's, or None; paging (policy PAGE
        # over the budget) and the bytes put since the last page-out, which happens at a
        # page's worth (page_bytes, set by the budget).
        self.budget: MemoryBudget | None = None
        self.checked_bytes = 0  # lanes.mem_bytes when the budget last counted
        self.paging = False
        self.paged = 0
        self.page_bytes = 256 * 1024
        self.ident = ident or Identity(bytes(12))
        self.tier = QueueTier(name, self.lanes, self.ident, storage)  # type: ignore[arg-type]  # the manager's
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

    def check(self) -> None:
        """Assert the queue's invariants (takes the lock; for tests, the model checks and
        debugging): the lanes' (:meth:`LaneSet.check`), the chains'
        (:meth:`QueueTier.check_locked`), and ``depth`` = messages in memory + live messages
        in blobs. :raises AssertionError: naming the first one broken."""
        with self.mutex:
            self.lanes.check()
            self.tier.check_locked()
            held = sum(lane.mem + lane.swept for lane in self.lanes)
            assert self.depth == held, f"{self.name}: depth {self.depth} but {held} messages held"
            assert self.batched == sum(len(v) for v in self.batches.values()), f"{self.name}: batched count"

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

    def insert_locked(self, recs: list[bytes], lane_i: int, state: int) -> Sequence[int]:
        """Append ``recs`` after the last message of lane ``lane_i`` with ``state`` (the lane
        index and UNCOMMITTED or not); return their slots. Waiters are woken for the ones
        that are available at once. The caller checked MAXDEPTH and wrote the journal."""
        lanes = self.lanes
        lane = self.lane_list[lane_i]
        # One record (the common case): append is much cheaper than a bulk link.
        slots = [lanes.append(lane, recs[0], state)] if len(recs) == 1 else lanes.extend(lane, recs, state)
        self.depth += len(recs)
        if self.waiters and state < AVAILABLE_BELOW:
            for rec in recs:
                if not self.waiters:
                    break
                self.wake_for_locked(rec)
        return slots

    def find_locked(self, match: Match | None = None) -> Ref | Need | None:
        """The first available message in get order that ``match`` accepts (None: any).

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
        if match is None and ls.mask:
            # The get hot path: the first message of the highest lane's front list.
            i = ls.nxt[self.lane_list[ls.mask.bit_length() - 1].front]
            if i >= _SENTINELS and ls.st[i] < AVAILABLE_BELOW:
                return i
        if match is not None and ls.index is not None:
            value = getattr(match, self.index_field)  # type: ignore[arg-type]  # set with lanes.index
            if value is not None:
                return self._find_indexed_locked(match, value)
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

    def _find_indexed_locked(self, match: Match, value: object) -> Ref | Need | None:
        """:meth:`_find` for a match on the indexed field: the in-memory candidates come from
        the index (O(messages with that value)), swept ones from the chain's summaries.

        Get order is kept: lanes from the highest; in a lane the front list, then the chain,
        then the rear list, each in arrival order (a message's ``seq`` is its arrival number,
        and the front list's are below the chain's, the rear list's above)."""
        ls = self.lanes
        st, recs = ls.st, ls.recs
        by_lane: dict[int, list[int]] = {}
        for i in ls.index.slots(value):  # type: ignore[union-attr]  # called when the queue has an index
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

    def find_run_locked(self, limit: int) -> Ref | Found | Need | None:
        """:meth:`find_locked` for a batch get: the first available message and, when it is
        in memory, the available messages that follow it in its list (at most ``limit``), as
        one :class:`~sweepq.engine.getpath.Found` run that a batch takes at once."""
        ref = self.find_locked(None)
        if type(ref) is not int or limit == 1:
            return ref
        run = self.lanes.available_run(ref, limit)
        if len(run) == 1:
            return ref
        recs = self.lanes.recs
        return Found(run, [recs[i] for i in run], run=True)

    def record_of(self, ref: Ref) -> bytes:
        return self.lanes.recs[ref] if type(ref) is int else ref.rec  # type: ignore[union-attr]

    # -- under the lock: state changes ---------------------------------------------------

    def remove_locked(self, ref: Ref, durable: bool = True) -> None:
        """Take a message off the queue for good. A persistent message's record goes first
        (``durable``; False: the caller wrote it already, e.g. in a commit's one write).

        :raises MQError: RESOURCE_PROBLEM (2102) when that write fails; nothing changed."""
        if durable and self.journal is not None:
            self.journal.remove(self, [ref])
        if type(ref) is not int:
            slot = self.tier.remove_hit_locked(ref)  # type: ignore[arg-type]
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

    def hide_locked(self, ref: Ref) -> None:
        """A get under syncpoint: the message stays in place, invisible, until commit/backout."""
        if type(ref) is int:
            self.lanes.hide(ref)
        else:
            self.tier.hide_hit_locked(ref)  # type: ignore[arg-type]

    def remove_run_locked(self, slots: list[int], recs: list[bytes]) -> None:
        """:meth:`remove_locked` of a run of available slots of one lane's list, in bulk (a
        batch get; the caller wrote the journal)."""
        lane = self.lane_list[self.lanes.st[slots[0]] & LANE_MASK]
        self.lanes.detach_run(lane, slots, sum(map(len, recs)))
        self.depth -= len(slots)
        if lane.chain and lane.ready + lane.ahead < self.tier.readahead_low:
            self.tier.readahead_locked(lane)

    def hide_run_locked(self, slots: list[int]) -> None:
        """:meth:`hide_locked` of a run of available slots of one lane's list."""
        self.lanes.hide_run(self.lane_list[self.lanes.st[slots[0]] & LANE_MASK], slots)

    def restore_locked(self, ref: Ref, backout: bool, batch: Batch | None = None) -> None:
        """Backout of a get: the message reappears in its place, its backout count raised.
        With ``batch``, the change that hardens a persistent message's new count is added
        to it (the caller writes it)."""
        if type(ref) is not int:
            slot = self.tier.restore_hit_locked(ref, backout)  # type: ignore[arg-type]
            if slot is None:
                if backout and batch is not None:
                    Journal.add_backout(batch, self, ref, record.with_backout(ref.rec, record.backout_of(ref.rec) + 1))  # type: ignore[union-attr]
                self.wake_all_locked()  # a message is back in the chain: let every waiter look again
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
            self.wake_for_locked(self.lanes.recs[ref])

    def commit_put_locked(self, slot: int) -> None:
        self.lanes.commit_put(slot)
        if self.waiters:
            self.wake_for_locked(self.lanes.recs[slot])

    # -- under the lock: transmission batches (seed 003: never swept) ---------------------

    def assign_locked(self, batch_id: int, slot: int) -> None:
        """Assign the available message at ``slot`` to a channel's batch (engine/getpath.py
        :func:`~sweepq.engine.getpath.assign_batch`): it stays in place but no get sees it and
        no sweep moves it (seed 003); it counts as obtained (a channel servicing the queue)."""
        self.lanes.set_flags(slot, BATCHED)
        self.batched += 1
        self.obtained += 1

    def end_batch_locked(self, batch_id: int, confirmed: bool, harden: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """A confirmed batch leaves the queue; a released one becomes available again. The
        records of a confirmed batch are deleted and ``harden`` (key, value) written in one
        store write, before anything changes in memory.

        :raises MQError: 2102 when that write fails; the batch is then still assigned."""
        slots = self.batches.get(batch_id, [])
        if self.journal is not None and (harden or (confirmed and slots)):
            b = Batch()
            for ref in slots if confirmed else ():
                Journal.add_removal(b, self, ref)
            b.puts += harden
            self.journal.write(b, f"ending a batch of {self.name!r}")
        slots = self.batches.pop(batch_id, [])
        self.batched -= len(slots)
        for i in slots:
            self.lanes.clear_flags(i, BATCHED)
            if confirmed:
                self.remove_locked(i, durable=False)
            elif self.waiters:
                self.wake_for_locked(self.lanes.recs[i])

    # -- under the lock: waiters ---------------------------------------------------------

    def new_waiter(self, match: Callable[[bytes], bool] | None, kind: int = GETTER, passes: bool = False) -> Waiter:
        """A waiter for one call (engine/getpath.py), its Condition bound to ``mutex``."""
        return Waiter(threading.Condition(self.mutex), match, kind, passes)

    def wait_locked(self, w: Waiter, deadline: float | None) -> None:
        """Wait until ``w`` is woken (a record for it, or a change of the queue's state) or
        ``deadline`` (clock time; None: never) passes. The lock is released while waiting
        and held again on return; the caller looks again and checks what may have changed."""
        w.rec = None
        self.waiters.append(w)
        self.clock.wait(w.cond, deadline)
        if w in self.waiters:
            self.waiters.remove(w)
        searched = getattr(w.match, "searched", None)
        if searched:
            searched.clear()  # a blob searched before may hold a message backed out since

    def wake_for_locked(self, rec: bytes, passed_by: Waiter | None = None) -> None:
        """A message became available: wake the one waiter MQ would choose for it.

        A waiter for a particular message that this one matches goes first; otherwise the
        longest-waiting general waiter (a LOCK browse counts as one). Every browse waiter
        without LOCK is woken too. The woken waiter leaves the list, so the next new
        message wakes someone else; a waiter that finds nothing re-registers.

        ``passed_by``: the wake is passed on by that waiter, which could not use it: only
        getters it was not offered to already are candidates (so a wake never circles), and
        no browser is woken again."""
        waiters = self.waiters

        def candidate(w: Waiter) -> bool:
            return w.kind != BROWSER and (passed_by is None or (w.kind == GETTER and w.offered is not rec))

        chosen = next((w for w in waiters if w.match is not None and candidate(w) and w.match(rec)), None)
        if chosen is None:
            chosen = next((w for w in waiters if w.match is None and candidate(w)), None)
        if chosen is not None:
            waiters.remove(chosen)
            chosen.rec = chosen.offered = rec
            chosen.cond.notify()
        if passed_by is None:
            browsers = [w for w in waiters if w.kind == BROWSER]
            for w in browsers:  # every browse waiter looks again, each beyond its own cursor
                waiters.remove(w)
                w.cond.notify()

    def pass_on_locked(self, w: Waiter) -> None:
        """``w`` was woken for a record its call then could not take: offer that record to
        the next waiter MQ would choose (only when ``w``'s predicate admits records its call
        may not take: see :class:`Waiter`)."""
        rec, w.rec = w.rec, None
        if rec is not None and w.passes and self.waiters:
            self.wake_for_locked(rec, passed_by=w)

    def wake_all_locked(self) -> None:
        """Wake every waiter, so each re-checks the queue's state (inhibit, delete, close)."""
        for w in self.waiters:
            w.cond.notify()
        self.waiters.clear()

    # -- reading blobs (entry points: they take the lock themselves) ---------------------------

    def load(self, need: Need, keep: Callable[[SweptBlob, list[bytes]], object] | None = None) -> None:
        """Read the blob ``need`` names, without the lock: into the tier's cache of decoded
        blobs (a get), or handed to ``keep(blob, records)`` (a browse cursor, which leaves
        the chain alone). A blob found damaged leaves the chain here and 2101 names what it
        held; a failed read raises 2102 and changes nothing. A blob that another consumer
        brought back (or that left the chain otherwise) while this one read is no damage:
        the call returns and the caller looks again."""
        tier = self.tier
        try:
            if keep is None:
                tier.load(need)
            else:
                keep(need.blob, tier.read(need))
        except BlobCorruptError as e:
            blob = need.blob
            with self.mutex:
                if blob.unswept or blob.damaged or blob not in need.lane.chain:
                    return
                self.depth -= tier.quarantine_locked(need.lane, blob)
            tier.run_cleanup()
            raise tier.damaged(blob, e) from e

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

    def sweep_counts(self, reset: bool = True) -> SweepCounts:
        """What the rule needs (sweeper.cycle.SweepCounts); x restarts from 0 for the next
        interval unless ``reset`` is False."""
        self.tier.run_cleanup()  # retry owed store changes once an interval
        with self.mutex:
            self.lanes.shrink()
            lanes = self.lanes.lanes
            y = sum(lane.ready for lane in lanes) - self.batched
            x = self.obtained
            if reset:
                self.obtained = 0
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
            self._end_sweep(plan, count=False)

    def sweep_begin(self, keep: int) -> Plan:
        """Mark the lanes sweeping under the lock (O(lanes)), then choose the runs without it.

        One sweep of a queue at a time: this takes the queue's ``sweep_lock`` (waiting for a
        sweep in progress, the cycle's or a producer's page-out) and :meth:`sweep_end`
        releases it; the two are always paired."""
        self.sweep_lock.acquire()
        try:
            t0 = time.perf_counter()
            with self.mutex:
                if self.deleted:
                    return Plan([], begun=False)
                limits = self.tier.begin_locked()
            self.tier.lock_seconds(t0)
            return Plan(self.tier.choose(keep, limits))
        except BaseException:
            self.sweep_lock.release()
            raise

    def _end_sweep(self, plan: Plan, count: bool) -> None:
        try:
            if plan.begun:
                with self.mutex:
                    self.tier.end_locked(count)
        finally:
            self.sweep_lock.release()

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
        self._end_sweep(plan, count=True)
        self.tier.run_cleanup()

    # -- the memory budget (engine/budget.py) --------------------------------------------------

    def start_paging(self) -> None:
        """The memory budget is reached and this queue's policy is PAGE: from now on its new
        messages go to the rear lists, which the producers write out a blob's worth at a time
        (:meth:`page_due`, sweeper.cycle.Sweeper.page_out)."""
        if self.paging:
            return
        with self.mutex:
            if not self.paging:
                self.paging = True
                self.paged = 0
                for lane in self.lanes:
                    lane.sweeping += 1

    def stop_paging(self) -> None:
        """Back under the budget's low mark: new messages take their usual place again."""
        with self.mutex:
            if self.paging:
                self.paging = False
                for lane in self.lanes:
                    lane.sweeping -= 1
                    self.lanes.settle(lane)

    def page_due(self) -> bool:
        """A paging queue holds a blob's worth of new messages in its rear lists."""
        return self.paged >= self.page_bytes

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
