"""The queue core: every message of one queue, in memory and swept, and the only code that
reads or writes how they are kept (seed 003's shape, docs/design.md "One queue").

::

    front list  <->  chain of swept blobs  <->  rear list      (one lane per priority)
    (in memory)       (blob store, by id)       (in memory)

A lane's order is front ⧺ chain ⧺ rear, each part in arrival order. :class:`LaneSet` owns a
queue's lanes, their records, its index (engine/core/index.py) and the in-memory state of
its chains (engine/core/swept.py), and offers the primitives everything above it uses:
the first available message (with a match, from a position), the next one after a browse
cursor, take, hide, restore on backout, lock, assign to a batch, splice a run out into a
blob and a blob back in, and the sweeper's walk. Code outside engine/core/ names messages
by :class:`~sweepq.engine.core.ref.Ref` and never reads the arrays below.

**In memory**, every message is one *slot*, and a slot is 15 bytes of flat arrays:

* ``nxt[slot]`` / ``prv[slot]`` — the links (``array('i')``);
* ``st[slot]`` — the lane index in the low four bits and the flags below (``array('H')``);
* ``loc[slot]`` / ``hi[slot]`` — where its record is in the queue's
  :class:`~sweepq.engine.core.arena.Arena` (the low 32 bits, and seven more above bit 0 of
  ``hi``, whose bit 0 says the message came back from a blob).

The record itself (engine/record.py) is a few bytes in one of the arena's shared blocks. So
a queued message is no Python object at all (but an item, below): a backlog of millions costs no collection
pauses and no allocator header per message, and a blob that comes back is spliced in bulk.
Slots 0..19 are the sentinels of the 20 circular lists (lane p: front 2p, rear 2p+1). Free
slots form a stack linked through their own ``nxt`` (``free_head``, -1 when empty), reused
last-in first-out, so the free list costs no array; a free slot's state is REMOVED.

**Items**: a message put by ``sweepq.Queue`` in memory may be a Python object, the *item*,
which the core keeps as it is (``get`` returns the very object that was put, as
``queue.Queue``'s does): ``items[slot]`` holds it beside a record with the HAS_ITEM flag and
no payload (engine/record.py). ``items`` is None until a queue's first item (a queue of MQ
messages pays nothing), then a list as long as the slot arrays. An item never leaves
memory as an object: :meth:`LaneSet.snapshot`, the sweep's copy of a run, writes the item's
encoding (``encode``, the queue's serializer, set by whoever puts items) into the record in
its place, so what a blob holds, and what comes back from it, is bytes; the slot's
reference goes when the slot is freed.

**The lock**: every method here is called with the owning queue's lock held, but for the
three of :data:`UNLOCKED`, the sweep's reads between its holds; the rule, and why those three
are safe, is written once, in engine/queue.py. With lock checks on (engine/core/lock.py)
every public method of :class:`LaneSet` but those three asserts that the calling thread holds
the lock.

Invariants kept here (:meth:`LaneSet.check` asserts them all):

* a slot is available to a get iff ``st[slot] < AVAILABLE_BELOW`` (no flag set);
* ``Lane.ready`` counts the lane's in-memory messages with neither UNCOMMITTED nor GOTTEN
  (committed, not gotten: the sweeper's y); ``Lane.mem`` counts all of them;
  ``Lane.swept`` the live messages of its chain;
* ``LaneSet.mem_bytes`` is the bytes of the records in memory;
* while a lane's chain is empty and no sweep is in progress, new messages go to the front
  list and the rear list is empty; otherwise they go to the rear list (docs/design.md 1 and 2);
* a ref that holds a message across a release of the lock (hidden, locked or batched) names
  it where it is: its slot never changes, and a blob that comes back moves it.

The compiled form (Cython, engine/core/lanes.pxd) is this file with C types; the tests run
the interpreted form too and hold both to the same answers.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import cython
import numpy as np
from cython import compiled as COMPILED

from .. import record
from ..record import PlainRecords
from ..sizes import item_bytes
from .arena import Arena
from .flags import (
    AVAILABLE_BELOW,
    BATCHED,
    GOTTEN,
    HIDDEN,
    LANE_MASK,
    LOCKED,
    N_LANES,
    REMOVED,
    SENTINELS,
    UNCOMMITTED,
)
from .lane import Lane, Need
from .lock import CHECKS, assert_held
from .ref import Ref
from .swept import GOTTEN as POS_GOTTEN
from .swept import LIVE as POS_LIVE
from .swept import LOCKED as POS_LOCKED
from .swept import REMOVED as POS_REMOVED
from .swept import SweptBlob

if COMPILED:  # the C function the compiled form calls
    from cython.cimports.cpython.bytearray import PyByteArray_FromStringAndSize

if TYPE_CHECKING:
    from .index import SlotIndex

_INITIAL = 256  # slots, sentinels included
_SHRINK_ABOVE = 1 << 16  # an emptied queue gives back arrays larger than this
_OFF_FLAGS = record.OFF_FLAGS
_OFF_BACKOUT = record.OFF_BACKOUT
_PERSISTENT = record.PERSISTENT
_HAS_ITEM = record.HAS_ITEM
# The flags head(miss) looks at: an item, and no section a get must read (expiry, group).
_ITEM_ONLY = record.HAS_ITEM | record.HAS_EXPIRY | record.HAS_GROUP
_HAS_EXPIRY = record.HAS_EXPIRY
_HEAD_LEN = record.HEAD_LEN
_BACK = 1  # hi[slot] bit 0: the message came back from a blob
_LOW32 = 0xFFFFFFFF
_HI_UNIT = 1 << 32  # what one unit of hi[slot] >> 1 adds to a location
UNLOCKED = ("sweep_runs", "snapshot", "precheck_run")
"""The core's methods that run without the queue's lock (engine/queue.py, "The lock rule",
says why that is safe); every other public method of :class:`LaneSet` asserts the lock with
checks on."""
_TOP = bytes(max(0, m.bit_length() - 1) for m in range(1 << N_LANES))  # the highest lane of a mask


class LaneSet:
    """Every message of one queue, in ten lanes (priority 0..9): the queue core.

    See the module docstring for the layout, the boundary and the locking rule. ``mutex`` is
    the owning queue's lock, which the state-changing methods check with checks on."""

    __slots__ = (
        "_arena",
        "_defer",
        "_deferred",
        "_emptied",
        "_epoch",
        "_free_head",
        "_hi",
        "_items",
        "_low",
        "_mask",
        "_mutex",
        "_nxt",
        "_prv",
        "_spare",
        "_st",
        "_sweep_epoch",
        "index",
        "lanes",
        "mem_bytes",
    )

    def __init__(self, mutex: object = None) -> None:
        self._mutex = mutex
        self.lanes = [Lane(p) for p in range(N_LANES)]
        self._arena = Arena()
        # engine/core/index.py SlotIndex when the queue has an index type: every slot placed,
        # freed or renumbered here goes through it, so it stays exact.
        self.index: SlotIndex | None = None
        self._mask = 0  # bit p: lane p may hold messages (set by append, cleared by its readers)
        self.mem_bytes = 0
        self._defer = 0
        self._deferred: list[int] = []  # slots freed while a sweep runs: free once it ends
        # Slots the ended sweeps freed, a list of them per sweep, handed over whole when the
        # sweep ends (sweeping(False): O(1), not a push per slot under the lock); appends take
        # them once the free list is empty (append).
        self._spare: list[list[int]] = []
        # Blobs whose last message a take removed: they left their chain here, and the tier
        # unlinks them in the store (engine/tiering.py unlink_emptied_locked), emptying this.
        self._emptied: list[tuple[Lane, SweptBlob]] = []
        self._items: list[object] | None = None  # see "Items" in the module docstring
        # Changes to the messages in memory but appends at the end of a list (every take,
        # hide, restore, lock, batch change, unlink, splice and move of a record), counted;
        # ``sweep_epoch`` is the count at the end of the sweep's last hold of the lock. Equal,
        # nothing a sweep's choice depends on changed since (move_run's shortcut).
        self._epoch = 0
        self._sweep_epoch = -1
        self._reset(_INITIAL)

    def _reset(self, n: int) -> None:
        """Fresh arrays of ``n`` slots: every list empty, every slot free (the lowest first)."""
        nxt = _ints(1, n + 1)  # free slot i links to i + 1
        nxt[n - 1] = -1
        for i in range(SENTINELS):
            nxt[i] = i  # each sentinel links to itself: an empty list
        st = array("H", [REMOVED]) * n
        for i in range(SENTINELS):
            st[i] = 0
        # Held as _views makes them: typed views of the memory compiled, lists interpreted.
        self._nxt, self._prv, self._st, self._low, self._hi = _views(
            nxt, _ints(0, n), st, array("I", bytes(4 * n)), bytearray(n)
        )
        if self._items is not None:
            self._items = [None] * n
        self._free_head = SENTINELS if n > SENTINELS else -1
        self._spare = []  # every slot not linked is on the free list now
        self._epoch += 1

    def __getitem__(self, priority: int) -> Lane:
        return self.lanes[priority]

    def __iter__(self) -> Iterator[Lane]:
        return iter(self.lanes)

    @property
    def _capacity(self) -> int:
        """Slots the arrays hold now, sentinels included (the core's tests look)."""
        return len(self._nxt)

    def _grow(self, need: int) -> None:
        """At least ``need`` more free slots. The arrays grow by a quarter (amortised O(1)
        a slot, and little slack) into new arrays: a walker without the lock keeps whole ones."""
        old = len(self._nxt)
        n = max(old + need, old + old // 4)
        # The new slots free, the lowest first; the old ones copied as they are.
        nxt, prv, st, loc, hi = _views(
            _ints(1, n + 1), _ints(0, n), array("H", [REMOVED]) * n, array("I", bytes(4 * n)), bytearray(n)
        )
        nxt[:old] = self._nxt
        nxt[n - 1] = self._free_head
        prv[:old] = self._prv
        st[:old] = self._st
        loc[:old] = self._low
        hi[:old] = self._hi
        if self._items is not None:
            self._items = self._items + [None] * (n - old)  # a new list too, as the arrays
        self._nxt, self._prv, self._st, self._low = nxt, prv, st, loc
        self._hi, self._free_head = hi, old

    # -- a slot's record ----------------------------------------------------------------------------

    def _loc(self, i: int) -> int:
        return (self._hi[i] >> 1) * _HI_UNIT | self._low[i]

    def _rec(self, i: int) -> bytes:
        """A copy of slot ``i``'s record."""
        return self._arena.read((self._hi[i] >> 1) * _HI_UNIT | self._low[i])

    def _place(self, i: int, rec: bytes) -> None:
        """Write ``rec`` to the arena as slot ``i``'s record."""
        loc = self._arena.store(rec)
        self._low[i] = loc & _LOW32
        self._hi[i] = ((loc >> 32) << 1) | (self._hi[i] & _BACK)

    def _seq(self, i: int) -> int:
        return self._arena.seq((self._hi[i] >> 1) * _HI_UNIT | self._low[i])

    def _flags(self, i: int) -> int:
        """The record's flags byte (engine/record.py OFF_FLAGS), without a copy."""
        return self._arena.byte((self._hi[i] >> 1) * _HI_UNIT | self._low[i], _OFF_FLAGS)

    # -- refs ---------------------------------------------------------------------------------------

    def record(self, ref: Ref) -> bytes:
        """The record of the message ``ref`` names."""
        if CHECKS:
            assert_held(self._mutex, "reading a record")
        slot = ref.slot
        return self._rec(slot) if slot >= 0 else ref.rec

    def item(self, ref: Ref) -> object:
        """The item of the in-memory message ``ref`` names, whose record has HAS_ITEM."""
        if CHECKS:
            assert_held(self._mutex, "reading an item")
        assert ref.slot >= 0 and self._items is not None, "an item is only in memory"
        return self._items[ref.slot]

    def lane_of(self, ref: Ref) -> Lane:
        """The lane that holds the message ``ref`` names."""
        if CHECKS:
            assert_held(self._mutex, "naming a lane")
        slot = ref.slot
        if slot >= 0:
            return self.lanes[self._st[slot] & LANE_MASK]
        return ref.lane  # type: ignore[return-value]  # a ref into a blob always has its lane

    def home(self, ref: Ref) -> tuple[int, int, int] | None:
        """Where the message's durable record lives (engine/durable/journal.py): (its lane,
        -1, -1) for its own record, (its lane, blob id, position) inside a blob; None when its
        blob was found damaged since."""
        if CHECKS:
            assert_held(self._mutex, "naming a durable home")
        if ref.slot >= 0:
            return self._st[ref.slot] & LANE_MASK, -1, -1
        blob, lane = ref.blob, ref.lane
        assert blob is not None and lane is not None
        return None if blob.damaged else (lane.priority, blob.blob_id, ref.pos)

    def _hit(self, lane: Lane, blob: SweptBlob, pos: int, rec: bytes) -> Ref:
        return Ref(-1, lane, blob, pos, rec)

    # -- placing ------------------------------------------------------------------------------------

    def add(
        self,
        lane: Lane,
        recs: Sequence[bytes] | PlainRecords | bytes,
        state: int,
        refs: bool = False,
        items: Sequence | None = None,
    ) -> list[Ref] | None:
        """Put ``recs`` after the last message of ``lane`` (front or rear list, invariant 1/2)
        with ``state`` (lane index and flags). ``items``, when given, are their payloads,
        kept as objects (each record has HAS_ITEM and no payload: "Items" above). Returns
        their refs when ``refs`` (a unit of work holds them), else None. The put hot path.
        ``recs`` may be engine/record.py ``PlainRecords`` (a batch put's plain messages, with
        no refs, no items and no index): their records are then written straight into the
        arena from their fields, never made as ``bytes``. ``recs`` may be one record
        (``bytes``, ``items`` then its one item if any), with no ref kept: a put's hot path,
        none of the choices below."""
        if CHECKS:
            assert_held(self._mutex, "placing a message")
        s = -1  # the list append() chooses: the rule is there, once
        if items is not None and self._items is None:
            self._items = [None] * len(self._nxt)
        if type(recs) is bytes:
            slot = self.append(lane, s, recs, state, 0, 0)
            if items is not None:
                self._items[slot] = items[0]  # type: ignore[index]  # made above
            return None
        if type(recs) is not list and type(recs) is PlainRecords:  # a put's list: one pointer compare
            self._add_plain(lane, s, state, recs)
            return None
        many: Sequence[bytes] = recs  # type: ignore[assignment]  # one bytes and PlainRecords went above
        if len(many) == 1:
            slot = self.append(lane, s, many[0], state, 0, 0)
            if items is not None:
                self._items[slot] = items[0]  # type: ignore[index]  # made above
            return [Ref.at(slot)] if refs else None
        out: list[Ref] | None = [] if refs else None
        for k, rec in enumerate(many):
            slot = self.append(lane, s, rec, state, 0, 0)
            if items is not None:
                self._items[slot] = items[k]  # type: ignore[index]  # made above
            if out is not None:
                out.append(Ref.at(slot))
        return out

    def _add_plain(self, lane: Lane, s: int, state: int, recs: PlainRecords) -> None:
        """:meth:`add` of :class:`~sweepq.engine.record.PlainRecords`: each record written
        straight into the arena from its fields (:meth:`Arena.store_plain`), the ``k``-th
        payload with arrival number ``seqs[k]``. The queue has no index."""
        assert self.index is None, "an indexed queue's records are added as bytes"
        arena = self._arena
        seqs = recs.seqs
        put_us = recs.put_us
        priority = recs.priority
        flags = _PERSISTENT if recs.persistent else 0
        for k, payload in enumerate(recs.payloads):
            loc = arena.store_plain(seqs[k], put_us, priority, flags, payload)
            self.append(lane, s, None, state, loc, _HEAD_LEN + len(payload))

    @cython.boundscheck(False)  # as head's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def append(self, lane: Lane, s: int, rec: bytes | None, state: int, loc: int, n: int) -> int:
        """Put a record at the end of the list of sentinel ``s`` of ``lane`` (-1: the list new
        messages go to, front or rear, invariant 1/2), in a free slot, with ``state``; its
        slot. The record is ``rec``, written to the arena (and the index) here, or, ``rec``
        None, the record of ``n`` bytes the caller wrote at ``loc``. A put of one record with
        no ref kept calls it directly (LocalQueue.insert_one_locked: a call fewer interpreted)."""
        if CHECKS:
            assert_held(self._mutex, "placing a message")
        if s < 0:
            s = lane.rear if (lane.chain or lane.sweeping) else lane.front
        if rec is not None:
            loc = self._arena.store(rec)
            n = len(rec)
        i = self._free_head
        if i < 0:
            if self._spare:
                i = self._spare_slot()
            else:
                self._grow(1)
                i = self._free_head
        self._free_head = self._nxt[i]
        self._st[i] = state
        if loc <= _LOW32:  # nearly always (a location under 4 GiB): interpreted, no arithmetic
            self._low[i] = loc
            self._hi[i] = 0  # a free slot's BACK bit is clear (its removal cleared it)
        else:
            self._low[i] = loc & _LOW32
            self._hi[i] = (loc >> 32) << 1
        last = self._prv[s]
        self._prv[i] = last
        self._nxt[i] = s
        self._nxt[last] = i
        self._prv[s] = i
        lane.mem += 1
        self._mask |= lane.bit
        self.mem_bytes += n
        if not state & HIDDEN:
            lane.ready += 1
        if self.index is not None and rec is not None:
            self.index.add(i, rec)
        return i

    def _spare_slot(self) -> int:
        """A slot an ended sweep freed (:attr:`spare`), for an append: its ``nxt`` reads -1,
        so that the free list stays empty behind it."""
        spare = self._spare
        i = spare[-1].pop()
        if not spare[-1]:
            spare.pop()
        self._nxt[i] = -1
        return i

    def load(self, lane: Lane, front: Sequence[bytes], blobs: Sequence[SweptBlob], rear: Sequence[bytes]) -> None:
        """A lane as recovery rebuilt it (engine/durable/recovery.py): ``front`` records, the
        chain of ``blobs`` (indexed in memory, left in the store), ``rear`` records. The lane
        must be empty."""
        if CHECKS:
            assert_held(self._mutex, "loading a lane")
        assert not lane.mem and not lane.chain, f"lane {lane.priority} loaded twice"
        state = lane.priority
        if len(front) + len(rear):
            # The slots at once: growing a quarter at a time would copy the arrays ~50 times
            # for a million records (most of a reopen's time in the core).
            self._grow(len(front) + len(rear))
        for rec in front:
            self.append(lane, lane.front, rec, state, 0, 0)
        for blob in blobs:
            lane.chain.append(blob)
            lane.swept += blob.live
        if blobs:
            self._mask |= lane.bit  # gets look at this lane (appends set it for in-memory ones)
        s = lane.rear if lane.chain else lane.front
        for rec in rear:
            self.append(lane, s, rec, state, 0, 0)

    # -- finding (lock held) ------------------------------------------------------------------------

    # The get's, put's and take's hot lines (issue 30), without a bounds, wraparound or
    # initialised check at each index (a compare, a branch and an error exit each): they index
    # the slot arrays only with slots from the lists and the free list, within the arrays by
    # invariant and never negative where indexed; the arrays are made in __init__ (_reset).
    # (mypy still checks them: typings/cython.pyi.)
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def head(self, miss: object = None, record: bool = False, refuse: int = 0) -> object:
        """The first message of the highest non-empty lane's front list, if it is available:
        the get hot path. Without ``miss``: its Ref (None: look further with :meth:`find`).

        With ``miss``, a get in one step (the calls a plain get makes, made together): when
        that message has no expiry or group section and is in a lane with no chain (no
        readahead owed), it is taken off the queue for good (as :meth:`take`) and returned
        with no Ref made: with ``record``, a message that is not an item, as a copy of its
        record (an MQ get), unless its flags have a bit of ``refuse`` (a persistent message
        on a queue with a journal, whose removal must be written); without, an item
        (HAS_ITEM), as the item, with no copy of its record (the get of ``sweepq.Queue`` in
        memory). Anything else returns ``miss``, having changed nothing."""
        if CHECKS:
            assert_held(self._mutex, "the get's head")
        # _head(), written out (interpreted, a call fewer), keeping the lane it looks at.
        mask = self._mask
        i = -1
        if mask:
            lane: Lane = self.lanes[_TOP[mask]]
            i = self._nxt[lane.front]
            if i < SENTINELS or self._st[i] >= AVAILABLE_BELOW:
                i = -1
        if miss is None:
            return Ref.at(i) if i >= 0 else None
        if i < 0 or lane.chain:
            return miss
        if record:
            loc = self._low[i] if self._hi[i] < 2 else self._loc(i)
            if refuse and self._arena.byte(loc, _OFF_FLAGS) & refuse:  # looked at before a copy is made
                return miss
            rec = self._arena.read(loc)
            if rec[_OFF_FLAGS] & _ITEM_ONLY:
                return miss
            self._remove(i, len(rec))
            return rec
        if self._items is None:
            return miss
        v = self._arena.sized_byte(self._low[i] if self._hi[i] < 2 else self._loc(i), _OFF_FLAGS)
        if v & _ITEM_ONLY != _HAS_ITEM:
            return miss
        item = self._items[i]
        self._remove(i, v >> 8)  # its length known: the arena reads it no more
        return item

    def _head(self) -> int:
        mask = self._mask
        if not mask:
            return -1
        lane: Lane = self.lanes[_TOP[mask]]
        i = self._nxt[lane.front]
        if i >= SENTINELS and self._st[i] < AVAILABLE_BELOW:
            return i
        return -1

    def find(self, match, unsweep: Callable[[Lane], Ref | Need | None]) -> Ref | Need | None:
        """The first available message in get order that ``match`` (a
        :class:`~sweepq.engine.matching.Match`) accepts (None: any): lanes from the highest,
        each its front list, then its chain, then its rear list. A chain is searched in place
        with a match (:meth:`search_chain`); without one, ``unsweep(lane)`` (the tier) brings
        it back until something is available, or the chain is empty (the rear list has then
        joined the front). Either may give a :class:`Need`: a blob to read first. (The get
        hot path asks :meth:`head` first.)"""
        if CHECKS:
            assert_held(self._mutex, "finding a message")
        for lane in self._lanes_down():
            ref = self._first(lane, False, match)
            if ref is not None:
                return ref
            if lane.chain:
                hit = unsweep(lane) if match is None else self.search_chain(lane, match)
                if hit is not None:
                    return hit
            ref = self._first(lane, True, match)
            if ref is not None:
                return ref
        return None

    def _lanes_down(self) -> Iterator[Lane]:
        """The lanes that may hold messages, highest first (each may still be empty: a
        lane found empty with no chain leaves the mask here)."""
        mask = self._mask
        lanes = self.lanes
        while mask:
            p = _TOP[mask]
            mask ^= 1 << p
            lane = lanes[p]
            if lane.ready or lane.chain:
                yield lane
            elif not lane.mem:
                self._mask &= ~lane.bit

    def _first(self, lane: Lane, rear: bool, match: Callable[[bytes], bool] | None = None) -> Ref | None:
        """The first available message of ``lane``'s front (or rear) list that ``match``
        accepts (None: any)."""
        s = lane.rear if rear else lane.front
        nxt, st = self._nxt, self._st
        i = nxt[s]
        while i != s:
            if st[i] < AVAILABLE_BELOW and (match is None or match(self._rec(i))):
                return Ref.at(i)
            i = nxt[i]
        return None

    def first_indexed(self, value: object, match: Callable[[bytes], bool]) -> tuple[int, list[Ref]]:
        """The available in-memory messages filed under ``value`` in the index that ``match``
        accepts, of the highest lane that has any: (that lane's priority, their refs in
        arrival order); (-1, []) when none. The caller searches the chains of the lanes
        above, and this lane's chain when the first is behind it (LocalQueue.find_locked)."""
        if CHECKS:
            assert_held(self._mutex, "searching the index")
        st = self._st
        by_lane: dict[int, list[int]] = {}
        for i in self.index.slots(value):  # type: ignore[union-attr]  # called when the queue has an index
            if st[i] < AVAILABLE_BELOW and match(self._rec(i)):
                by_lane.setdefault(st[i] & LANE_MASK, []).append(i)
        if not by_lane:
            return -1, []
        top = max(by_lane)
        found = by_lane[top]
        if len(found) > 1:
            found.sort(key=self._seq)
        return top, [Ref.at(i) for i in found]

    def indexed_hits(self, value: object, match, pinned: dict) -> list[tuple[Ref, bytes] | Need]:
        """Every available in-memory message filed under ``value`` in the index, as (ref,
        record), in no particular order (engine/groups/ sorts them), then what ``match``
        (which names ``value``) accepts in every chain, as :meth:`hits` finds it; a
        :class:`Need` for a blob neither in memory nor in ``pinned``."""
        if CHECKS:
            assert_held(self._mutex, "searching the index")
        st = self._st
        found: list = [(Ref.at(i), self._rec(i)) for i in self.index.slots(value) if st[i] < AVAILABLE_BELOW]  # type: ignore[union-attr]
        for lane in self.lanes:
            if lane.chain:
                found += self._chain_hits(lane, match, pinned)
        return found

    def hits(
        self, lane: Lane, match, pinned: dict, after: Callable[[Ref, bytes], bool] | None = None
    ) -> Iterator[tuple[Ref, bytes] | Need]:
        """Every available message of ``lane`` that ``match`` (and ``after``, when given)
        accepts, in get order (front list, chain, rear list), as (ref, record); the chain's
        are found through the blobs' indexes without unsweeping, and a blob neither in
        memory nor in ``pinned`` gives a :class:`Need` (and the end)."""
        if CHECKS:
            assert_held(self._mutex, "walking a lane")
        yield from self._available(lane, False, match, after)
        for hit in self._chain_hits(lane, match, pinned, after):
            yield hit
            if type(hit) is Need:
                return
        yield from self._available(lane, True, match, after)

    def _available(
        self, lane: Lane, rear: bool, match: Callable[[bytes], bool], after: Callable[[Ref, bytes], bool] | None = None
    ) -> Iterator[tuple[Ref, bytes]]:
        """Every available message of ``lane``'s front (or rear) list that ``match`` (and
        ``after``, when given) accepts, in order, as (ref, record)."""
        s = lane.rear if rear else lane.front
        nxt, st = self._nxt, self._st
        i = nxt[s]
        while i != s:
            if st[i] < AVAILABLE_BELOW:
                rec = self._rec(i)
                if match(rec):
                    ref = Ref.at(i)
                    if after is None or after(ref, rec):
                        yield ref, rec
            i = nxt[i]

    def run_from(self, ref: Ref, limit: int) -> list[Ref]:
        """``ref`` (available, in memory) and the available messages that follow it in its
        list, at most ``limit``: a contiguous run that a batch get takes at once."""
        if CHECKS:
            assert_held(self._mutex, "finding a run")
        nxt, st = self._nxt, self._st
        run = [ref]
        j = nxt[ref.slot]
        while len(run) < limit and j >= SENTINELS and st[j] < AVAILABLE_BELOW:
            run.append(Ref.at(j))
            j = nxt[j]
        return run

    def find_seqs(self, keys: set[tuple[int, int]]) -> dict[tuple[int, int], Ref]:
        """The available in-memory messages named by ``keys`` ((lane, arrival number)), in one
        walk of the lists: for the rare callers, e.g. a batch restored at open."""
        if CHECKS:
            assert_held(self._mutex, "finding messages")
        st = self._st
        found = {}
        for i in self._in_memory():
            key = (st[i] & LANE_MASK, self._seq(i))
            if key in keys and st[i] < AVAILABLE_BELOW:
                found[key] = Ref.at(i)
        return found

    def search_chain(self, lane: Lane, match) -> Ref | Need | None:
        """Find a message ``match`` accepts inside ``lane``'s chain without unsweeping
        (invariant 5), through each blob's index.

        Blobs this call already searched in full are skipped (``match.searched``): a search
        that must read more blobs than the decoded-blob cache holds (a selector makes every
        live message a candidate) would otherwise evict and re-read them for ever."""
        if CHECKS:
            assert_held(self._mutex, "searching a chain")
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
                    return self._hit(lane, blob, pos, rec)
            searched.add(blob)
        return None

    def _chain_hits(
        self, lane: Lane, match, pinned: dict, after: Callable[[Ref, bytes], bool] | None = None
    ) -> Iterator[tuple[Ref, bytes] | Need]:
        """Every message of ``lane``'s chain that ``match`` (and ``after``) accepts, in order,
        as (ref, record), found through the blobs' indexes without unsweeping; a
        :class:`Need` (and the end) for a blob neither in memory nor in ``pinned``."""
        for blob in lane.chain:
            cand = blob.candidates(match.msg_id, match.correl_id, match.group_id, match.seq)
            if not len(cand):
                continue
            records = blob.records() or pinned.get(blob)
            if records is None:
                yield Need(lane, blob)
                return
            for p in cand.tolist():
                rec = blob.record(records, p)
                if match(rec):
                    hit = self._hit(lane, blob, p, rec)
                    if after is None or after(hit, rec):
                        yield hit, rec

    # -- browsing (lock held) -----------------------------------------------------------------------

    def browse(
        self,
        lane: Lane,
        after: int,
        match: Callable[[bytes], bool] | None,
        lk_seq: int,
        hint: Ref | None,
        in_chain: Callable[[], Ref | Need | None],
    ) -> Ref | Need | None:
        """A browse's walk of ``lane``: the first message with arrival number above ``after``
        (-1: from the start) that a handle whose lock is on ``lk_seq`` sees and ``match``
        accepts, in the front list, then the chain (``in_chain()``: the browse's own search
        of it, which reads blobs in place, or a :class:`Need`), then the rear list.
        ``hint``: a message of this lane at or before the cursor, to start near it (checked
        before use). A walk that began in the rear list ends with it."""
        if CHECKS:
            assert_held(self._mutex, "browsing")
        ref, through = self._browse_front(lane, after, match, lk_seq, hint)
        if ref is not None:
            return ref
        if not through:
            return None  # the walk began in the rear list: the lane is done
        if lane.chain:
            hit = in_chain()
            if hit is not None:
                return hit
        return self._browse_rear(lane, after, match, lk_seq)

    def _browse_front(
        self, lane: Lane, after: int, match: Callable[[bytes], bool] | None, lk_seq: int, hint: Ref | None
    ) -> tuple[Ref | None, bool]:
        """:meth:`browse`'s walk of the front list: (the message or None, whether the walk went
        through the front list to its end: only then do the chain and the rear list come next)."""
        nxt, prv, st = self._nxt, self._prv, self._st
        front = lane.front
        i = -1
        if after >= 0:
            h = hint.slot if hint is not None else -1
            if SENTINELS <= h < len(st):
                s = st[h]
                if not s & REMOVED and s & LANE_MASK == lane.priority and self._seq(h) <= after:
                    i = nxt[h]
            if i < 0:
                last = prv[front]
                i = nxt[front] if last != front and self._seq(last) > after else front
        else:
            i = nxt[front]
        found, end = self._scan(i, after, match, lk_seq)
        if found >= 0:
            return Ref.at(found), False
        return None, end == front

    def _browse_rear(self, lane: Lane, after: int, match: Callable[[bytes], bool] | None, lk_seq: int) -> Ref | None:
        """:meth:`browse`'s walk of the rear list (after the front list and the chain)."""
        rear = lane.rear
        last = self._prv[rear]
        if last == rear or self._seq(last) <= after:
            return None
        found, _ = self._scan(self._nxt[rear], after, match, lk_seq)
        return Ref.at(found) if found >= 0 else None

    def _scan(self, i: int, after: int, m: Callable[[bytes], bool] | None, lk_seq: int) -> tuple[int, int]:
        """Walk one list from slot ``i``: the first slot with seq > ``after`` that a handle
        whose lock is on ``lk_seq`` sees and ``m`` accepts, and the sentinel where the walk
        ended (-1 if it found one)."""
        st, nxt = self._st, self._nxt
        passed = after < 0
        while i >= SENTINELS:
            if not passed:
                if self._seq(i) <= after:
                    i = nxt[i]
                    continue
                passed = True  # the list is in seq order: every later slot is after too
            s = st[i]
            visible = s < AVAILABLE_BELOW or (s & ~LANE_MASK == LOCKED and self._seq(i) == lk_seq)
            if visible and (m is None or m(self._rec(i))):
                return i, -1
            i = nxt[i]
        return -1, i

    def before(self, ref: Ref) -> Ref | None:
        """The message before ``ref`` (in memory) in its list, None at its start: a browse
        cursor's hint when the message under it leaves."""
        if CHECKS:
            assert_held(self._mutex, "moving a cursor")
        p = self._prv[ref.slot]
        return Ref.at(p) if p >= SENTINELS else None

    def at(self, hint: Ref | None, seq: int, lk_seq: int) -> tuple[Ref | None, bool]:
        """The in-memory message ``hint`` names if it is still there with arrival number
        ``seq`` (a browse cursor's check of its message), else None; and whether a handle
        whose browse lock is on ``lk_seq`` (-1: none) sees it: available, or locked by that
        very handle."""
        if CHECKS:
            assert_held(self._mutex, "checking a cursor")
        h = hint.slot if hint is not None else -1
        st = self._st
        if SENTINELS <= h < len(st) and not st[h] & REMOVED and self._seq(h) == seq:
            s = st[h]
            return Ref.at(h), s < AVAILABLE_BELOW or (s & ~LANE_MASK == LOCKED and seq == lk_seq)
        return None, False

    # -- one message changes (lock held) ------------------------------------------------------------

    def take(self, ref: Ref | Sequence[Ref] | int) -> Lane | None:
        """Take the message off the queue for good, or a run of available in-memory messages
        of one list (from :meth:`run_from`) in bulk; return its lane, or None when its blob
        was found damaged since it was found (its messages were counted out then).

        ``ref`` an ``int``, a limit: the batch get's hot path, :meth:`_take_head` (the run at
        the head of the queue, at most that many, copied out and taken in one step)."""
        if CHECKS:
            assert_held(self._mutex, "taking a message")
        if type(ref) is int:
            return self._take_head(ref)  # type: ignore[return-value]  # a limit's answer
        if type(ref) is not Ref:
            return self._take_run(ref)  # type: ignore[arg-type]
        r: Ref = ref
        slot = r.slot
        if slot >= 0:
            owner = self.lanes[self._st[slot] & LANE_MASK]
            self._remove(slot, -1)
            return owner
        blob = r.blob
        assert blob is not None
        if blob.damaged:
            return None
        assert blob.flags[r.pos] != POS_REMOVED, f"blob {blob.blob_id}: position {r.pos} removed twice"
        blob.flags[r.pos] = POS_REMOVED
        blob.held.pop(r.pos, None)
        blob.live -= 1
        lane = r.lane
        assert lane is not None
        lane.swept -= 1
        if not blob.live:
            lane.chain.remove(blob)
            self._emptied.append((lane, blob))
            self._settle(lane)
        return lane

    def take_emptied(self) -> list[tuple[Lane, SweptBlob]]:
        """The blobs whose last message a take removed since the last call (they left their
        chains then), with their lanes: the tier unlinks them in the store
        (engine/tiering.py unlink_emptied_locked). The core forgets them. Every get asks: with
        none (nearly always), the one empty list, which the caller must not change."""
        if CHECKS:
            assert_held(self._mutex, "taking the emptied blobs")
        emptied = self._emptied
        if emptied:
            self._emptied = []
        return emptied

    @cython.boundscheck(False)  # as head's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def _remove(self, i: int, n: int, unlink: bool = True) -> int:
        """Slot ``i``'s record leaves the arena (and the index, and its item the slot), and
        the slot is REMOVED and free, or will be once the sweep in progress ends (a walker
        without the lock may hold it, and follows its ``nxt``, which the free list would
        change); returns the record's length, ``n`` when the caller knows it, else -1 (Arena.free).
        With ``unlink`` the slot is unlinked from its list first, and its lane and the bytes
        in memory counted down (a take); without, the caller unlinked it and counts (a run).
        One function, so that a get's take is one call interpreted."""
        st = self._st
        s = st[i]
        hi = self._hi[i]
        if unlink:
            assert not s & REMOVED, f"slot {i} removed twice"
            lane: Lane = self.lanes[s & LANE_MASK]
            p = self._prv[i]
            nx = self._nxt[i]
            self._nxt[p] = nx
            self._prv[nx] = p
            if not s & HIDDEN:
                lane.ready -= 1
            lane.mem -= 1
            if hi & _BACK:
                self._hi[i] = hi & ~_BACK
                lane.back -= 1
            self._epoch += 1
        loc = self._low[i] if hi < 2 else self._loc(i)  # interpreted, no arithmetic
        if self.index is not None:
            self.index.discard(i, self._arena.read(loc))
        if self._items is not None:
            self._items[i] = None
        st[i] = s | REMOVED
        if self._defer:
            self._deferred.append(i)
        else:
            self._nxt[i] = self._free_head
            self._free_head = i
        n = self._arena.free(loc, n)
        if unlink:
            self.mem_bytes -= n
        return n

    def _take_run(self, refs: Sequence[Ref]) -> Lane:
        """:meth:`take` of a run."""
        first = refs[0].slot
        lane = self.lanes[self._st[first] & LANE_MASK]
        self._detach(lane, first, len(refs))
        return lane

    def _take_head(self, limit: int) -> tuple[bytearray, array, list | None, Lane] | None:
        """:meth:`take` of ``limit``: take for good the run of available messages at the head
        of the highest lane's front list (:meth:`head`), at most ``limit`` of them and none
        with an expiry (the get path discards an expired message: such a one ends the run),
        in one step. Returns (their records copied back to back into one ``bytearray``, where
        each ends in it, their items in order with None for a record without HAS_ITEM, or None
        when none has one, their lane); None when the head holds no such message, and the
        caller looks the get path's whole way. A batch get's hot path: no ref and no ``bytes``
        per message, each record copied once."""
        first = self._head()
        if first < 0:
            return None
        nxt, st, arena = self._nxt, self._st, self._arena
        k = 0
        total = 0
        i = first
        while k < limit and i >= SENTINELS and st[i] < AVAILABLE_BELOW:
            total += arena.length(self._loc(i))
            k += 1
            i = nxt[i]
        # Compiled, no zeroing: every byte up to the last end is written below.
        buf = PyByteArray_FromStringAndSize(cython.NULL, total) if COMPILED else bytearray(total)
        ends = array("I", bytes(4 * k))
        view = ends  # compiled: a typed view of the array's memory
        items: list | None = None
        at = 0
        i = first
        n = 0
        while n < k:
            size = arena.head(self._loc(i), buf, at, total)
            if buf[at + _OFF_FLAGS] & _HAS_EXPIRY:
                break  # the get path's expiry check takes it (the run ends before it)
            if self._items is not None and buf[at + _OFF_FLAGS] & _HAS_ITEM:
                if items is None:
                    items = [None] * k
                items[n] = self._items[i]
            at += size
            view[n] = at
            n += 1
            i = nxt[i]
        if not n:
            return None
        if n < k:
            ends = ends[:n]
            k = n
            if items is not None:
                items = items[:n]
        lane = self.lanes[st[first] & LANE_MASK]
        self._detach(lane, first, k)
        return buf, ends, items, lane

    def mark(self, ref: Ref | Sequence[Ref], flag: int) -> None:
        """The message keeps its place, invisible, marked with ``flag`` (engine/core/flags.py):

        * GOTTEN — a get under syncpoint, until commit (:meth:`take`) or backout
          (:meth:`restore`); ``ref`` may also be a run of available in-memory messages of
          one list (from :meth:`run_from`);
        * LOCKED — a browse lock: invisible to every other handle, never swept, until
          :meth:`unmark`;
        * BATCHED — assigned to a transmission batch (an available in-memory message): no
          get sees it and no sweep moves it (seed 003), until :meth:`unmark`."""
        if CHECKS:
            assert_held(self._mutex, "marking a message")
        if type(ref) is not Ref:
            self._hide_run(ref)  # type: ignore[arg-type]
            return
        r: Ref = ref
        slot = r.slot
        if slot >= 0:
            st = self._st
            if flag == GOTTEN:
                assert not st[slot] & (GOTTEN | UNCOMMITTED | REMOVED), f"slot {slot} hidden but not available"
                st[slot] |= GOTTEN
                self.lanes[st[slot] & LANE_MASK].ready -= 1
            else:
                assert flag in (LOCKED, BATCHED), f"no mark {flag:#x}"
                st[slot] |= flag
            self._epoch += 1
            return
        blob = r.blob
        assert blob is not None and flag != BATCHED, "only a message in memory joins a batch"
        if flag == GOTTEN:
            assert blob.flags[r.pos] in (POS_LIVE, POS_LOCKED), "hidden but not live"
            blob.flags[r.pos] = POS_GOTTEN
        else:
            blob.flags[r.pos] = POS_LOCKED
        blob.held[r.pos] = r

    def _hide_run(self, refs: Sequence[Ref]) -> None:
        """:meth:`mark` GOTTEN of a run of available in-memory messages of one list."""
        st = self._st
        for r in refs:
            st[r.slot] |= GOTTEN
        self.lanes[st[refs[0].slot] & LANE_MASK].ready -= len(refs)
        self._epoch += 1

    def restore(self, ref: Ref, backout: bool) -> tuple[bytes, bool]:
        """Undo :meth:`mark` GOTTEN in place (a backout), the backout count raised when
        ``backout``; a browse lock its holder's get ended does not come back. Returns the
        message's record as it is now and whether it is in memory (False: back in its blob,
        or its blob was found damaged meanwhile)."""
        if CHECKS:
            assert_held(self._mutex, "restoring a message")
        slot = ref.slot
        if slot >= 0:
            st = self._st
            assert st[slot] & GOTTEN and not st[slot] & REMOVED, f"slot {slot} restored but not hidden"
            if backout:  # in place: the record keeps its length, and the index's key stays
                loc = self._loc(slot)
                arena = self._arena
                count = arena.byte(loc, _OFF_BACKOUT) | (arena.byte(loc, _OFF_BACKOUT + 1) << 8)
                arena.set_backout(loc, count + 1)
            st[slot] &= ~(GOTTEN | LOCKED)
            self.lanes[st[slot] & LANE_MASK].ready += 1
            self._epoch += 1
            return self._rec(slot), True
        blob = ref.blob
        assert blob is not None
        rec = ref.rec
        if blob.damaged:
            return rec, False
        blob.flags[ref.pos] = POS_LIVE
        blob.held.pop(ref.pos, None)
        if backout:
            if blob.bumps is None:
                blob.bumps = {}
            blob.bumps[ref.pos] = blob.bumps.get(ref.pos, 0) + 1
            rec = record.with_backout(rec, record.backout_of(rec) + 1)
            ref.rec = rec
        return rec, False

    def unmark(self, ref: Ref, flag: int) -> bytes:
        """The message is visible again where it stands; returns its record. ``flag``:
        UNCOMMITTED — a put under syncpoint is committed; LOCKED — a browse lock ends;
        BATCHED — a released batch's message (in memory) is available again. (GOTTEN ends
        with :meth:`take` or :meth:`restore`.)"""
        if CHECKS:
            assert_held(self._mutex, "unmarking a message")
        slot = ref.slot
        if slot >= 0:
            st = self._st
            if flag == UNCOMMITTED:
                assert st[slot] & UNCOMMITTED, f"slot {slot} committed but not uncommitted"
                st[slot] &= ~UNCOMMITTED
                self.lanes[st[slot] & LANE_MASK].ready += 1
            else:
                assert flag in (LOCKED, BATCHED), f"no mark {flag:#x}"
                st[slot] &= ~flag
            self._epoch += 1
            return self._rec(slot)
        assert flag == LOCKED, "only a browse lock holds a message in a blob"
        blob = ref.blob
        assert blob is not None
        blob.flags[ref.pos] = POS_LIVE
        blob.held.pop(ref.pos, None)
        return ref.rec

    def lock_is(self, ref: Ref, seq: int) -> bool:
        """Whether ``ref`` still names a message with arrival number ``seq`` that a browse
        lock holds (and no unit of work: a get under syncpoint ends the lock)."""
        if CHECKS:
            assert_held(self._mutex, "checking a browse lock")
        slot = ref.slot
        if slot >= 0:
            st = self._st
            return (
                slot < len(st)
                and not st[slot] & REMOVED
                and self._seq(slot) == seq
                and st[slot] & (LOCKED | GOTTEN) == LOCKED
            )
        blob = ref.blob
        return blob is not None and not blob.damaged and blob.flag(ref.pos) == POS_LOCKED

    def _batched(self, ref: Ref) -> bool:
        """Whether the message is in memory and assigned to a batch (the core's tests ask)."""
        return ref.slot >= 0 and self._st[ref.slot] & (BATCHED | REMOVED) == BATCHED

    # -- the sweep (the walk without the lock; the rest with it) ----------------------------------

    def sweeping(self, on: bool) -> list[int] | None:
        """A sweep begins (``on``): every lane sends new messages to its rear list, and freed
        slots and arena blocks are held back until it ends; returns each lane's in-memory
        count, which bounds its rear run. It ends (not ``on``): lanes settle, and slots and
        blocks freed meanwhile are let go, the slots as one list (``_spare``), in O(1) under
        the lock, not one by one (a sweep of 100,000 messages freed as many, 1.4 ms of pushes
        in the hold that ended it); returns None."""
        if CHECKS:
            assert_held(self._mutex, "beginning or ending a sweep")
        if on:
            for lane in self.lanes:
                lane.sweeping += 1
            self._defer += 1
            self._arena.defer()
            self._sweep_epoch = self._epoch
            return [lane.mem for lane in self.lanes]
        for lane in self.lanes:
            lane.sweeping -= 1
            self._settle(lane)
        self._defer -= 1
        self._arena.release()
        if not self._defer and self._deferred:
            self._spare.append(self._deferred)
            self._deferred = []
        return None

    def paging(self, on: bool) -> None:
        """The queue pages under its memory budget (``on``): new messages go to the rear
        lists; or paging ends, and they take their usual place again."""
        if CHECKS:
            assert_held(self._mutex, "paging")
        for lane in self.lanes:
            if on:
                lane.sweeping += 1
            else:
                lane.sweeping -= 1
                self._settle(lane)

    def sweep_runs(
        self, rear_limits: Sequence[int], choose: Callable[[list[int], list[int]], tuple[list[int], list[int]]]
    ) -> list[tuple[Lane, list[int], array, list[int], array]]:
        """The runs a sweep may move, chosen *without the lock* (see the module docstring):
        the walk (:meth:`_sweep_walk`) counts each lane's sweepable front messages and finds
        its rear list's sweepable head (at most ``rear_limits[lane]``); ``choose(sweepable,
        rear lengths)`` (the sweeper's rule, engine/tiering.py) says how many of each lane's
        front to keep and how many of its rear head to move. Returns, per lane from the
        highest, (lane, its front run: the all-sweepable stretch at the list's tail after the
        kept ones, the lengths of its records, its rear run, the lengths of its records). Only
        a choice: :meth:`move_run` verifies it under the lock."""
        fronts, rears, sweepable = self._sweep_walk(rear_limits)
        kept, moved = choose(sweepable, [len(r) for r in rears])
        out = []
        for lane in reversed(self.lanes):
            p = lane.priority
            run: list[int] = []
            remaining = kept[p]
            for i in fronts[p]:
                if self._sweepable(i):
                    if remaining:
                        remaining -= 1
                    else:
                        run.append(i)
                elif run:
                    run = []  # only the stretch after an unsweepable message can move
            rear = rears[p][: moved[p]]
            out.append((lane, run, self._run_sizes(run), rear, self._run_sizes(rear)))
        return out

    def _sweep_walk(self, rear_limits: Sequence[int]) -> tuple[list[list[int]], list[list[int]], list[int]]:
        """The sweeper's walk, without the lock: each lane's front list (all of its slots),
        its rear list's sweepable head (at most ``rear_limits[lane]``) and the number of
        sweepable messages of its front list."""
        nxt, st = self._nxt, self._st  # whole arrays: growth makes new ones
        cap = len(nxt)
        fronts = []
        sweepable = []
        rears = []
        for lane in self.lanes:
            front: list[int] = []
            ok = 0
            i = nxt[lane.front]
            while i != lane.front and SENTINELS <= i < cap and len(front) < cap:
                front.append(i)
                ok += st[i] < AVAILABLE_BELOW
                i = nxt[i]
            fronts.append(front)
            sweepable.append(ok)
            rear: list[int] = []
            limit = rear_limits[lane.priority]
            i = nxt[lane.rear]
            while i != lane.rear and SENTINELS <= i < cap and len(rear) < limit and st[i] < AVAILABLE_BELOW:
                rear.append(i)
                i = nxt[i]
            rears.append(rear)
        return fronts, rears, sweepable

    def _sweepable(self, slot: int) -> bool:
        """Whether a slot the walk found may move (available now; verified again later)."""
        return self._st[slot] < AVAILABLE_BELOW

    def snapshot(self, slots: Sequence[int], encode: Callable[[object], bytes] | None = None) -> list[bytes]:
        """The records of a run the walk chose, read without the lock: a slot emptied
        meanwhile gives ``b""``, which fails :meth:`move_run`'s check. An item's record comes with
        the item's encoding as its payload (engine/record.py ``with_payload``): what the
        blob will hold (``encode``: the queue's, engine/tiering.py ``QueueTier.encode``; None
        gives ``b""``). An item ``encode`` cannot encode also gives ``b""``: that run stays
        in memory."""
        st = self._st
        out = [b"" if st[i] & REMOVED else self._rec(i) for i in slots]
        items = self._items
        if items is not None:
            for k, rec in enumerate(out):
                if rec and rec[_OFF_FLAGS] & _HAS_ITEM:
                    out[k] = _encoded(rec, items[slots[k]], encode)
        return out

    def _run_sizes(self, slots: Sequence[int]) -> array:
        """What each message of a run weighs in memory (0 for one taken meanwhile), read
        without the lock and without copying a record (8 bytes a message): how a sweep cuts
        the run into pieces of whole blobs, and what the budget counts a sweep would move
        (copying the records to count them doubled memory for a moment). A record's length,
        and for an item kept as an object (``sweepq.Queue``'s) the item's estimate too
        (engine/sizes.py ``item_bytes``), whose encoding the sweep makes as it copies the
        piece: an item's record is its header alone, and cut by those lengths one piece of
        1 KiB items held 26,000 of them, 30 MB encoded at once while the items were held."""
        st, arena, items = self._st, self._arena, self._items
        out = array("q", bytes(8 * len(slots)))
        for k, i in enumerate(slots):
            if not st[i] & REMOVED:
                out[k] = arena.length(self._loc(i))
                if items is not None:
                    out[k] += item_bytes(items[i])
        return out

    def precheck_run(self, lane: Lane, slots: Sequence[int], recs: Sequence[bytes], at_head: bool) -> bool:
        """Whether :meth:`move_run`'s check would pass the run, read *without* the lock by the sweep
        about to link it (the walk's rules of the module docstring make the read safe). Its
        answer is only as good as the moment: :meth:`move_run` takes it under the lock when
        nothing changed since the sweep's last hold (``prechecked``)."""
        return self._verify(lane, slots, recs, at_head) is None

    def move_run(
        self,
        lane: Lane,
        slots: Sequence[int],
        recs: Sequence[bytes],
        blob: SweptBlob | None,
        at_head: bool,
        prechecked: bool,
        link: Callable[[], str | None],
    ) -> tuple[str | None, int]:
        """Move a run the sweep wrote into ``blob`` out of memory (lock held): verify it, then
        ``link()`` (the store's write that links the blob into its chain, the move's commit
        point; it returns an abort reason or None), then take the run off the lane and put
        the blob in the chain, at its head or tail. Returns (why the run could not move, or
        None; how many of its messages had come back from a blob before: the adaptive
        rule's re-sweeps). ``blob`` None: its records could not be indexed (a slot emptied
        after the choice), "removed" unless the check names another reason.

        The check: every message still available with the record that was written (a
        backout since raised its count), the run still contiguous, and still at the end of
        its list that it leaves from (its front's tail for a blob linked at the chain's
        head, its rear's head otherwise). The reasons are the sweep's abort reasons (seed
        003: removed, gotten, locked, batch_changed; moved).

        ``prechecked``: :meth:`precheck_run` passed the run after the sweep's last hold of
        the lock (its begin, or its last move). When ``_epoch`` has not moved since that
        hold, no message in memory changed but by appends at the end of a list, which no
        run depends on (while a sweep runs, appends go to the rear lists, behind a rear
        run's head), so the precheck's answer stands and the check is O(1); any change since
        sends the run through the whole check again, here."""
        if CHECKS:
            assert_held(self._mutex, "moving a swept run")
        reason = None if prechecked and self._epoch == self._sweep_epoch else self._verify(lane, slots, recs, at_head)
        if reason is None and blob is None:
            reason = "removed"
        if reason is None:
            reason = link()
        if reason is not None:
            return reason, 0
        assert blob is not None  # else "removed" above
        again = self._detach(lane, slots[0], len(slots))
        lane.swept += len(slots)
        if at_head:
            lane.chain.appendleft(blob)
        else:
            lane.chain.append(blob)
        self._sweep_epoch = self._epoch  # the end of this hold of the sweep: see above
        return None, again

    def _verify(self, lane: Lane, slots: Sequence[int], recs: Sequence[bytes], at_head: bool) -> str | None:
        """:meth:`move_run`'s whole check, O(run)."""
        st, nxt, prv, arena = self._st, self._nxt, self._prv, self._arena
        prev = -1
        for i, rec in zip(slots, recs, strict=True):
            s = st[i]
            if s >= AVAILABLE_BELOW:
                return abort_reason(s, True)
            loc = self._loc(i)
            if len(rec) <= _OFF_BACKOUT + 1 or (
                arena.byte(loc, _OFF_BACKOUT) != rec[_OFF_BACKOUT]
                or arena.byte(loc, _OFF_BACKOUT + 1) != rec[_OFF_BACKOUT + 1]
            ):
                return abort_reason(s, False)  # got and backed out meanwhile: its record changed
            if prev >= 0 and nxt[prev] != i:
                return "moved"
            prev = i
        if at_head:
            return None if nxt[slots[-1]] == lane.front else "moved"
        return None if prv[slots[0]] == lane.rear else "moved"

    def _detach(self, lane: Lane, first: int, k: int) -> int:
        """Take the contiguous run of ``k`` available messages of ``lane`` from slot ``first``
        on off its list; returns how many had come back from a blob."""
        assert k > 0, "an empty run"
        hi = self._hi
        nxt, prv = self._nxt, self._prv
        p = prv[first]
        i = first
        again = 0
        nbytes = 0
        for _ in range(k):
            j = nxt[i]  # before _remove, which may link i into the free list
            if hi[i] & _BACK:
                hi[i] &= ~_BACK
                again += 1
            nbytes += self._remove(i, -1, False)
            i = j
        nxt[p] = i
        prv[i] = p
        lane.back -= again
        lane.mem -= k
        lane.ready -= k
        self.mem_bytes -= nbytes
        self._epoch += 1
        return again

    def splice_blob(
        self, lane: Lane, blob: SweptBlob, live: list[bytes], positions: list[int] | None, nbytes: int
    ) -> Ref | None:
        """Bring the chain's first blob back: its ``live`` records (from :meth:`survivors`)
        are appended to the front list (invariant 4); a message a unit of work or a browse
        lock holds comes back hidden or locked, and its ref moves to its new slot. When it
        was the last blob, the rear list joins the front. Returns the first available
        message from the first that came back to the end of the front list, or None."""
        if CHECKS:
            assert_held(self._mutex, "unsweeping")
        assert lane.chain and lane.chain[0] is blob, "only the chain's first blob comes back"
        held = blob.held
        state = lane.priority
        first = -1
        for k, rec in enumerate(live):
            s = state
            if held:
                f = blob.flag(positions[k])  # type: ignore[index]  # positions are given with held ones
                s = state | (GOTTEN if f == POS_GOTTEN else LOCKED if f == POS_LOCKED else 0)
            i = self.append(lane, lane.front, rec, s, 0, 0)
            self._hi[i] |= _BACK
            if first < 0:
                first = i
            if s != state:
                held.pop(positions[k]).came_back(i)  # type: ignore[index]
        lane.back += len(live)
        self._epoch += 1  # appended to the front list, where a front run must be the tail
        assert not held, f"blob {blob.blob_id}: a held position was neither gotten nor locked"
        blob.unswept = True
        if blob.prefetch is not None or blob.loaded is not None:
            lane.ahead = max(0, lane.ahead - blob.live)
        blob.loaded = None
        blob.prefetch = None
        lane.chain.popleft()
        lane.swept -= len(live)
        self._settle(lane)  # the last blob back: the rear list joins the front
        if first < 0:
            return None
        st, nxt, i = self._st, self._nxt, first
        while i != lane.front:
            if st[i] < AVAILABLE_BELOW:
                return Ref.at(i)
            i = nxt[i]
        return None

    def quarantine(self, lane: Lane, blob: SweptBlob) -> int:
        """A damaged blob leaves the chain (kept in the store for inspection); every other
        blob of the queue stays reachable. Returns the messages it took with it."""
        if CHECKS:
            assert_held(self._mutex, "quarantining a blob")
        if blob not in lane.chain:
            return 0  # another get got here first
        lane.chain.remove(blob)
        lane.swept -= blob.live
        blob.damaged = True
        blob.held.clear()
        self._settle(lane)
        return blob.live

    def _settle(self, lane: Lane) -> None:
        """Once the chain is empty and nothing sends messages to the rear (no sweep runs, the
        queue does not page), the rear list joins the front (invariant 1)."""
        if lane.chain or lane.sweeping:
            return
        nxt, prv = self._nxt, self._prv
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
        self._epoch += 1

    # -- housekeeping (once an interval, the sweeper) -----------------------------------------------

    def shrink(self) -> bool:
        """Give back memory a queue no longer needs, when no sweep runs: the records of
        mostly-dead arena blocks move together, so that those blocks go back (the arena is
        fragmented when messages left out of order), and the slot arrays of a queue whose
        backlog left memory (drained, or swept: the point of sweeping is to return that
        memory) shrink. Returns whether the arrays shrank.

        Moving records keeps every slot. Shrinking the arrays renumbers the slots still in
        memory, in order: it runs only when no ref holds a slot, that is with no message
        hidden (a unit of work holds it), batched or locked, and only when the arrays are
        over 8 times what is in memory."""
        if CHECKS:
            assert_held(self._mutex, "shrinking")
        if self._defer:
            return False
        self._arena.trim()
        self._compact()
        count = sum(lane.mem for lane in self.lanes)
        cap = len(self._nxt)
        if cap <= _SHRINK_ABOVE or count * 8 > cap:
            return False
        if any(lane.mem != lane.ready for lane in self.lanes):
            return False  # hidden messages: a unit of work holds their slots
        st = self._st
        order = [(s, list(self._walk(s))) for lane in self.lanes for s in (lane.front, lane.rear)]
        if any(st[i] & (BATCHED | LOCKED) for _, slots in order for i in slots):
            return False  # a batch or a browse lock holds these slot numbers
        old_st, old_loc, old_hi, old_items = st, self._low, self._hi, self._items
        self._reset(max(_INITIAL, 1 << (2 * count + SENTINELS).bit_length()))
        j = SENTINELS
        for s, slots in order:
            prev = s
            for i in slots:
                self._st[j] = old_st[i]
                self._low[j] = old_loc[i]
                self._hi[j] = old_hi[i]
                if old_items is not None:
                    self._items[j] = old_items[i]  # type: ignore[index]  # _reset made it with the arrays
                self._prv[j] = prev
                self._nxt[prev] = j
                prev = j
                j += 1
            self._nxt[prev] = s
            self._prv[s] = prev
        self._free_head = j if j < len(self._nxt) else -1  # the lowest slots are taken now
        if self.index is not None:  # the slots were renumbered
            self.index.clear()
            for i in range(SENTINELS, j):
                self.index.add(i, self._rec(i))
        return True

    def _compact(self) -> None:
        """Move the records of mostly-dead arena blocks to the current one, when over half of
        what the arena holds is dead (slots stay; only their locations change)."""
        arena = self._arena
        if not arena.fragmented():
            return
        for i in self._in_memory():
            loc = self._loc(i)
            if arena.sparse(loc):
                new = arena.move(loc)
                self._low[i] = new & _LOW32
                self._hi[i] = ((new >> 32) << 1) | (self._hi[i] & _BACK)
                self._epoch += 1

    # -- reading --------------------------------------------------------------------------------------

    def set_index(self, index: SlotIndex | None) -> None:
        """Install ``index`` (None: none), filled with every message in memory."""
        if CHECKS:
            assert_held(self._mutex, "indexing")
        if index is not None:
            for i in self._in_memory():
                index.add(i, self._rec(i))
        self.index = index

    def _walk(self, sentinel: int) -> Iterator[int]:
        """The slots of one list in order (under the lock)."""
        nxt = self._nxt
        i = nxt[sentinel]
        while i != sentinel:
            j = nxt[i]  # read first: the caller may remove i
            yield i
            i = j

    def _in_memory(self) -> Iterator[int]:
        """Every in-memory slot in get order: lanes 9..0, each front then rear."""
        for lane in reversed(self.lanes):
            yield from self._walk(lane.front)
            yield from self._walk(lane.rear)

    def _records(self, lane: Lane, rear: bool = False) -> list[bytes]:
        """The records of ``lane``'s front (or rear) list in order (inspection and tests)."""
        return [self._rec(i) for i in self._walk(lane.rear if rear else lane.front)]

    def _messages(self) -> Iterator[tuple[Ref, bytes]]:
        """Every in-memory message in get order, as (ref, record): lanes 9..0, each front
        then rear."""
        for i in self._in_memory():
            yield Ref.at(i), self._rec(i)

    def _persistent_records(self, lane: Lane) -> list[bytes]:
        """The persistent records of ``lane`` in memory, front list then rear list, but for
        uncommitted puts (those have no durable record yet): what a checkpoint lists."""
        st = self._st
        return [
            self._rec(i)
            for sentinel in (lane.front, lane.rear)
            for i in self._walk(sentinel)
            if not st[i] & UNCOMMITTED and self._flags(i) & _PERSISTENT
        ]

    def any_hidden(self) -> bool:
        """Whether a unit of work holds any message (in memory, or in a blob)."""
        if CHECKS:
            assert_held(self._mutex, "looking for hidden messages")
        st = self._st
        return any(st[i] & HIDDEN for i in self._in_memory()) or any(
            (b.flags == POS_GOTTEN).any() for lane in self.lanes for b in lane.chain
        )

    # -- invariants ------------------------------------------------------------------------------

    def check(self) -> None:
        """Assert every invariant of the module docstring (O(capacity): for tests, the model
        checks and debugging, never on a hot path). The links agree both ways and every list
        ends at its sentinel; each lane's counters equal what its lists and chain hold; a
        linked slot holds a record, its lane's bits and no REMOVED flag; a free slot is
        REMOVED and in no list; every slot is linked or free exactly once; the arena holds
        exactly the linked records' bytes; the index (if any) names exactly the linked slots'
        values; the chains are in arrival order, each blob live and its held positions held
        by refs that name it.

        :raises AssertionError: naming the first invariant broken."""
        if CHECKS:
            assert_held(self._mutex, "checking the core")
        nxt, prv, st = self._nxt, self._prv, self._st
        cap = len(nxt)
        assert len(prv) == len(st) == len(self._low) == len(self._hi) == cap, "arrays of different lengths"
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
            assert not mem or self._mask & lane.bit, f"lane {lane.priority} holds messages, its mask bit is clear"
            assert lane.sweeping >= 0, f"lane {lane.priority}: sweeping {lane.sweeping}"
            if not lane.chain and not lane.sweeping:
                assert nxt[lane.rear] == lane.rear, f"lane {lane.priority}: rear list without chain or sweep"
            self._check_chain(lane)
        assert mem_bytes == self.mem_bytes, f"mem_bytes {self.mem_bytes} but the records hold {mem_bytes}"
        free = list(self._deferred)
        for part in self._spare:
            assert part, "an empty list of spare slots"
            free += part
        i = self._free_head
        while i >= 0 and len(free) <= cap:
            free.append(i)
            i = nxt[i]
        assert len(set(free)) == len(free), "a slot is free twice"
        assert not linked & set(free), "a linked slot is also free"
        assert len(linked) + len(free) == cap - SENTINELS, "slots neither linked nor free"
        assert all(st[i] & REMOVED for i in free), "a free slot is not REMOVED"
        arena = self._arena
        live = sum(arena.footprint(self._loc(i)) for i in linked)
        assert live == sum(arena.live), f"the arena holds {sum(arena.live)} live bytes, the slots' records {live}"
        if self.index is not None:
            expect: dict = {}
            for i in linked:
                k = self.index.key(self._rec(i))
                if k is not None:
                    expect.setdefault(k, set()).add(i)
            got = {k: ({v} if type(v) is int else set(v)) for k, v in self.index.map.items() if v}
            assert got == expect, "the index does not name exactly the linked slots"

    def _check_list(self, lane: Lane, s: int, linked: set[int], counts: list[int]) -> int:
        """Walk one list, checking links and slots; add to ``counts``; return its bytes."""
        nxt, prv, st = self._nxt, self._prv, self._st
        nbytes = 0
        i, prev = nxt[s], s
        steps = 0
        while i != s:
            steps += 1
            assert steps <= len(nxt), f"list of sentinel {s} does not end"
            assert i >= SENTINELS and i not in linked, f"slot {i} linked twice or a sentinel inside a list"
            assert prv[i] == prev, f"slot {i}: prv {prv[i]} but reached from {prev}"
            state = st[i]
            assert state & LANE_MASK == lane.priority, f"slot {i} in lane {lane.priority} says lane {state & 15}"
            assert not state & REMOVED and state <= 0x1FF, f"slot {i}: bad state {state:#x}"
            linked.add(i)
            nbytes += self._arena.length(self._loc(i))
            counts[0] += 1
            counts[1] += not state & HIDDEN
            counts[2] += self._hi[i] & _BACK
            prev, i = i, nxt[i]
        assert prv[s] == prev, f"sentinel {s}: prv {prv[s]} but the list ends at {prev}"
        return nbytes

    @staticmethod
    def _check_chain(lane: Lane) -> None:
        """Each lane's ``swept`` is the live messages of its blobs; a blob in a chain is
        neither unswept nor damaged, holds at least one live message, and its flags are
        valid; its held positions are GOTTEN or LOCKED and held by refs naming them; blobs
        follow each other in arrival order."""
        live = 0
        last_seq = -1
        for blob in lane.chain:
            assert not blob.unswept and not blob.damaged, f"blob {blob.blob_id} left, but is still chained"
            n = int((blob.flags != POS_REMOVED).sum())
            assert blob.live == n, f"blob {blob.blob_id}: live {blob.live} but {n} positions not removed"
            assert n, f"blob {blob.blob_id} is empty but still chained"
            assert int(blob.flags.max(initial=0)) <= POS_LOCKED, f"blob {blob.blob_id}: bad position flag"
            for pos, ref in blob.held.items():
                assert blob.flag(pos) in (POS_GOTTEN, POS_LOCKED), f"blob {blob.blob_id}: {pos} held but not hidden"
                assert ref.blob is blob and ref.pos == pos, f"blob {blob.blob_id}: the ref of {pos} names another"
            assert blob.seq_min > last_seq, f"blob {blob.blob_id} out of arrival order in lane {lane.priority}"
            last_seq = blob.seq_max
            live += n
        assert lane.swept == live, f"lane {lane.priority}: swept {lane.swept} but {live} live in its chain"

    # -- bulk reading (the checkpoint) ----------------------------------------------------------------

    def persistent(self, lane: Lane, width: int) -> list[bytes] | tuple[bytes, int]:
        """The persistent records of ``lane`` in memory, front list then rear list, but for
        uncommitted puts (those have no durable record yet): what a checkpoint lists. With
        ``width`` 0, the records; else only their first ``width`` bytes (zero-padded where one
        is shorter), back to back, and how many: what a checkpoint reads of a lane
        (engine/durable/ledger.py), without a copy of every record."""
        if CHECKS:
            assert_held(self._mutex, "listing persistent records")
        return self._persistent_heads(lane, width) if width else self._persistent_records(lane)

    def _persistent_heads(self, lane: Lane, width: int) -> tuple[bytes, int]:
        """The first ``width`` bytes of each record :meth:`_persistent_records` gives (zero-padded
        where one is shorter), back to back, and how many: what a checkpoint reads of a lane
        (engine/durable/ledger.py), without a copy of every record."""
        out = bytearray(width * lane.mem)
        at = 0
        for sentinel in (lane.front, lane.rear):
            i = self._nxt[sentinel]
            while i != sentinel:
                s = self._st[i]
                if not s & UNCOMMITTED and self._flags(i) & _PERSISTENT:
                    self._arena.head((self._hi[i] >> 1) * _HI_UNIT | self._low[i], out, at, width)
                    at += width
                i = self._nxt[i]
        return bytes(memoryview(out)[:at]), at // width if width else 0


def add_item(ls: LaneSet, lane: Lane, state: int, seq: int, put_us: int, priority: int, item: object) -> int:
    """:meth:`LaneSet.add` of one item with no ref kept: ``sweepq.Queue``'s put in memory, its
    hot path. The item's record (engine/record.py ``item_head`` of ``seq``, ``put_us`` and
    ``priority``) is written straight into the arena from its fields
    (:meth:`Arena.store_plain`), never made as ``bytes``; a queue with an index, which reads
    the record, takes it through :meth:`LaneSet.add`. Returns 0. A function of the core's
    module beside the class, not a method, so that LaneSet's door keeps its names
    (tests/test_core_door.py)."""
    if CHECKS:
        assert_held(ls._mutex, "placing an item")
    if ls.index is not None:
        ls.add(lane, record.item_head(seq, put_us, priority), state, False, (item,))
        return 0
    if ls._items is None:
        ls._items = [None] * len(ls._nxt)
    loc = ls._arena.store_plain(seq, put_us, priority, _HAS_ITEM, b"")
    slot = ls.append(lane, -1, None, state, loc, _HEAD_LEN)
    ls._items[slot] = item  # made above (append may grow it: set after)
    return 0


def _encoded(rec: bytes, item: object, encode: Callable[[object], bytes] | None) -> bytes:
    """``rec`` (an item's) with ``item``'s encoding as its payload, or ``b""``."""
    if encode is None:
        return b""
    try:
        return record.with_payload(rec, encode(item))
    except Exception:
        return b""


def _views(*arrays: array | bytearray) -> tuple:
    """The slot arrays as they are held: compiled, a memoryview of each of ``arrays``, typed
    views of the memory (15 bytes a slot in all); interpreted, a list of each, whose items
    the interpreter reads and writes in its own specialised instructions, where an item of a
    memoryview costs two C calls and a conversion each way (about 200 instructions more; a
    put+get pair touches them about 22 times). The lists cost memory: a pointer a slot in
    each, and an int object for most values of the four int arrays, about 130 bytes a slot
    in all (docs/queue.md, "The interpreted form")."""
    if COMPILED:
        return tuple([memoryview(a) for a in arrays])
    return tuple([list(a) for a in arrays])


def _ints(lo: int, hi: int) -> array:
    """``array("i", range(lo, hi))``, made by numpy: the array's own constructor converts
    one Python int at a time (most of the time of a million-record reopen's slot arrays)."""
    return array("i", np.arange(lo, hi, dtype=np.intc).tobytes())


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
