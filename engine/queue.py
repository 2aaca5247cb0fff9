"""A local queue: its attributes, its lock, its waiters, its counters and its tier.

**The lock rule** (the one place it is written; every other docstring refers here, and with
lock checks on, engine/core/lock.py, every function it names checks it). Each queue has one
lock, ``mutex``. It protects everything of the queue that changes: the core (its lanes,
records, index and chains: engine/core/), the counters below, the waiters, the batches and
the group bookkeeping.

* **Who takes it**: this class's methods whose names do not end in ``_locked``, each around
  one step; the get path (engine/getpath.py) and the put path (engine/putpath.py), around
  one find-and-take or one placement; the browse and group calls (engine/browse.py,
  engine/groups/) around one find through the get path's
  :func:`~sweepq.engine.getpath.obtain_locked`; the tier (engine/tiering.py), once per blob
  a sweep links (:meth:`~sweepq.engine.tiering.QueueTier.link`: verify, link and detach in
  one hold) and to count an aborted sweep; two callers that must hold several queues' locks
  at once, always taken in queue-id order (so no two threads deadlock): a commit or backout
  (engine/uow.py), and the poison move (engine/poison.py); and, outside the engine, the
  sweep benchmark (bench/sweeping.py) reading a lane's records before it times a sweep.
  Nothing else takes it: the manager, a connection, dynamic queues, a channel's sync state
  and the checkpoint ask the queue.
* **Who needs it**: a function or method whose name ends in ``_locked``, and every method of
  the core (engine/core/lanes.py) but the three below, is called with the lock held and never
  takes it; with checks on, each asserts that the calling thread holds it (the core's public
  methods all do: tests/test_lock_rule.py holds that).
* **The core's three that run without it** (:data:`sweepq.engine.core.lanes.UNLOCKED`), all
  the sweep's, called by the tier between its holds so that a sweep of a long backlog never
  holds the lock for long: :meth:`LaneSet.sweep_runs` (the walk of the lists that chooses
  the runs, and the lengths of their records), :meth:`LaneSet.snapshot` (the copy of a
  chosen run's records, and its items' encodings) and :meth:`LaneSet.precheck_run` (the
  check of a run before the hold that moves it). They are safe because they only read, and
  what they read stays whole while a sweep runs: (1) a removed slot keeps its links, so a
  walk that holds one steps on to the live list; (2) while a sweep is in progress
  (:meth:`LaneSet.sweeping`) freed slots are not reused and the arena gives no block back,
  so a slot a walker holds cannot join another list under it and its record's bytes stay
  readable; (3) the slot arrays grow into new arrays, never in place. What they return is
  only a choice: :meth:`LaneSet.move_run` checks it again under the lock before anything
  moves (in O(1) when the core's count of changes has not moved since the precheck, else
  in full), and a slot emptied meanwhile reads as an empty record, which fails that check.
* **No lock is held across a blob read, a sync, a sweep's compression or write, or a
  wait** (a waiter waits on a Condition bound to the lock, which releases it). The only
  store I/O under the lock is a write that must be ordered with the change it records,
  never synced there: the journal's writes for persistent messages
  (engine/durable/journal.py), the sweep's link of a written blob into its chain
  (:meth:`~sweepq.engine.tiering.QueueTier.link`) and an unsweep's move of persistent
  records back to their own keys (:meth:`~sweepq.engine.tiering.QueueTier.unsweep_locked`),
  each one small atomic RocksDB write batch; and, only after the store found damage, the
  rewrite of what memory holds (engine/durable/rewrite.py, through
  :meth:`LocalQueue.durable_image`), so that no get deletes a record between its being
  read and written again.

Waiters: the calls blocked in a WAIT, and whom a new message wakes, are a collaborator of
the queue (:class:`~sweepq.engine.waiting.Waiters`, engine/waiting.py), run under this lock.

A message is named by a :class:`~sweepq.engine.core.ref.Ref` (in memory, or inside a swept
blob): what gets, units of work, batches and browse locks hold. Three collaborators hold a
job each: the tier (engine/tiering.py) sweeps, unsweeps and reads blobs; ``sweep``
(engine/queuesweep.py) is the queue's side of the sweeper and of the budget's paging;
``batches`` (engine/queuebatches.py) holds a channel's transmission batches.

Counters kept exact under the lock (the sweeper reads them through
:meth:`~sweepq.engine.queuesweep.QueueSweep.sweep_counts`):

* ``depth`` — every message on the queue, committed or not, in memory or swept
  (CurrentQDepth);
* ``Lane.ready`` — committed, not-gotten messages in memory (y);
* ``obtained`` — destructive gets since the last :meth:`LocalQueue.take_obtained` (x);
* ``puts`` — messages placed since the queue was made in this process, counted in the step
  that places them, so a get can never see a message before it is counted (what
  ``sweepq.Queue`` counts its unfinished tasks from);
* ``lanes.mem_bytes`` — bytes of the records held in memory.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Protocol

from sweepq.blobstore import BlobCorruptError
from sweepq.sweeper.clock import Clock, SystemClock

from . import checks
from .checks import MAX_NAME, check_name  # noqa: F401  (the queue-name rule, imported from here too)
from .constants import (
    OO,
    DeliverySequence,
    IndexType,
    MemoryPolicy,
    Persistence,
    Reason,
    Usage,
)
from .core.flags import AVAILABLE_BELOW, GOTTEN, UNCOMMITTED
from .core.found import Found
from .core.index import SlotIndex
from .core.lane import Lane, Need
from .core.lanes import LaneSet, add_item
from .core.lock import CHECKS, assert_held, new_lock
from .core.ref import Ref
from .durable.journal import Journal, StoreChanges
from .durable.layout import queue_prefix
from .errors import MQError
from .matching import Match
from .queuebatches import QueueBatches
from .queuesweep import QueueSweep
from .record import PERSISTENT, Identity, item_head, seq_of
from .tiering import QueueTier
from .waiting import Waiters

if TYPE_CHECKING:
    from array import array
    from collections.abc import Callable, Collection, Sequence

    import numpy as np

    from .core.swept import SweptBlob
    from .storage import Storage

# One lane of LocalQueue.durable_image: (priority, records, [(blob id, seq min, seq max, count, flags)]);
# the records are (their first bytes back to back, their count) when the image is asked for heads,
# None for a lane it was asked to skip.
DurableLane = tuple[int, "list[bytes] | tuple[bytes, int] | None", list[tuple[int, int, int, int, "np.ndarray"]]]

_PERSISTENT = PERSISTENT  # a record's flag (engine/record.py): take_head_locked's miss on a journaled queue


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


_queue_ids = itertools.count(1)

# The Match field that an index of each type answers (engine/matching.py).
_INDEX_FIELD = {
    IndexType.MSG_ID: "msg_id",
    IndexType.CORREL_ID: "correl_id",
    IndexType.GROUP_ID: "group_id",
    IndexType.MSG_TOKEN: "seq",
}


class Budget(Protocol):
    """What the put and get paths use of the memory budget a queue is under (``LocalQueue.budget``;
    engine/budget.py's :class:`~sweepq.engine.budget.MemoryBudget`, which sits above this module),
    no queue lock held: a put calls :meth:`before_put` while ``paging`` or when it holds more
    than ``room`` bytes; a ``get_many`` takes at most :meth:`batch_limit` messages at once."""

    @property
    def paging(self) -> bool: ...

    @property
    def room(self) -> int: ...

    def before_put(self, q: LocalQueue, size: int, count: int) -> None: ...

    def after_put(self, q: LocalQueue, nbytes: int) -> None: ...

    def after_get(self, q: LocalQueue) -> None: ...

    def batch_limit(self, q: LocalQueue, wanted: int) -> int: ...


class LocalQueue:
    """One local queue. Its lanes run from priority 9 to 0 in get order.

    ``ident`` turns records into MsgIds and tokens; ``storage`` (the manager's) gives the
    blob store and the read-ahead pool to the queue's tier. The sweeper drives the queue
    through ``sweep`` (engine/queuesweep.py, a sweeper.cycle.Sweepable). The lock rule is
    the module docstring's.
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
        self.mutex = new_lock()
        self.lanes = LaneSet(self.mutex)  # the queue core (engine/core/)
        self.lane_list = self.lanes.lanes  # by priority, for the hot paths
        self.depth = 0
        self.puts = 0  # messages placed since the queue was made here (MQ's MSGSIN): never reset
        self.obtained = 0
        self.expired = 0
        self.waiters = Waiters(self.mutex, self.clock)  # calls blocked in a WAIT (engine/waiting.py)
        self.open_input = 0
        self.open_output = 0
        self.open_exclusive = False
        self.open_handles = 0
        self.deleted = False
        self.batches = QueueBatches(self)  # transmission batches (engine/queuebatches.py)
        self.groups_started: dict = {}  # engine/groups/: groups a get has started to take
        self.temporary = False  # a temporary dynamic queue (engine/dynamic.py): no persistent puts
        self.keeps_items = False  # takes items (keep_items): sweepq.Queue's objects
        # The memory budget (engine/budget.py): the manager's, or None.
        self.budget: Budget | None = None
        self.checked_bytes = 0  # lanes.mem_bytes when the budget last counted
        self.item_weight = 0  # what the last item put weighed (sizes.item_bytes), under a budget
        self.ident = ident or Identity(bytes(12))
        self.tier = QueueTier(name, self.lanes, self.ident, storage, self.mutex)  # type: ignore[arg-type]
        self.tier.journal = journal
        self.tier.key_prefix = self.key_prefix
        self.cleanup = self.tier.cleanup  # the tier's owed store changes, tested on every get
        self.sweep = QueueSweep(self)  # the sweeper's and the budget's side (engine/queuesweep.py)
        with self.mutex:
            self.apply_locked(attrs)

    def must_hold(self, what: str) -> None:
        """With lock checks on (engine/core/lock.py): the calling thread holds this queue's
        lock, or AssertionError saying ``what`` needed it. The first line of every function
        the rule says needs the lock."""
        if CHECKS:
            assert_held(self.mutex, what)

    # -- attributes -------------------------------------------------------------------

    def apply_locked(self, attrs: QueueAttributes) -> None:
        """Install new attributes; hot fields are copied to plain attributes for the fast path.

        Lanes never move: switching the delivery sequence changes only where *new* messages
        go, so nothing queued is reordered (seed 000).
        """
        self.must_hold("applying attributes")
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
            self.lanes.set_index(None)
        elif idx is None or idx.kind != kind:
            self.lanes.set_index(SlotIndex(kind, self.ident))
        self.index_field = _INDEX_FIELD.get(kind)

    def alter(self, attrs: QueueAttributes) -> None:
        """ALTER: new attributes; inhibiting gets fails current waiters with 2016."""
        with self.mutex:
            self.apply_locked(attrs)
            if self.inhibit_get:
                self.waiters.wake_all_locked()

    def open_counted(self, opts: int, inp: int) -> None:
        """Count a new handle (MQOPEN): ``inp`` its input mode (0: none), ``opts`` its options.

        :raises MQError: UNKNOWN_OBJECT_NAME (2085) once deleted, OBJECT_IN_USE (2042) when
            the input mode conflicts with the handles open."""
        with self.mutex:
            if self.deleted:
                raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"queue {self.name!r} has been deleted")
            if inp and (self.open_exclusive or (inp == OO.INPUT_EXCLUSIVE and self.open_input)):
                raise MQError(
                    Reason.OBJECT_IN_USE,
                    f"queue {self.name!r} is open for input "
                    + ("exclusively by another handle" if self.open_exclusive else "by another handle")
                    + "; open it INPUT_SHARED, or close the other handle",
                )
            if inp:
                self.open_input += 1
                self.open_exclusive = inp == OO.INPUT_EXCLUSIVE
            if opts & OO.OUTPUT:
                self.open_output += 1
            self.open_handles += 1

    def close_counted(self, can_get: bool, can_put: bool, exclusive: bool, release: Callable[[], object]) -> None:
        """Count a handle closed (MQCLOSE); ``release()`` runs under the lock first (the
        handle's browse lock ends, engine/browse.py)."""
        with self.mutex:
            release()
            if can_get:
                self.open_input -= 1
                if exclusive:
                    self.open_exclusive = False
            if can_put:
                self.open_output -= 1
            self.open_handles -= 1

    def retire(self, purge: bool) -> list[bytes]:
        """DELETE: the queue is marked deleted (no open, put or sweep reaches it from here on)
        and the names of its chains are returned, for the caller to drop from the store
        without the lock (:meth:`unretire` if that fails).

        :raises MQError: OBJECT_IN_USE (2042) with open handles or uncommitted work,
            Q_NOT_EMPTY (2055) with messages and not ``purge``."""
        with self.mutex:
            if self.open_handles:
                raise MQError(
                    Reason.OBJECT_IN_USE,
                    f"queue {self.name!r} has {self.open_handles} open handle(s); close them first",
                )
            if self.lanes.any_hidden():
                raise MQError(
                    Reason.OBJECT_IN_USE, f"queue {self.name!r} has uncommitted work; commit or back it out first"
                )
            if self.depth and not purge:
                raise MQError(
                    Reason.Q_NOT_EMPTY,
                    f"queue {self.name!r} holds {self.depth} message(s); pass purge=True to discard them",
                )
            self.deleted = True
            return [self.tier.chain_name(lane) for lane in self.lanes if lane.chain]

    def unretire(self) -> None:
        """A delete that could not finish: the queue is back."""
        with self.mutex:
            self.deleted = False

    def retire_if_unused(self) -> bool:
        """A temporary dynamic queue's last handle closed (engine/dynamic.py): mark it deleted
        unless a handle is open again or it is gone already; say whether it was marked."""
        with self.mutex:
            if self.open_handles or self.deleted:
                return False
            self.deleted = True  # open_counted checks this under the lock: no new handle
            return True

    def wake_all(self) -> None:
        """Wake every waiter to look at the queue's state again (the manager's close)."""
        with self.mutex:
            self.waiters.wake_all_locked()

    @property
    def mem_bytes(self) -> int:
        return self.lanes.mem_bytes

    @property
    def in_memory(self) -> int:
        return sum(lane.mem for lane in self.lanes)

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
                in_memory=sum(lane.mem for lane in self.lanes),
                ready=sum(lane.ready for lane in self.lanes),
                swept=sum(lane.swept for lane in self.lanes),
                mem_bytes=self.lanes.mem_bytes,
                open_input_count=self.open_input,
                open_output_count=self.open_output,
            )

    def check(self) -> None:
        """Assert the queue's invariants (takes the lock; for tests, the model checks and
        debugging): the core's (:meth:`LaneSet.check`: lanes, records, index, chains), and
        ``depth`` = messages in memory + live messages in blobs, and the batch count.
        :raises AssertionError: naming the first one broken."""
        with self.mutex:
            self.lanes.check()
            held = sum(lane.mem + lane.swept for lane in self.lanes)
            assert self.depth == held, f"{self.name}: depth {self.depth} but {held} messages held"
            self.batches.check_locked()

    def take_obtained(self) -> int:
        """Return the destructive gets counted since the last call, and reset (sweeper x)."""
        with self.mutex:
            n, self.obtained = self.obtained, 0
            return n

    def has_uncommitted(self) -> bool:
        with self.mutex:
            return self.lanes.any_hidden()

    def durable_image(
        self, write: Callable[[list], object] | None = None, heads: int = 0, skip: Collection[int] = ()
    ) -> list[DurableLane]:
        """What a durable queue holds now, taken under the lock in one step: per lane,
        (priority, its persistent committed records in memory in order, and its chain's
        undamaged blobs as (blob id, lowest and highest arrival number, positions, a copy of
        their flags)). A checkpoint (engine/durable/ledger.py) encodes and writes it without
        the lock, and asks only for the records' first ``heads`` bytes (then a lane's records
        are those bytes back to back and their count: LaneSet.persistent), and not at all for
        the lanes in ``skip`` (their records are None: the checkpoint at open writes those
        lanes as the last one had them); the rewrite after damage
        (engine/durable/rewrite.py) passes ``write``, called with the image while the lock is
        still held (a store write the rule names)."""
        with self.mutex:
            image = [
                (
                    lane.priority,
                    None if lane.priority in skip else self.lanes.persistent(lane, heads),
                    [(b.blob_id, b.seq_min, b.seq_max, b.count, b.flags.copy()) for b in lane.chain if not b.damaged],
                )
                for lane in self.lanes
            ]
            if write is not None:
                write(image)
            return image

    def load_lane(self, lane: Lane, front: Sequence[bytes], blobs: Sequence[SweptBlob], rear: Sequence[bytes]) -> None:
        """Recovery's rebuilt lane (engine/durable/recovery.py): ``front`` records, the chain
        of ``blobs``, ``rear`` records; the lane must be empty."""
        with self.mutex:
            self.lanes.load(lane, front, blobs, rear)
            self.depth += len(front) + len(rear) + sum(blob.live for blob in blobs)

    # -- under the lock: placing and finding ---------------------------------------------

    def insert_locked(
        self, recs: Sequence[bytes], lane_i: int, state: int, refs: bool = False, items: Sequence | None = None
    ) -> list[Ref] | None:
        """Append ``recs`` after the last message of lane ``lane_i`` with ``state`` (the lane
        index and UNCOMMITTED or not); return their refs when ``refs`` (a unit of work holds
        them). ``items``: their payloads, kept as objects (:meth:`keep_items`); ``recs`` may be
        engine/record.py ``PlainRecords``, written from their fields (LaneSet.add). Waiters are
        woken for the ones that are available at once. The caller checked MAXDEPTH and wrote
        the journal."""
        if CHECKS:  # the check only when checks are on: interpreted, a call per get or put costs
            self.must_hold("placing messages")
        out = self.lanes.add(self.lane_list[lane_i], recs, state, refs, items)
        self.depth += len(recs)
        self.puts += len(recs)
        if self.waiters.waiting and state < AVAILABLE_BELOW:
            for rec in recs:
                if not self.waiters.waiting:
                    break
                self.waiters.wake_for_locked(rec)
        return out

    def insert_one_locked(self, rec: bytes, lane_i: int) -> None:
        """:meth:`insert_locked` of one record, available at once, no refs kept (a put with
        nothing but its data: engine/putpath.py ``put``)."""
        if CHECKS:  # the check only when checks are on: interpreted, a call per put costs
            self.must_hold("placing a message")
        self.lanes.append(self.lane_list[lane_i], -1, rec, lane_i, 0, 0)
        self.depth += 1
        self.puts += 1
        if self.waiters.waiting:
            self.waiters.wake_for_locked(rec)

    def insert_item_locked(self, seq: int, put_us: int, priority: int, lane_i: int, item: object) -> int:
        """:meth:`insert_locked` of one item (``sweepq.Queue``'s put in memory:
        engine/putpath.py ``put_item``), its record made of ``seq``, ``put_us`` and ``priority``
        (engine/record.py ``item_head``) in the core (engine/core/lanes.py ``add_item``), available at once, no
        refs kept. Returns 0."""
        if CHECKS:  # the check only when checks are on: compiled or not, a call per put costs
            self.must_hold("placing an item")
        add_item(self.lanes, self.lane_list[lane_i], lane_i, seq, put_us, priority, item)
        self.depth += 1
        self.puts += 1
        if self.waiters.waiting:  # the record as bytes only for a waiter's match
            self.waiters.wake_for_locked(item_head(seq, put_us, priority))
        return 0

    def take_head_locked(self, miss: object, record: bool = False) -> object:
        """The first message in get order taken for good, when a get takes it without more
        (LaneSet.head says which), returned as its record (``record``: a message that is not
        an item) or as its item (an item in memory); else ``miss``, nothing changed. A
        persistent message of a queue with a journal is a miss (its removal is written: the
        whole get takes it); a message that is not persistent has nothing to write."""
        if CHECKS:  # the check only when checks are on: interpreted, a call per get costs
            self.must_hold("taking the head")
        out = self.lanes.head(miss, record, _PERSISTENT if self.journal is not None else 0)
        if out is not miss:
            self.depth -= 1
            self.obtained += 1
        return out

    def item_locked(self, ref: Ref) -> object:
        """The item of the in-memory message ``ref`` names (its record has HAS_ITEM)."""
        return self.lanes.item(ref)

    def keep_items(self, encode: Callable[[object], bytes]) -> None:
        """The queue takes items (engine/core/lanes.py, "Items"); ``encode`` turns one into
        the bytes a sweep writes to its blob (the tier hands it to the core with each run it
        snapshots)."""
        with self.mutex:
            self.tier.encode = encode
            self.keeps_items = True

    def find_locked(self, match: Match | None = None) -> Ref | Need | None:
        """The first available message in get order that ``match`` accepts (None: any).

        Each lane is front ⧺ chain ⧺ rear. Without a match, a lane whose front list has
        nothing available brings its chain back blob by blob (unsweep); with a match the
        chain is searched in place through its index, and nothing is brought back. Either
        may need a blob that is not in memory yet: then a :class:`Need` comes back, and the
        caller reads it without the lock and calls again."""
        if CHECKS:  # the check only when checks are on: interpreted, a call per get or put costs
            self.must_hold("finding a message")
        ls = self.lanes
        if match is None:
            ref = ls.head()  # the get hot path: the first message of the highest lane's front list
            if ref is not None:
                return ref  # type: ignore[return-value]  # head() without a miss gives a Ref or None
        elif ls.index is not None:
            value = getattr(match, self.index_field)  # type: ignore[arg-type]  # set with lanes.index
            if value is not None:
                return self._find_indexed_locked(match, value)
        return ls.find(match, self.tier.front_locked)

    def _find_indexed_locked(self, match: Match, value: object) -> Ref | Need | None:
        """:meth:`find_locked` for a match on the indexed field: the in-memory candidates come
        from the index (O(messages with that value)), swept ones from the chain's summaries.

        Get order is kept: lanes from the highest; in a lane the front list, then the chain,
        then the rear list, each in arrival order (a message's ``seq`` is its arrival number,
        and the front list's are below the chain's, the rear list's above)."""
        ls = self.lanes
        top, found = ls.first_indexed(value, match)
        lanes = ls.lanes
        for p in range(len(lanes) - 1, top, -1):  # higher lanes: only their chains may match
            if lanes[p].chain:
                hit = ls.search_chain(lanes[p], match)
                if hit is not None:
                    return hit
        if top < 0:
            return None
        lane = lanes[top]
        if lane.chain and seq_of(ls.record(found[0])) > lane.chain[0].seq_min:
            # The first candidate is behind the chain (rear list): the chain comes first.
            hit = ls.search_chain(lane, match)
            if hit is not None:
                return hit
        return found[0]

    def find_run_locked(self, limit: int) -> Ref | Found | Need | None:
        """:meth:`find_locked` for a batch get: the first available message and, when it is
        in memory, the available messages that follow it in its list (at most ``limit``), as
        one :class:`~sweepq.engine.core.found.Found` run that a batch takes at once."""
        ref = self.find_locked(None)
        if not isinstance(ref, Ref) or ref.swept or limit == 1:
            return ref
        run = self.lanes.run_from(ref, limit)
        if len(run) == 1:
            return ref
        return Found(run, [self.lanes.record(r) for r in run], run=True)

    def record_locked(self, ref: Ref) -> bytes:
        """The record of the message ``ref`` names."""
        return self.lanes.record(ref)

    # -- under the lock: state changes ---------------------------------------------------

    def remove_locked(self, ref: Ref, durable: bool = True) -> None:
        """Take a message off the queue for good. A persistent message's record goes first
        (``durable``; False: the caller wrote it already, e.g. in a commit's one write).

        :raises MQError: RESOURCE_PROBLEM (2102) when that write fails; nothing changed."""
        if CHECKS:  # the check only when checks are on: interpreted, a call per get or put costs
            self.must_hold("removing a message")
        if durable and self.journal is not None:
            self.journal.remove_one(self, ref)
        lane = self.lanes.take(ref)
        if lane is None:
            return  # its blob was found damaged: counted out then
        self.depth -= 1
        emptied = self.lanes.take_emptied()
        if emptied:
            self.tier.unlink_emptied_locked(emptied)  # the last message of a blob left it
        if lane.chain and lane.ready + lane.ahead < self.tier.readahead_low:
            self.tier.readahead_locked(lane)

    def hide_locked(self, ref: Ref) -> None:
        """A get under syncpoint: the message stays in place, invisible, until commit/backout."""
        self.must_hold("hiding a message")
        self.lanes.mark(ref, GOTTEN)

    def remove_run_locked(self, refs: list[Ref]) -> None:
        """:meth:`remove_locked` of a run of available messages of one lane's list, in bulk (a
        batch get; the caller wrote the journal)."""
        self.must_hold("removing a run")
        lane = self.lanes.take(refs)
        assert lane is not None  # a run is in memory
        self.depth -= len(refs)
        if lane.chain and lane.ready + lane.ahead < self.tier.readahead_low:
            self.tier.readahead_locked(lane)

    def take_run_locked(self, limit: int) -> tuple[bytearray, array, list | None, Lane] | None:
        """A batch get's hot path: take the available messages at the head of the highest
        lane's front list for good, at most ``limit`` of them, none with an expiry, as
        LaneSet.take of a limit returns them; None when the head holds none (the caller finds
        them the whole way). The caller checked that nothing is written of a take (no journal)."""
        self.must_hold("taking a run")
        got: tuple[bytearray, array, list | None, Lane] | None = self.lanes.take(limit)  # type: ignore[assignment]  # a limit's answer
        if got is not None:
            k = len(got[1])
            self.depth -= k
            self.obtained += k
            lane = got[3]
            if lane.chain and lane.ready + lane.ahead < self.tier.readahead_low:
                self.tier.readahead_locked(lane)
        return got

    def hide_run_locked(self, refs: list[Ref]) -> None:
        """:meth:`hide_locked` of a run of available messages of one lane's list."""
        self.must_hold("hiding a run")
        self.lanes.mark(refs, GOTTEN)

    def restore_locked(self, ref: Ref, backout: bool, batch: StoreChanges | None = None) -> None:
        """Backout of a get: the message reappears in its place, its backout count raised.
        With ``batch``, the change that hardens a persistent message's new count is added
        to it (the caller writes it)."""
        self.must_hold("restoring a message")
        rec, in_memory = self.lanes.restore(ref, backout)
        if backout and batch is not None:
            Journal.add_backout(batch, self, ref, rec)
        if not in_memory:
            self.waiters.wake_all_locked()  # back in the chain: let every waiter look again
        elif self.waiters.waiting:
            self.waiters.wake_for_locked(rec)

    def commit_put_locked(self, ref: Ref) -> None:
        self.must_hold("committing a put")
        rec = self.lanes.unmark(ref, UNCOMMITTED)
        if self.waiters.waiting:
            self.waiters.wake_for_locked(rec)

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

    def after_get(self) -> None:
        """Store cleanups owed by the last change (blobs that came back or emptied), run
        without the lock; they never fail the caller."""
        if self.tier.cleanup:
            self.tier.run_cleanup()
