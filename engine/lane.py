"""The lane: one priority level of one queue, with the TPF structure of seed 003.

::

    front list  <->  chain of swept blobs  <->  rear list
    (in memory)       (blob store, by id)       (in memory)

The lane's order is front ⧺ chain ⧺ rear, each part in arrival order (DESIGN.md "One
queue"). This module holds the list mechanics only; *which* messages a get may take and
*when* to sweep live elsewhere.

Invariants kept here:

* ``Node.state`` holds the node's lane index and the reasons it is not available; a node
  with no flag set (state < 16) is committed, not gotten, unlocked, unbatched: available.
* ``Lane.ready`` counts the in-memory nodes whose state has neither UNCOMMITTED nor
  GOTTEN (committed, not-gotten: what the sweeper counts as y).
* While the chain is empty and no sweep is in progress, new nodes go to the front list and
  the rear list is empty; otherwise new nodes go to the rear list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

# Node.state = (flags << 4) | lane index. The lane index (0..9) lets a node be unlinked and
# counted without a fifth slot; every common state stays below 256, so it is a cached small
# int and a state change allocates nothing. A node is available to a get iff state < 16.
LANE_MASK = 0x0F
UNCOMMITTED = 0x10  # put inside a unit of work not yet committed: invisible
GOTTEN = 0x20  # got inside a unit of work not yet committed: invisible, restored on backout
LOCKED = 0x40  # locked by a browse handle: invisible to other handles
BATCHED = 0x80  # assigned to a transmission batch: not gettable, never swept
REMOVED = 0x100  # unlinked from its lane for good
HIDDEN = UNCOMMITTED | GOTTEN  # not counted in Lane.ready
AVAILABLE_BELOW = 0x10


class Node:
    """One message in memory: four slots, so the overhead stays within budget.

    ``rec`` is the immutable message record (engine/record.py); ``state`` is the flags above
    with the lane index in the low four bits.
    """

    __slots__ = ("next", "prev", "rec", "state")

    # No __init__: ``Node()`` then two attribute stores is several times cheaper than a
    # Python-level constructor, and a node is created on every put. prev / next are set
    # when the node is linked (a sentinel links to itself); see :func:`new_node`.


def new_node(rec: bytes, state: int) -> Node:
    n = Node()
    n.rec = rec
    n.state = state
    return n


class MsgList:
    """A circular doubly-linked list with a sentinel: O(1) append, unlink and splice.

    It keeps no count: counts live on the lane, so that unlinking a node needs no list.
    An unlinked node keeps its own ``prev`` / ``next``: a sweep walk that still holds it
    steps on to the live list from there. Nodes are never relinked.
    """

    __slots__ = ("head",)

    def __init__(self) -> None:
        head = self.head = new_node(b"", 0)
        head.prev = head.next = head

    def append(self, node: Node) -> None:
        head = self.head
        last = head.prev
        node.prev = last
        node.next = head
        last.next = node
        head.prev = node

    def extend_from(self, other: MsgList) -> None:
        """Move every node of ``other`` to the end of this list, in order, in O(1)."""
        oh = other.head
        first = oh.next
        if first is oh:
            return
        last = oh.prev
        head = self.head
        tail = head.prev
        tail.next = first
        first.prev = tail
        last.next = head
        head.prev = last
        oh.next = oh.prev = oh

    def __iter__(self) -> Iterator[Node]:
        head = self.head
        n = head.next
        while n is not head:
            nxt = n.next  # read first: the caller may unlink n
            yield n
            n = nxt


class Lane:
    """One priority level of a queue: front list, chain of swept blobs, rear list.

    ``chain`` holds the lane's swept blobs in order; ``sweeping`` is true while a sweep of
    the lane is in progress. Either sends new messages to the rear list.
    """

    __slots__ = ("bit", "chain", "front", "mem", "priority", "ready", "rear", "sweeping", "swept")

    def __init__(self, priority: int):
        self.priority = priority
        self.bit = 1 << priority
        self.front = MsgList()
        self.rear = MsgList()
        self.chain: deque = deque()  # SweptBlob objects (engine/swept.py), in lane order
        self.sweeping = False
        self.ready = 0  # committed, not-gotten nodes in memory
        self.mem = 0  # all nodes in memory (front + rear)
        self.swept = 0  # messages in the chain not yet removed

    def append(self, node: Node) -> None:
        if self.chain or self.sweeping:
            self.rear.append(node)
        else:
            self.front.append(node)
        self.mem += 1

    def in_memory(self) -> Iterator[Node]:
        """Nodes in memory in lane order (front, then rear; the chain lies between)."""
        yield from self.front
        yield from self.rear

    def settle(self) -> None:
        """Once the chain is empty and no sweep runs, the rear joins the front (invariant 1)."""
        if not self.chain and not self.sweeping:
            self.front.extend_from(self.rear)
