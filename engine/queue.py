"""A local queue: its attributes, its lanes, its lock and its waiters.

Locking follows CPython's ``queue.py``: one ``threading.Lock`` per queue (``mutex``);
waiting getters each wait on their own ``Condition`` bound to that lock, so that a new
message wakes exactly the waiter MQ would pick (SEMANTICS.md §3: one non-browse waiter,
a specific-match waiter before a general one). Every method whose name starts with an
underscore runs with ``mutex`` held by the caller.

Counters kept exact under the lock (the sweeper reads them):

* ``depth`` — every message on the queue, committed or not, in memory or swept
  (CurrentQDepth);
* ``Lane.ready`` / :attr:`ready` — committed, not-gotten messages in memory (y);
* ``obtained`` — destructive gets since the last :meth:`take_obtained` (x);
* ``mem_bytes`` — bytes of the records held in memory.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass, replace

from . import record
from .constants import (
    OO,
    DeliverySequence,
    IndexType,
    Persistence,
    Reason,
    Usage,
)
from .errors import MQError
from .lane import (
    AVAILABLE_BELOW,
    BATCHED,
    GOTTEN,
    HIDDEN,
    LANE_MASK,
    REMOVED,
    UNCOMMITTED,
    Lane,
    Node,
)
from .matching import Match
from .record import Identity
from .sweeping import SweepingMixin
from .swept import SWEPT_HIT

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
    """One getter blocked in a WAIT. ``match`` None means any message."""

    __slots__ = ("cond", "match")

    def __init__(self, cond: threading.Condition, match: Match | None):
        self.cond = cond
        self.match = match


_queue_ids = itertools.count(1)


class LocalQueue(SweepingMixin):
    """One local queue. Its lanes run from priority 9 to 0 in get order.

    ``ident`` turns records into MsgIds and tokens; ``tier`` (the manager's) gives the blob
    store and the read-ahead pool. Sweeping and unsweeping live in engine/sweeping.py.
    """

    def __init__(self, name: str, attrs: QueueAttributes, ident: Identity | None = None, tier=None):
        self.name = name
        self.id = next(_queue_ids)  # total order for taking several queue locks
        self.mutex = threading.Lock()
        self.lanes = [Lane(p) for p in range(10)]
        self.get_order = self.lanes[::-1]
        self.lane_mask = 0  # bit p: lane p may hold messages (see _find)
        self.depth = 0
        self.mem_bytes = 0
        self.obtained = 0
        self.expired = 0
        self.waiters: list[Waiter] = []
        self.open_input = 0
        self.open_output = 0
        self.open_exclusive = False
        self.open_handles = 0
        self.deleted = False
        self.batched = 0  # messages assigned to transmission batches
        self.batches: dict[int, list[Node]] = {}
        self.ident = ident or Identity(bytes(12))
        self.tier = tier
        self._init_sweeping()
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

    @property
    def ready(self) -> int:
        return sum(lane.ready for lane in self.lanes)

    @property
    def in_memory(self) -> int:
        return sum(lane.mem for lane in self.lanes)

    def info(self) -> QueueInfo:
        with self.mutex:
            return QueueInfo(
                name=self.name,
                attributes=self.attrs,
                current_depth=self.depth,
                in_memory=self.in_memory,
                ready=self.ready,
                swept=sum(lane.swept for lane in self.lanes),
                mem_bytes=self.mem_bytes,
                open_input_count=self.open_input,
                open_output_count=self.open_output,
            )

    def take_obtained(self) -> int:
        """Return the destructive gets counted since the last call, and reset (sweeper x)."""
        with self.mutex:
            n, self.obtained = self.obtained, 0
            return n

    # -- under the lock: placing and finding ---------------------------------------------

    def _insert(self, node: Node, lane: Lane) -> None:
        """Append ``node`` (state already set) after the last message of ``lane``.

        The list append is written out here rather than called: this is the put hot path.
        """
        head = lane.rear.head if (lane.chain or lane.sweeping) else lane.front.head
        last = head.prev
        node.prev = last
        node.next = head
        last.next = node
        head.prev = node
        lane.mem += 1
        self.lane_mask |= lane.bit
        self.depth += 1
        self.mem_bytes += len(node.rec)
        if node.state < AVAILABLE_BELOW:
            lane.ready += 1
            if self.waiters:
                self._wake_for(node)

    def _find(self, match: Match | None) -> Node | None:
        """The first available message in get order that ``match`` accepts.

        Each lane is front ⧺ chain ⧺ rear. Without a match, a lane whose front list has
        nothing available brings its chain back blob by blob (unsweep); with a match the
        chain is searched in place through its index, and nothing is brought back.

        ``lane_mask`` has bit p set for every lane p that may hold messages (set on insert,
        cleared here lazily once a lane is found empty), so a get skips empty priorities
        without looking at them.
        """
        mask = self.lane_mask
        lanes = self.lanes
        while mask:
            i = mask.bit_length() - 1
            mask ^= 1 << i
            lane = lanes[i]
            if lane.ready or lane.chain:
                head = lane.front.head
                n = head.next
                while n is not head:
                    if n.state < AVAILABLE_BELOW and (match is None or match(n.rec)):
                        return n
                    n = n.next
                if lane.chain:
                    # Without a match: unsweep until something is available (or the chain is
                    # empty, when the rear list has joined the front). With one: search in place.
                    hit = self._unsweep_for_get(lane) if match is None else self._search_chain(lane, match)
                    if hit is not None:
                        return hit
                head = lane.rear.head
                n = head.next
                while n is not head:
                    if n.state < AVAILABLE_BELOW and (match is None or match(n.rec)):
                        return n
                    n = n.next
            elif not lane.mem:
                self.lane_mask &= ~(1 << i)
        return None

    def _iter_in_order(self):
        """Every in-memory node in get order (for inspection and tests)."""
        for lane in self.get_order:
            yield from lane.in_memory()

    # -- under the lock: state changes ---------------------------------------------------

    def _remove(self, node: Node) -> None:
        """Take ``node`` off the queue for good (the get hot path: unlink written out)."""
        st = node.state
        if st & SWEPT_HIT:
            return self._remove_swept(node)
        lane = self.lanes[st & LANE_MASK]
        p = node.prev
        n = node.next
        p.next = n
        n.prev = p
        if not st & HIDDEN:
            lane.ready -= 1
        lane.mem -= 1
        self.depth -= 1
        self.mem_bytes -= len(node.rec)
        node.state = st | REMOVED
        if lane.chain and lane.ready < self.readahead_low:
            self._maybe_readahead(lane)

    def _hide(self, node: Node) -> None:
        """A get under syncpoint: the message stays in place, invisible, until commit/backout."""
        if node.state & SWEPT_HIT:
            return self._hide_swept(node)
        self.lanes[node.state & LANE_MASK].ready -= 1
        node.state |= GOTTEN

    def _restore(self, node: Node, backout: bool) -> None:
        """Backout of a get: the message reappears in its place, its backout count raised."""
        if node.state & SWEPT_HIT:
            return self._restore_swept(node, backout)
        if backout:
            node.rec = record.with_backout(node.rec, record.backout_of(node.rec) + 1)
        node.state &= ~GOTTEN
        self.lanes[node.state & LANE_MASK].ready += 1
        if self.waiters:
            self._wake_for(node)

    def _commit_put(self, node: Node) -> None:
        node.state &= ~UNCOMMITTED
        self.lanes[node.state & LANE_MASK].ready += 1
        if self.waiters:
            self._wake_for(node)

    # -- under the lock: transmission batches (seed 003: never swept) ---------------------

    def _assign_batch(self, batch_id: int, max_messages: int) -> list[Node]:
        """Assign up to ``max_messages`` available messages, in get order, to a batch.

        Batched messages stay in place but no get sees them and no sweep moves them; they
        count as obtained (a channel servicing the queue)."""
        taken: list[Node] = []
        while len(taken) < max_messages:
            node = self._find(None)
            if node is None:
                break
            node.state |= BATCHED
            taken.append(node)
        if taken:
            self.batches[batch_id] = taken
            self.batched += len(taken)
            self.obtained += len(taken)
        return taken

    def _end_batch(self, batch_id: int, confirmed: bool) -> None:
        """A confirmed batch leaves the queue; a released one becomes available again."""
        nodes = self.batches.pop(batch_id)
        self.batched -= len(nodes)
        for node in nodes:
            node.state &= ~BATCHED
            if confirmed:
                self._remove(node)
            elif self.waiters:
                self._wake_for(node)

    # -- under the lock: waiters ---------------------------------------------------------

    def _wake_for(self, node: Node) -> None:
        """A message became available: wake the one waiter MQ would choose for it.

        A waiter for a particular message that this one matches goes first; otherwise the
        longest-waiting general waiter. The woken waiter leaves the list, so the next new
        message wakes someone else; a waiter that finds nothing re-registers.
        """
        if node.state >= AVAILABLE_BELOW:
            return
        chosen = None
        for w in self.waiters:
            if w.match is not None and w.match(node.rec):
                chosen = w
                break
        if chosen is None:
            for w in self.waiters:
                if w.match is None:
                    chosen = w
                    break
        if chosen is not None:
            self.waiters.remove(chosen)
            chosen.cond.notify()

    def _wake_all(self) -> None:
        """Wake every waiter, so each re-checks the queue's state (inhibit, delete, close)."""
        for w in self.waiters:
            w.cond.notify()
        self.waiters.clear()
