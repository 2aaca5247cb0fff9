"""Message records in shared byte blocks: the queue core's storage of in-memory records.

A record (engine/record.py) lives in one *page* of the arena: a ``bytearray`` of
:data:`PAGE` bytes (or, for a record larger than that, a block of its own size), behind a
little-endian base-128 length (one byte for a record under 128 bytes, two under 16 KiB). A
*location* names it: its page index times :data:`PAGE`, plus its offset. Records are
written at the end of the current page (bump allocation) and never move but by
:meth:`Arena.move`; a page whose every record was freed is given back (the last few are
kept, to be written again), and the current page, once empty, is written again from its
start, so that a queue that drains as it fills touches the same few cache lines. A queued
message costs its record and one or two bytes, with no Python object and no allocator header
of its own; a backlog frees its memory page by page as it drains.

Reads may run without the queue's lock (the sweeper's walk, engine/core/lanes.py): while a
sweep runs (:meth:`Arena.defer`), no page is given back or written again from its start, so
a location read there still holds the bytes it held, perhaps of a record freed since, which
the sweep's verification catches.

The compiled form (Cython, engine/core/arena.pxd) copies with ``memcpy``; the interpreted one
slices the ``bytearray``: the two branches of :meth:`Arena.store` and :meth:`Arena.read` are
the only places they differ, and the tests run both forms.
"""

from __future__ import annotations

import struct
from array import array

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls (the interpreted one slices)
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy

PAGE_SHIFT = 18
PAGE = 1 << PAGE_SHIFT  # 256 KiB: the last page of a queue wastes on average half of this
OFF_MASK = PAGE - 1
POOL = 2  # emptied blocks kept for reuse
SEQ_AT = 5  # engine/record.py OFF_SEQ
BACKOUT_AT = 3  # engine/record.py OFF_BACKOUT
HEAD_LEN = 21  # engine/record.py HEAD_LEN, the header :meth:`Arena.store_plain` writes
_HEAD = struct.Struct("<BBBHQq")  # engine/record.py HEAD (the interpreted form packs with it)
# The compiled form's C copies (arena.pxd types them; the names above stay Python objects).
_PAGE_SHIFT, _PAGE, _OFF_MASK, _POOL, _SEQ_AT, _BACKOUT_AT = PAGE_SHIFT, PAGE, OFF_MASK, POOL, SEQ_AT, BACKOUT_AT
_HEAD_LEN = HEAD_LEN


