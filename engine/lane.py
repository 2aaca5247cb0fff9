"""The lanes of one queue: index-linked doubly-linked lists in flat arrays (seed 003's shape).

::

    front list  <->  chain of swept blobs  <->  rear list      (one lane per priority)
    (in memory)       (blob store, by id)       (in memory)

A lane's order is front ⧺ chain ⧺ rear, each part in arrival order (docs/design.md "One queue").
Every in-memory message of a queue lives in one *slot* of a :class:`LaneSet`:

* ``recs[slot]`` — the immutable record (engine/record.py), or None for a free slot;
* ``nxt[slot]`` / ``prv[slot]`` — the links (``array('i')``);
* ``st[slot]`` — the lane index in the low four bits and the flags below (``array('H')``).

So a queued message is one ``bytes`` (never tracked by the garbage collector) and 18 bytes of
arrays: a backlog of millions costs no collection pauses, and a blob that comes back is
spliced in bulk. Slots 0..19 are the sentinels of the 20 circular lists (lane p: front 2p,
rear 2p+1). A free *stack* of slots is reused last-in first-out.

**This module is the only writer of links, states and records.** Everything else calls the
methods of :class:`LaneSet`; as with the ``_put`` / ``_get`` hooks of CPython's
``queue.py``, every method is *only called with the owning queue's mutex held*, except
where its docstring says otherwise. Reading the arrays is allowed anywhere under the lock.

Walking without the lock: the sweeper chooses its runs by walking the lists without the
queue's lock (engine/tiering.py). That is safe because (1) a removed slot keeps its
``nxt`` / ``prv``, so a walk that holds one steps on to the live list, and (2) while any
sweep is in progress (:meth:`LaneSet.defer_frees`) freed slots are not reused, so a slot a
walker holds cannot join another list under it. Every choice such a walk makes is verified
again under the lock before anything moves.

Invariants kept here:

* a slot is available to a get iff ``st[slot] < AVAILABLE_BELOW`` (no flag set);
* ``Lane.ready`` counts the lane's in-memory messages with neither UNCOMMITTED nor GOTTEN
  (committed, not gotten: the sweeper's y); ``Lane.mem`` counts all of them;
* ``LaneSet.mem_bytes`` is the bytes of the records in memory;
* while a lane's chain is empty and no sweep is in progress, new messages go to the front
  list and the rear list is empty; otherwise they go to the rear list (docs/design.md 1 and 2).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .index import SlotIndex

LANE_MASK = 0x0F
UNCOMMITTED = 0x10  # put inside a unit of work not yet committed: invisible
GOTTEN = 0x20  # got inside a unit of work not yet committed: invisible, restored on backout
LOCKED = 0x40  # locked by a browse handle: invisible to other handles, never swept
BATCHED = 0x80  # assigned to a transmission batch: not gettable, never swept
REMOVED = 0x100  # taken off its lane for good (the slot is free or about to be)
HIDDEN = UNCOMMITTED | GOTTEN  # not counted in Lane.ready
AVAILABLE_BELOW = 0x10

N_LANES = 10
_SENTINELS = 2 * N_LANES
_INITIAL = 256  # slots, sentinels included
_SHRINK_ABOVE = 1 << 16  # an emptied queue gives back arrays larger than this


class Lane:
    """One priority level: its counters, its chain of swept blobs and its list sentinels.

    ``front`` and ``rear`` are the sentinel slots of its two lists. ``chain`` holds the
    lane's swept blobs (engine/swept.py) in order; ``sweeping`` counts the reasons new
    messages go to the rear list although the chain may be empty: a sweep of the queue in
    progress (one at a time), and the queue paging under its memory budget
    (engine/budget.py). A chain, or a non-zero ``sweeping``, sends new messages to the rear.
    """

    __slots__ = ("ahead", "back", "bit", "chain", "front", "mem", "priority", "ready", "rear", "sweeping", "swept")

    def __init__(self, priority: int):
        self.priority = priority
        self.bit = 1 << priority
        self.front = 2 * priority
        self.rear = 2 * priority + 1
        self.chain: deque = deque()
        self.sweeping = 0
        self.ready = 0
        self.mem = 0
        self.swept = 0  # messages in the chain not yet removed
        self.ahead = 0  # messages in the leading blobs whose read has started (read-ahead)
        self.back = 0  # messages in memory that came back from a blob (the adaptive rule's)


class LaneSet:
    """Every in-memory message of one queue, in ten lanes (priority 0..9).

    See the module docstring for the layout and the locking rule; each method below is
    called with the queue's mutex held unless it says otherwise.
    """

    __slots__ = (
        "_defer",
        "back",
        "deferred",
        "free",
        "index",
        "lanes",
        "mask",
        "mem_bytes",
        "nxt",
        "prv",
        "recs",
        "st",
    )

    def __init__(self) -> None:
        self.lanes = [Lane(p) for p in range(N_LANES)]
        # engine/index.py SlotIndex when the queue has an index type: every slot placed,
        # freed or renumbered here goes through it, so it stays exact.
        self.index: SlotIndex | None = None
        self.mask = 0  # bit p: lane p may hold messages (set by append, cleared by its readers)
        self.mem_bytes = 0
        self._defer = 0
        self.deferred = array("i")
        self._reset()

    def _reset(self, n: int = _INITIAL) -> None:
        # Typed as a live slot's record, which is what every reader indexes (a free slot holds
        # None, invariant above): the few stores of None say so where they are made.
        self.recs: list[bytes] = [None] * n  # type: ignore[list-item]
        self.nxt = array("i", range(n))  # each sentinel links to itself: an empty list
        self.prv = array("i", range(n))
        self.st = array("H", bytes(2 * n))
        self.back = bytearray(n)  # 1: the message came back from a blob (Lane.back counts them)
        self.free = array("i", range(n - 1, _SENTINELS - 1, -1))  # pops the lowest slot first

    def __getitem__(self, priority: int) -> Lane:
        return self.lanes[priority]

    def __iter__(self) -> Iterator[Lane]:
        return iter(self.lanes)

    @property
    def capacity(self) -> int:
        return len(self.recs)

    def _grow(self, need: int = 1) -> None:
        """At least ``need`` more free slots: the arrays double (amortised O(1) a slot)."""
        old = len(self.recs)
        add = max(old, need)
        self.recs.extend([None] * add)  # type: ignore[list-item]
        self.nxt.extend(range(old, old + add))
        self.prv.extend(range(old, old + add))
        self.st.frombytes(bytes(2 * add))  # extend(bytes) would add one element per byte
        self.back.extend(bytes(add))
        self.free.extend(range(old + add - 1, old - 1, -1))

    # -- one message --------------------------------------------------------------------------

    def append(self, lane: Lane, rec: bytes, state: int) -> int:
        """Put ``rec`` after the last message of ``lane`` (front or rear list, invariant 1/2)
        with ``state`` (lane index and flags); return its slot. The put hot path."""
        free = self.free
        if not free:
            self._grow()
        i = free.pop()
        self.recs[i] = rec
        self.st[i] = state
        if self.index is not None:
            self.index.add(i, rec)
        s = lane.rear if (lane.chain or lane.sweeping) else lane.front
        prv = self.prv
        last = prv[s]
        prv[i] = last
        self.nxt[i] = s
        self.nxt[last] = i
        prv[s] = i
        lane.mem += 1
        self.mask |= lane.bit
        self.mem_bytes += len(rec)
        if not state & HIDDEN:
            lane.ready += 1
        return i

    def remove(self, i: int) -> Lane:
        """Take slot ``i`` off its lane for good and free it; return its lane. The get hot path.

        The slot keeps its links (a walker holding it steps on); it is reused only once no
        sweep is in progress."""
        st = self.st
        s = st[i]
        assert not s & REMOVED, f"slot {i} removed twice"
        lane = self.lanes[s & LANE_MASK]
        p = self.prv[i]
        n = self.nxt[i]
        self.nxt[p] = n
        self.prv[n] = p
        if not s & HIDDEN:
            lane.ready -= 1
        lane.mem -= 1
        if lane.back and self.back[i]:
            self.back[i] = 0
            lane.back -= 1
        recs = self.recs
        self.mem_bytes -= len(recs[i])
        if self.index is not None:
            self.index.discard(i, recs[i])
        recs[i] = None  # type: ignore[call-overload]
        st[i] = s | REMOVED
        if self._defer:
            self.deferred.append(i)
        else:
            self.free.append(i)
        return lane

    def hide(self, i: int) -> None:
        """A get under syncpoint: the message keeps its place, invisible, until commit/backout."""
        assert not self.st[i] & (GOTTEN | UNCOMMITTED | REMOVED), f"slot {i} hidden but not available"
        self.st[i] |= GOTTEN
        self.lanes[self.st[i] & LANE_MASK].ready -= 1

    def restore(self, i: int, rec: bytes | None = None) -> None:
        """Undo :meth:`hide` in place; ``rec`` replaces the record (a raised backout count).
        A browse lock its holder's get ended (engine/browse.py) does not come back."""
        assert self.st[i] & GOTTEN and not self.st[i] & REMOVED, f"slot {i} restored but not hidden"
        if rec is not None:
            self.mem_bytes += len(rec) - len(self.recs[i])
            self.recs[i] = rec
        self.st[i] &= ~(GOTTEN | LOCKED)
        self.lanes[self.st[i] & LANE_MASK].ready += 1

    def commit_put(self, i: int) -> None:
        """A put under syncpoint is committed: it becomes visible where it stands."""
        assert self.st[i] & UNCOMMITTED, f"slot {i} committed but not uncommitted"
        self.st[i] &= ~UNCOMMITTED
        self.lanes[self.st[i] & LANE_MASK].ready += 1

    def set_flags(self, i: int, flags: int) -> None:
        """Set LOCKED or BATCHED (they do not change the counters)."""
        self.st[i] |= flags

    def clear_flags(self, i: int, flags: int) -> None:
        self.st[i] &= ~flags

    # -- runs and blobs ---------------------------------------------------------------------

    def defer_frees(self) -> None:
        """A sweep begins: freed slots are held back until :meth:`release_frees` (see module doc)."""
        self._defer += 1

    def release_frees(self) -> None:
        """A sweep ended: the slots freed meanwhile become reusable."""
        self._defer -= 1
        if not self._defer and self.deferred:
            self.free.extend(self.deferred)
            self.deferred = array("i")

    def shrink(self) -> bool:
        """Give back the arrays of a queue whose backlog left memory (drained, or swept: the
        point of sweeping is to return that memory). The sweeper calls this once an interval.

        The messages still in memory move to a fresh, smaller set of arrays, in order, so
        their slot numbers change: it runs only when no slot is referenced outside the lanes,
        that is with no sweep in progress and no message hidden (a unit of work holds it),
        batched or locked, and only when the arrays are over 8 times what is in memory."""
        count = self.count
        cap = len(self.recs)
        if self._defer or cap <= _SHRINK_ABOVE or count * 8 > cap:
            return False
        if any(lane.mem != lane.ready for lane in self.lanes):
            return False  # hidden messages: a unit of work holds their slots
        st = self.st
        old = [(i, st[i]) for lane in self.lanes for s in (lane.front, lane.rear) for i in self.walk(s)]
        if any(flags & (BATCHED | LOCKED) for _, flags in old):
            return False  # a batch or a browse lock holds these slot numbers
        recs, back = self.recs, self.back
        order = [(lane, s, list(self.walk(s))) for lane in self.lanes for s in (lane.front, lane.rear)]
        self._reset(max(_INITIAL, 1 << (2 * count + _SENTINELS).bit_length()))
        j = _SENTINELS
        for _lane, s, slots in order:
            prev = s
            for i in slots:
                self.recs[j] = recs[i]
                self.st[j] = st[i]
                self.back[j] = back[i]
                self.prv[j] = prev
                self.nxt[prev] = j
                prev = j
                j += 1
            self.nxt[prev] = s
            self.prv[s] = prev
        del self.free[len(self.free) - (j - _SENTINELS) :]  # the lowest slots are taken now
        if self.index is not None:  # the slots were renumbered
            self.index.clear()
            self.index.add_many(range(_SENTINELS, j), self.recs[_SENTINELS:j])
        return True

    @property
    def count(self) -> int:
        """Messages in memory (the sum of the lanes' ``mem``)."""
        return sum(lane.mem for lane in self.lanes)

    def detach_run(self, lane: Lane, slots: Sequence[int], nbytes: int) -> int:
        """Take a contiguous run of available messages off ``lane`` (they went into a blob, or
        a batch get took them).

        ``slots`` are in list order and were verified by the caller; ``nbytes`` is the sum of
        their record lengths. Returns how many of them had come back from a blob."""
        assert slots and nbytes >= 0, "an empty run"
        again = 0
        if lane.back:
            back = self.back
            for i in slots:
                if back[i]:
                    back[i] = 0
                    again += 1
            lane.back -= again
        nxt, prv = self.nxt, self.prv
        p = prv[slots[0]]
        n = nxt[slots[-1]]
        nxt[p] = n
        prv[n] = p
        idx = np.asarray(slots, np.int64)
        np.frombuffer(self.st, np.uint16)[idx] |= REMOVED
        recs = self.recs
        if self.index is not None:
            for i in slots:
                self.index.discard(i, recs[i])
        for i in slots:
            recs[i] = None  # type: ignore[call-overload]
        if self._defer:
            self.deferred.extend(slots)
        else:
            self.free.extend(slots)
        k = len(slots)
        lane.mem -= k
        lane.ready -= k
        self.mem_bytes -= nbytes
        return again

    def splice_front(self, lane: Lane, records: Sequence[bytes], gotten: Sequence[int] = (), nbytes: int = -1) -> array:
        """Append ``records`` (a blob coming back) to the end of ``lane``'s front list, in bulk.

        ``gotten`` are positions in ``records`` whose message a unit of work holds: they come
        back hidden (GOTTEN). ``nbytes`` is their total length when the caller knows it.
        Returns the new slots, in order."""
        slots = self._link_many(lane, lane.front, records, lane.priority, gotten, nbytes)
        if slots:
            np.frombuffer(self.back, np.uint8)[np.frombuffer(slots, np.int32)] = 1  # they came back
        lane.back += len(slots)
        return slots

    def extend(self, lane: Lane, records: Sequence[bytes], state: int) -> array:
        """:meth:`append` of many records with one state (a batch put), in bulk; returns the slots."""
        s = lane.rear if (lane.chain or lane.sweeping) else lane.front
        return self._link_many(lane, s, records, state, ())

    def _link_many(
        self, lane: Lane, sentinel: int, records: Sequence[bytes], state: int, gotten, nbytes: int = -1
    ) -> array:
        k = len(records)
        if not k:
            return array("i")
        free = self.free
        if len(free) < k:
            self._grow(k - len(free))
        slots = free[len(free) - k :]
        del free[len(free) - k :]
        first_slot, last_slot = slots[0], slots[-1]
        s = np.frombuffer(slots, np.int32)
        # Slots freed by a drain come back as ascending runs: then slices do the work.
        run = last_slot - first_slot == k - 1 and bool((np.diff(s) == 1).all())
        if run:
            end = last_slot + 1
            self.nxt[first_slot:last_slot] = array("i", range(first_slot + 1, end))
            self.prv[first_slot + 1 : end] = array("i", range(first_slot, last_slot))
            self.st[first_slot:end] = array("H", [state]) * k
            if len(gotten):
                stv = np.frombuffer(self.st, np.uint16)
                stv[first_slot + np.asarray(gotten, np.int64)] |= GOTTEN
                del stv
            del s
            self.recs[first_slot:end] = records
        else:
            nxtv = np.frombuffer(self.nxt, np.int32)
            prvv = np.frombuffer(self.prv, np.int32)
            nxtv[s[:-1]] = s[1:]
            prvv[s[1:]] = s[:-1]
            stv = np.frombuffer(self.st, np.uint16)
            stv[s] = state
            if len(gotten):
                stv[s[np.asarray(gotten, np.int64)]] |= GOTTEN
            del s, nxtv, prvv, stv  # release the buffers: the arrays may grow again later
            list(map(self.recs.__setitem__, slots, records))  # the records, in one C-level loop
        last = self.prv[sentinel]
        self.prv[first_slot] = last
        self.nxt[last] = first_slot
        self.nxt[last_slot] = sentinel
        self.prv[sentinel] = last_slot
        lane.mem += k
        if not state & HIDDEN:
            lane.ready += k - len(gotten)
        self.mask |= lane.bit
        if self.index is not None:
            self.index.add_many(slots, records)
        self.mem_bytes += nbytes if nbytes >= 0 else sum(map(len, records))
        return slots

    def available_run(self, i: int, limit: int) -> list[int]:
        """Slot ``i`` and the available slots that follow it in its list, at most ``limit``
        (a contiguous run that a batch get takes at once). ``i`` must be available."""
        nxt, st = self.nxt, self.st
        run = [i]
        j = nxt[i]
        while len(run) < limit and j >= _SENTINELS and st[j] < AVAILABLE_BELOW:
            run.append(j)
            j = nxt[j]
        return run

    def hide_run(self, lane: Lane, slots: Sequence[int]) -> None:
        """:meth:`hide` of a run of available slots of ``lane`` (a batch get under syncpoint)."""
        st = self.st
        for i in slots:
            st[i] |= GOTTEN
        lane.ready -= len(slots)

    def settle(self, lane: Lane) -> None:
        """Once the chain is empty and nothing sends messages to the rear (no sweep runs, the
        queue does not page), the rear list joins the front (invariant 1)."""
        if lane.chain or lane.sweeping:
            return
        nxt, prv = self.nxt, self.prv
        r = lane.rear
        first = nxt[r]
        if first == r:
            return
        last = prv[r]
        f = lane.front
        tail = prv[f]
        nxt[tail] = first
        prv[first] = tail
        nxt[last] = f
        prv[f] = last
        nxt[r] = prv[r] = r

    # -- reading ------------------------------------------------------------------------------

    def walk(self, sentinel: int) -> Iterator[int]:
        """The slots of one list in order (under the lock, or a sweep's lock-free walk)."""
        nxt = self.nxt
        i = nxt[sentinel]
        while i != sentinel:
            j = nxt[i]  # read first: the caller may remove i
            yield i
            i = j

    def records(self, sentinel: int) -> list[bytes]:
        """The records of one list in order (inspection and tests)."""
        return [self.recs[i] for i in self.walk(sentinel)]

    def in_memory(self) -> Iterator[int]:
        """Every in-memory slot in get order: lanes 9..0, each front then rear."""
        for lane in reversed(self.lanes):
            yield from self.walk(lane.front)
            yield from self.walk(lane.rear)

    # -- invariants ------------------------------------------------------------------------------

    def check(self) -> None:
        """Assert every invariant of the module docstring (O(capacity): for tests, the model
        checks and debugging, never on a hot path). The links agree both ways and every list
        ends at its sentinel; each lane's counters equal what its lists hold; a linked slot
        holds a record, its lane's bits and no REMOVED flag; a free slot holds nothing and is
        in no list; every slot is linked or free exactly once; the index (if any) names
        exactly the linked slots' values.

        :raises AssertionError: naming the first invariant broken."""
        nxt, prv, st, recs = self.nxt, self.prv, self.st, self.recs
        cap = len(recs)
        assert len(nxt) == len(prv) == len(st) == len(self.back) == cap, "arrays of different lengths"
        linked: set[int] = set()
        mem_bytes = 0
        for lane in self.lanes:
            counts = [0, 0, 0]  # mem, ready, back
            for s in (lane.front, lane.rear):
                mem_bytes += self._check_list(lane, s, linked, counts)
            mem, ready, back = counts
            assert lane.mem == mem, f"lane {lane.priority}: mem {lane.mem} but {mem} linked"
            assert lane.ready == ready, f"lane {lane.priority}: ready {lane.ready} but {ready} visible"
            assert lane.back == back, f"lane {lane.priority}: back {lane.back} but {back} marked"
            assert not mem or self.mask & lane.bit, f"lane {lane.priority} holds messages, its mask bit is clear"
            assert lane.sweeping >= 0, f"lane {lane.priority}: sweeping {lane.sweeping}"
            if not lane.chain and not lane.sweeping:
                assert nxt[lane.rear] == lane.rear, f"lane {lane.priority}: rear list without chain or sweep"
        assert mem_bytes == self.mem_bytes, f"mem_bytes {self.mem_bytes} but the records hold {mem_bytes}"
        free = list(self.free) + list(self.deferred)
        assert len(set(free)) == len(free), "a slot is free twice"
        assert not linked & set(free), "a linked slot is also free"
        assert len(linked) + len(free) == cap - _SENTINELS, "slots neither linked nor free"
        assert all(recs[i] is None for i in free), "a free slot holds a record"
        if self.index is not None:
            expect: dict = {}
            for i in linked:
                k = self.index.key(recs[i])
                if k is not None:
                    expect.setdefault(k, set()).add(i)
            got = {k: ({v} if type(v) is int else set(v)) for k, v in self.index.map.items() if v}
            assert got == expect, "the index does not name exactly the linked slots"

    def _check_list(self, lane: Lane, s: int, linked: set[int], counts: list[int]) -> int:
        """Walk one list, checking links and slots; add to ``counts``; return its bytes."""
        nxt, prv, st, recs = self.nxt, self.prv, self.st, self.recs
        nbytes = 0
        i, prev = nxt[s], s
        steps = 0
        while i != s:
            steps += 1
            assert steps <= len(recs), f"list of sentinel {s} does not end"
            assert i >= _SENTINELS and i not in linked, f"slot {i} linked twice or a sentinel inside a list"
            assert prv[i] == prev, f"slot {i}: prv {prv[i]} but reached from {prev}"
            state = st[i]
            assert state & LANE_MASK == lane.priority, f"slot {i} in lane {lane.priority} says lane {state & 15}"
            assert not state & REMOVED and state <= 0x1FF, f"slot {i}: bad state {state:#x}"
            assert recs[i] is not None, f"slot {i} is linked without a record"
            linked.add(i)
            nbytes += len(recs[i])
            counts[0] += 1
            counts[1] += not state & HIDDEN
            counts[2] += self.back[i]
            prev, i = i, nxt[i]
        assert prv[s] == prev, f"sentinel {s}: prv {prv[s]} but the list ends at {prev}"
        return nbytes
