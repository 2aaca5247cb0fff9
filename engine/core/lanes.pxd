# Types of engine/core/lanes.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.
import cython

from .arena cimport Arena
from .lane cimport Lane
from .ref cimport Ref

cdef int LANE_MASK, UNCOMMITTED, GOTTEN, LOCKED, BATCHED, REMOVED, HIDDEN, AVAILABLE_BELOW
cdef int N_LANES, SENTINELS, _INITIAL, _SHRINK_ABOVE, _OFF_FLAGS, _OFF_BACKOUT, _PERSISTENT, _HAS_ITEM, _BACK
cdef int _ITEM_ONLY
cdef int _HAS_EXPIRY, _HEAD_LEN
cdef Py_ssize_t _LOW32, _HI_UNIT
cdef bint CHECKS
cdef bytes _TOP

@cython.final
cdef class LaneSet:
    # The door (tests/test_core_door.py): read-only fields outside the core, the rest private.
    cdef readonly object index
    cdef readonly list lanes
    cdef readonly Py_ssize_t mem_bytes
    # Private; readonly only so that the core's own tests (tests/test_lane.py) may look inside.
    cdef readonly object _mutex
    cdef readonly list _deferred, _spare, _emptied, _items
    cdef readonly Arena _arena
    cdef readonly int _mask
    cdef readonly Py_ssize_t _free_head, _epoch, _sweep_epoch
    cdef readonly int[::1] _nxt, _prv
    cdef readonly unsigned short[::1] _st
    cdef readonly unsigned int[::1] _low
    cdef readonly unsigned char[::1] _hi
    cdef Py_ssize_t _defer

    @cython.locals(i=Py_ssize_t)
    cdef _reset(self, Py_ssize_t n)
    @cython.locals(old=Py_ssize_t, n=Py_ssize_t)
    cdef _grow(self, Py_ssize_t need)
    cdef inline Py_ssize_t _loc(self, Py_ssize_t i)
    cdef inline bytes _rec(self, Py_ssize_t i)
    @cython.locals(loc=Py_ssize_t)
    cdef inline _place(self, Py_ssize_t i, bytes rec)
    cdef inline object _seq(self, Py_ssize_t i)
    cdef inline int _flags(self, Py_ssize_t i) except -1

    @cython.locals(slot=Py_ssize_t)
    cpdef bytes record(self, Ref ref)
    cpdef object item(self, Ref ref)
    @cython.locals(slot=Py_ssize_t)
    cpdef Lane lane_of(self, Ref ref)
    cdef Ref _hit(self, Lane lane, object blob, Py_ssize_t pos, bytes rec)

    @cython.locals(s=int, slot=Py_ssize_t, k=Py_ssize_t)
    cpdef list add(self, Lane lane, object recs, int state, bint refs=*, object items=*)
    @cython.locals(i=Py_ssize_t, k=Py_ssize_t, arena=Arena, seqs="unsigned long long[::1]", put_us=cython.longlong,
                   priority=int, flags=int, loc=Py_ssize_t)
    cdef _add_plain(self, Lane lane, int s, int state, object recs)
    @cython.locals(i=Py_ssize_t, last=Py_ssize_t)
    cpdef Py_ssize_t append(self, Lane lane, int s, bytes rec, int state, Py_ssize_t loc, Py_ssize_t n) except -1
    @cython.locals(i=Py_ssize_t)
    cdef Py_ssize_t _spare_slot(self) except -1

    @cython.locals(mask=int, i=Py_ssize_t, lane=Lane, rec=bytes, v=Py_ssize_t, loc=Py_ssize_t)
    cpdef object head(self, object miss=*, bint record=*, int refuse=*)
    @cython.locals(mask=int, i=Py_ssize_t, lane=Lane)
    cdef Py_ssize_t _head(self)
    @cython.locals(s=int, i=Py_ssize_t)
    cdef Ref _first(self, Lane lane, bint rear, object match=*)
    @cython.locals(ref=Ref)
    cpdef object find(self, object match, object unsweep)
    @cython.locals(i=Py_ssize_t, j=Py_ssize_t)
    cpdef list run_from(self, Ref ref, Py_ssize_t limit)

    @cython.locals(front=int, i=Py_ssize_t, h=Py_ssize_t, s=int, last=Py_ssize_t, found=Py_ssize_t, end=Py_ssize_t)
    cdef tuple _browse_front(self, Lane lane, object after, object match, object lk_seq, Ref hint)
    @cython.locals(rear=int, last=Py_ssize_t, found=Py_ssize_t)
    cdef Ref _browse_rear(self, Lane lane, object after, object match, object lk_seq)
    cpdef object browse(self, Lane lane, object after, object match, object lk_seq, Ref hint, object in_chain)
    @cython.locals(passed=bint, s=int, visible=bint)
    cdef (Py_ssize_t, Py_ssize_t) _scan(self, Py_ssize_t i, object after, object m, object lk_seq) except *
    @cython.locals(p=Py_ssize_t)
    cpdef Ref before(self, Ref ref)
    @cython.locals(h=Py_ssize_t, s=int)
    cpdef tuple at(self, Ref hint, object seq, object lk_seq)

    @cython.locals(slot=Py_ssize_t, owner=Lane)
    cpdef object take(self, object ref)
    cpdef list take_emptied(self)
    @cython.locals(s=int, lane=Lane, p=Py_ssize_t, nx=Py_ssize_t, hi=int, loc=Py_ssize_t)
    cdef Py_ssize_t _remove(self, Py_ssize_t i, Py_ssize_t n, bint unlink=*) except -1
    @cython.locals(first=Py_ssize_t)
    cdef Lane _take_run(self, object refs)
    @cython.locals(first=Py_ssize_t, k=Py_ssize_t, total=Py_ssize_t, i=Py_ssize_t, at=Py_ssize_t,
                   size=Py_ssize_t, n=Py_ssize_t, arena=Arena, buf=bytearray, ends=object, view="unsigned int[::1]",
                   items=list)
    cdef tuple _take_head(self, Py_ssize_t limit)
    @cython.locals(slot=Py_ssize_t)
    cpdef mark(self, object ref, int flag)
    cdef _hide_run(self, object refs)
    @cython.locals(slot=Py_ssize_t, loc=Py_ssize_t, count=int)
    cpdef tuple restore(self, Ref ref, bint backout)
    @cython.locals(slot=Py_ssize_t)
    cpdef bytes unmark(self, Ref ref, int flag)
    @cython.locals(slot=Py_ssize_t)
    cpdef bint lock_is(self, Ref ref, object seq) except -1
    cpdef bint _batched(self, Ref ref) except -1

    @cython.locals(cap=Py_ssize_t, ok=Py_ssize_t, i=Py_ssize_t, limit=Py_ssize_t, lane=Lane)
    cdef tuple _sweep_walk(self, object rear_limits)
    cdef bint _sweepable(self, Py_ssize_t slot) except -1
    @cython.locals(p=int, remaining=Py_ssize_t, i=Py_ssize_t, lane=Lane)
    cpdef list sweep_runs(self, object rear_limits, object choose)
    @cython.locals(i=Py_ssize_t, k=Py_ssize_t, items=list)
    cpdef list snapshot(self, object slots, object encode=*)
    @cython.locals(k=Py_ssize_t, i=Py_ssize_t)
    cdef object _run_sizes(self, object slots)
    cpdef bint precheck_run(self, Lane lane, object slots, object recs, bint at_head) except -1
    cpdef tuple move_run(self, Lane lane, object slots, object recs, object blob, bint at_head, bint prechecked, object link)
    @cython.locals(prev=Py_ssize_t, i=Py_ssize_t, s=int, loc=Py_ssize_t)
    cdef object _verify(self, Lane lane, object slots, object recs, bint at_head)
    @cython.locals(p=Py_ssize_t, j=Py_ssize_t, again=Py_ssize_t, nbytes=Py_ssize_t, i=Py_ssize_t)
    cdef Py_ssize_t _detach(self, Lane lane, Py_ssize_t first, Py_ssize_t k) except -1
    @cython.locals(state=int, first=Py_ssize_t, s=int, f=int, i=Py_ssize_t, k=Py_ssize_t)
    cpdef Ref splice_blob(self, Lane lane, object blob, list live, object positions, Py_ssize_t nbytes)
    @cython.locals(r=int, first=Py_ssize_t, last=Py_ssize_t, f=int, tail=Py_ssize_t)
    cdef _settle(self, Lane lane)
    @cython.locals(loc=Py_ssize_t, new=Py_ssize_t)
    cdef _compact(self)
    @cython.locals(at=Py_ssize_t, i=Py_ssize_t, s=int, sentinel=Py_ssize_t)
    cdef tuple _persistent_heads(self, Lane lane, Py_ssize_t width)
    cpdef object persistent(self, Lane lane, Py_ssize_t width)


cdef bytes _encoded(bytes rec, object item, object encode)

@cython.locals(slot=Py_ssize_t, loc=Py_ssize_t)
cpdef int add_item(LaneSet ls, Lane lane, int state, unsigned long long seq, long long put_us, int priority,
                   object item) except -1