class Arena:
    """The records of one queue (see the module docstring). Not thread-safe: its owner, the
    queue core, calls it with the queue's lock held, or reads it in a deferred sweep."""

    __slots__ = ("_defer", "blocks", "cur", "dead", "doomed", "held", "live", "pool", "reused", "spare", "top", "used")

    def __init__(self) -> None:
        self.blocks: list[bytearray | None] = []  # page index -> its block, None once given back
        self.live = _counters(16)  # bytes of live records (with their lengths) per page
        self.used = _counters(16)  # bytes written to each page (both grow with blocks)
        self.spare: list[int] = []  # page indices given back, to reuse
        # Emptied blocks kept to be written again (at most _POOL): a queue that drains as it
        # fills then cycles through the same few blocks, warm in the cache, with no allocation
        # and no page faults of fresh memory.
        self.pool: list[bytearray] = []
        self.reused = 0  # blocks taken from the pool since the last trim
        self.doomed: list[int] = []  # pages emptied during a sweep: given back at its end
        self.cur = -1  # the page records are written to
        self.top = _PAGE  # where the next record goes in it (PAGE: full, take a new one)
        self.held = 0  # bytes of the blocks held
        self.dead = 0  # bytes of freed records in blocks still held
        self._defer = 0

    # -- writing and freeing (lock held) -----------------------------------------------------------

    # A put+get pair's lines (issue 30), without a bounds or wraparound check at each index
    # (a compare, a branch and an error exit each): they index blocks, live and used only with
    # a location's page, or the current one, within them by invariant and never negative; the
    # arrays are made in __init__. (mypy still checks them: typings/cython.pyi.)
    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def store(self, rec: bytes | None, n: int = 0) -> int:
        """Write ``rec`` behind its length and return its location; ``rec`` None: make room
        for a record of ``n`` bytes, its length written before it, which the caller writes
        (:meth:`store_plain`). One function, so that a put's record costs one call."""
        if rec is not None:
            n = len(rec)
        lenlen = 1 if n < 0x80 else (2 if n < 0x4000 else (3 if n < 0x200000 else 4))
        need = lenlen + n
        if need > _PAGE:
            page = self._page(need)  # a block of its own
            off = 0
        else:
            if self.top + need > _PAGE:
                self.cur = self._page(_PAGE)
                self.top = 0
            page = self.cur
            off = self.top
            self.top = off + need
        blk = self.blocks[page]
        if COMPILED:
            p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(blk))
            k = off
            v = n
            while v >= 0x80:
                p[k] = (v & 0x7F) | 0x80
                v >>= 7
                k += 1
            p[k] = v
            if rec is not None:
                memcpy(p + off + lenlen, PyBytes_AS_STRING(rec), n)
        elif lenlen == 1:  # nearly always: the length is its own one byte
            blk[off] = n  # type: ignore[index]
            if rec is not None:
                blk[off + 1 : off + need] = rec  # type: ignore[index]
        else:
            v = n
            k = off
            while v >= 0x80:
                blk[k] = (v & 0x7F) | 0x80  # type: ignore[index]
                v >>= 7
                k += 1
            blk[k] = v  # type: ignore[index]
            if rec is not None:
                blk[off + lenlen : off + need] = rec  # type: ignore[index]
        self.live[page] += need
        self.used[page] += need
        return (page << _PAGE_SHIFT) | off

    @cython.boundscheck(False)  # as store's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def store_plain(self, seq: int, put_us: int, priority: int, flags: int, payload: bytes) -> int:
        """Write the record engine/record.py ``plain`` makes of these fields and ``payload``
        (its header, then the payload) and return its location: the record is written here
        once, with no ``bytes`` of its own in between (a batch put's hot path)."""
        n = len(payload)
        size = _HEAD_LEN + n
        loc = self.store(None, size)
        at = (loc & _OFF_MASK) + (1 if size < 0x80 else (2 if size < 0x4000 else (3 if size < 0x200000 else 4)))
        blk = self.blocks[loc >> _PAGE_SHIFT]
        if COMPILED:
            p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(blk)) + at
            p[0] = _HEAD_LEN
            p[1] = priority
            p[2] = flags
            p[3] = 0
            p[4] = 0
            # little endian, as engine/record.py HEAD packs them (arena.pxd: one store each)
            sweepq_put_le64(p + _SEQ_AT, cython.cast(cython.ulonglong, seq))  # type: ignore[name-defined]  # noqa: F821
            sweepq_put_le64(p + _SEQ_AT + 8, cython.cast(cython.ulonglong, put_us))  # type: ignore[name-defined]  # noqa: F821
            if n:
                memcpy(p + _HEAD_LEN, PyBytes_AS_STRING(payload), n)
        else:
            # the block of a location store() just gave is held, never None
            _HEAD.pack_into(blk, at, _HEAD_LEN, priority, flags, 0, seq, put_us)  # type: ignore[arg-type]
            blk[at + _HEAD_LEN : at + _HEAD_LEN + n] = payload  # type: ignore[index]
        return loc

    def _page(self, size: int) -> int:
        """A new block of ``size`` bytes; its page index."""
        if size == _PAGE and self.pool:
            blk = self.pool.pop()  # held already
            self.reused += 1
        else:
            blk = bytearray(size)
            self.held += size
        if self.spare:
            page = self.spare.pop()
            self.blocks[page] = blk
        else:
            page = len(self.blocks)
            self.blocks.append(blk)
            if page >= len(self.live):  # new, larger counters, twice as many
                self.live, self.used = _counters(2 * page, self.live), _counters(2 * page, self.used)
        self.live[page] = 0
        self.used[page] = 0
        return page

    @cython.boundscheck(False)  # as store's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def free(self, loc: int, n: int) -> int:
        """The record at ``loc`` leaves; return its length. A page emptied is given back
        (once no sweep runs). ``n`` is its length when the caller read it (a get's copy of
        it), and its length's bytes are not read again; -1 when not."""
        page = loc >> _PAGE_SHIFT
        if n < 0:
            v = self._size(loc)
            n = v >> 3
            size = n + (v & 7)
        else:
            size = n + (1 if n < 0x80 else (2 if n < 0x4000 else (3 if n < 0x200000 else 4)))
        self.live[page] -= size
        self.dead += size
        if not self.live[page]:
            if page != self.cur:
                if self._defer:
                    self.doomed.append(page)
                else:
                    self._give_back(page)
            elif not self._defer:
                # The current page emptied (a queue that drains as it fills): write it again
                # from its start, so that such a queue touches the same few cache lines.
                self.dead -= self.used[page]
                self.used[page] = 0
                self.top = 0
        return n

    def _give_back(self, page: int) -> None:
        if self.live[page] or self.blocks[page] is None:
            return  # written to again since (a deferred page that became current)
        blk = self.blocks[page]
        if len(blk) == _PAGE and len(self.pool) < _POOL:  # type: ignore[arg-type]
            self.pool.append(blk)  # type: ignore[arg-type]  # still held
        else:
            self.held -= len(blk)  # type: ignore[arg-type]
        self.dead -= self.used[page]
        self.blocks[page] = None
        self.used[page] = 0
        self.spare.append(page)

    def defer(self) -> None:
        """A sweep begins: no page is given back until :meth:`release`."""
        self._defer += 1

    def release(self) -> None:
        """The sweep ended: give back the pages it kept."""
        self._defer -= 1
        if not self._defer:
            doomed, self.doomed = self.doomed, []
            for page in doomed:
                if page != self.cur:
                    self._give_back(page)

    def set_backout(self, loc: int, count: int) -> None:
        """Write a record's backout count in place (a backout raised it)."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        at = (loc & _OFF_MASK) + (self._size(loc) & 7) + _BACKOUT_AT
        count = min(count, 0xFFFF)
        blk[at] = count & 0xFF  # type: ignore[index]
        blk[at + 1] = count >> 8  # type: ignore[index]

    # -- reading (lock held, or a deferred sweep) ---------------------------------------------------

    @cython.boundscheck(False)  # as store's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def _size(self, loc: int) -> int:
        """The record's length times 8 plus the bytes of its length, at ``loc``."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        off = loc & _OFF_MASK
        if COMPILED:
            p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(blk))
            b = p[off]
        else:
            b = blk[off]  # type: ignore[index]
        if b < 0x80:
            return (b << 3) | 1
        n = 0
        shift = 0
        h = 0
        while True:
            # Compiled, a C read of the byte, where an index of the untyped block is a Python call
            # (an if, not a conditional expression: that would be typed as a Python object).
            if COMPILED:  # noqa: SIM108
                b = p[off + h]
            else:
                b = blk[off + h]  # type: ignore[index]
            n |= (b & 0x7F) << shift
            h += 1
            if b < 0x80:
                return (n << 3) | h
            shift += 7

    def length(self, loc: int) -> int:
        """The length of the record at ``loc``."""
        return self._size(loc) >> 3

    def footprint(self, loc: int) -> int:
        """The bytes the record at ``loc`` takes in its block, its length's bytes included."""
        v = self._size(loc)
        return (v >> 3) + (v & 7)

    def read(self, loc: int) -> bytes:
        """A copy of the record at ``loc``."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        off = loc & _OFF_MASK
        if not COMPILED:  # interpreted, a call fewer for a one-byte length
            n = blk[off]  # type: ignore[index]
            if n < 0x80:
                # ``b"" +`` makes the slice bytes for half what bytes() costs (a type's call,
                # its arguments parsed).
                return b"" + blk[off + 1 : off + 1 + n]  # type: ignore[index]
        size = self._size(loc)
        off += size & 7
        n = size >> 3
        if COMPILED:
            return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(blk) + off, n)
        return bytes(blk[off : off + n])  # type: ignore[index]

    def head(self, loc: int, out: bytearray, at: int, width: int) -> int:
        """Copy the first ``width`` bytes of the record at ``loc`` (all of it when shorter)
        into ``out`` at ``at`` and return how many (a checkpoint reads a whole lane so, and a
        batch get its run's records, engine/core/lanes.py)."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        size = self._size(loc)
        off = (loc & _OFF_MASK) + (size & 7)
        n = min(size >> 3, width)
        if COMPILED:
            memcpy(PyByteArray_AS_STRING(out) + at, PyByteArray_AS_STRING(blk) + off, n)
        else:
            out[at : at + n] = blk[off : off + n]  # type: ignore[index]
        return n

    def byte(self, loc: int, k: int) -> int:
        """The ``k``-th byte of the record at ``loc`` (a header field, without a copy)."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        at = (loc & _OFF_MASK) + (self._size(loc) & 7) + k
        if COMPILED:
            return cython.cast(cython.p_uchar, PyByteArray_AS_STRING(blk))[at]
        return blk[at]  # type: ignore[index]

    @cython.boundscheck(False)  # as store's (see there)
    @cython.wraparound(False)
    @cython.initializedcheck(False)
    def sized_byte(self, loc: int, k: int) -> int:
        """:meth:`byte` ``k`` of the record at ``loc`` in the low eight bits, its length above
        them (length * 256 + byte): a get's look at the flags, whose length it then gives to
        :meth:`free`, which reads it no more."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        size = self._size(loc)
        at = (loc & _OFF_MASK) + (size & 7) + k
        if COMPILED:
            return (size >> 3) << 8 | cython.cast(cython.p_uchar, PyByteArray_AS_STRING(blk))[at]
        return (size >> 3) << 8 | blk[at]  # type: ignore[index]

    def seq(self, loc: int) -> int:
        """The arrival number of the record at ``loc`` (engine/record.py OFF_SEQ)."""
        blk = self.blocks[loc >> _PAGE_SHIFT]
        at = (loc & _OFF_MASK) + (self._size(loc) & 7) + _SEQ_AT
        return int.from_bytes(blk[at : at + 8], "little")  # type: ignore[index]

    def trim(self) -> None:
        """Give back the pooled blocks no write took since the last trim (once an interval:
        an idle queue keeps no spare memory, a busy one keeps cycling its blocks)."""
        if not self.reused:
            self.held -= sum(map(len, self.pool))
            self.pool = []
        self.reused = 0

    def fragmented(self) -> bool:
        """Whether moving the live records together would give back much memory: over half
        of what is held is dead, and that is more than four pages."""
        return self.dead > 4 * _PAGE and 2 * self.dead > self.held

    def sparse(self, loc: int) -> bool:
        """Whether the record at ``loc`` sits in a page mostly dead (a compaction moves it)."""
        page = loc >> _PAGE_SHIFT
        return page != self.cur and 4 * self.live[page] < self.used[page]

    def move(self, loc: int) -> int:
        """Write the record at ``loc`` again at the end of the current page and free it
        where it was; return its new location (a compaction, lock held, no sweep running)."""
        assert not self._defer, "records move only when no sweep runs"
        new = self.store(self.read(loc))
        self.free(loc, -1)
        return new


def _counters(n: int, old=None):
    """``n`` per-page counters, zero but the first ones, copied from ``old``. Compiled, a
    typed view of an ``array('q')`` (arena.pxd: C reads and writes); interpreted, a list,
    whose items the interpreter reads and writes in its own specialised instructions, where
    an item of a memoryview costs two C calls and a conversion each way (a put+get pair
    touches these counters six times)."""
    if COMPILED:
        out = array("q", bytes(8 * n))
        if old is not None:
            memoryview(out)[: len(old)] = memoryview(old)
        return memoryview(out)
    counts = [0] * n
    if old is not None:
        counts[: len(old)] = old
    return counts
