# Types of engine/core/lanes.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.
import cython

from .arena cimport Arena
from .ref cimport Ref

cdef int LANE_MASK, UNCOMMITTED, GOTTEN, LOCKED, BATCHED, REMOVED, HIDDEN, AVAILABLE_BELOW
cdef int N_LANES, SENTINELS, _INITIAL, _SHRINK_ABOVE, _OFF_FLAGS, _OFF_BACKOUT, _PERSISTENT, _HAS_ITEM, _BACK
cdef Py_ssize_t _LOW32, _HI_UNIT
cdef bint CHECKS
cdef bytes _TOP

cdef class Lane:
    cdef public int priority, bit, front, rear, sweeping
    cdef public Py_ssize_t ready, mem, swept, ahead, back
    cdef public object chain

cdef class LaneSet:
    cdef public object mutex, index, encode
    cdef public list lanes, deferred, spare, emptied, items
    cdef public Arena arena
    cdef public int mask
    cdef public Py_ssize_t mem_bytes, free_head, epoch, sweep_epoch
    cdef public int[::1] nxt, prv
    cdef public unsigned short[::1] st
    cdef public unsigned int[::1] loc
    cdef public unsigned char[::1] hi
    cdef Py_ssize_t _defer

    @cython.locals(i=Py_ssize_t)
    cdef _reset(self, Py_ssize_t n)
    @cython.locals(old=Py_ssize_t, n=Py_ssize_t)
    cdef _grow(self, Py_ssize_t need)
    cdef inline _check(self, str what)
    cdef inline Py_ssize_t _loc(self, Py_ssize_t i)
    cdef inline bytes _rec(self, Py_ssize_t i)
    @cython.locals(loc=Py_ssize_t)
    cdef inline _place(self, Py_ssize_t i, bytes rec)
    cdef inline object _seq(self, Py_ssize_t i)
    cdef inline int _flags(self, Py_ssize_t i) except -1
    @cython.locals(loc=Py_ssize_t)
    cdef Py_ssize_t _drop(self, Py_ssize_t i) except -1
    cdef inline _release(self, Py_ssize_t i)

    @cython.locals(slot=Py_ssize_t)
    cpdef bytes record(self, Ref ref)
    cpdef object item(self, Ref ref)
    @cython.locals(slot=Py_ssize_t)
    cpdef Lane lane_of(self, Ref ref)
    @cython.locals(slot=Py_ssize_t)
    cpdef object seq(self, Ref ref)
    @cython.locals(slot=Py_ssize_t)
    cpdef int flags(self, Ref ref) except -1
    @cython.locals(slot=Py_ssize_t, s=int, f=int)
    cpdef bint visible(self, Ref ref, object lk_seq=*) except -1
    cdef Ref _hit(self, Lane lane, object blob, Py_ssize_t pos, bytes rec)

    @cython.locals(s=int, slot=Py_ssize_t, k=Py_ssize_t)
    cpdef list add(self, Lane lane, object recs, int state, bint refs=*, object items=*)
    @cython.locals(i=Py_ssize_t, last=Py_ssize_t)
    cdef Py_ssize_t _append(self, Lane lane, int s, bytes rec, int state) except -1
    @cython.locals(i=Py_ssize_t)
    cdef Py_ssize_t _spare_slot(self) except -1

    @cython.locals(i=Py_ssize_t)
    cpdef Ref head(self)
    @cython.locals(mask=int, i=Py_ssize_t, lane=Lane)
    cdef Py_ssize_t _head(self)
    @cython.locals(s=int, i=Py_ssize_t)
    cpdef Ref first(self, Lane lane, bint rear, object match=*)
    @cython.locals(i=Py_ssize_t, j=Py_ssize_t)
    cpdef list run_from(self, Ref ref, Py_ssize_t limit)

    @cython.locals(front=int, i=Py_ssize_t, h=Py_ssize_t, s=int, last=Py_ssize_t, found=Py_ssize_t, end=Py_ssize_t)
    cpdef tuple browse_front(self, Lane lane, object after, object match, object lk_seq, Ref hint)
    @cython.locals(rear=int, last=Py_ssize_t, found=Py_ssize_t)
    cpdef Ref browse_rear(self, Lane lane, object after, object match, object lk_seq)
    @cython.locals(passed=bint, s=int, visible=bint)
    cdef (Py_ssize_t, Py_ssize_t) _scan(self, Py_ssize_t i, object after, object m, object lk_seq) except *
    @cython.locals(p=Py_ssize_t)
    cpdef Ref before(self, Ref ref)
    @cython.locals(h=Py_ssize_t)
    cpdef Ref at(self, Ref hint, object seq)

    @cython.locals(slot=Py_ssize_t)
    cpdef Lane take(self, Ref ref)
    @cython.locals(s=int, lane=Lane, p=Py_ssize_t, n=Py_ssize_t)
    cdef Lane _remove(self, Py_ssize_t i)
    cpdef Lane take_run(self, object refs)
    @cython.locals(slot=Py_ssize_t)
    cpdef hide(self, Ref ref)
    cpdef hide_run(self, object refs)
    @cython.locals(slot=Py_ssize_t, loc=Py_ssize_t, count=int)
    cpdef tuple restore(self, Ref ref, bint backout)
    @cython.locals(slot=Py_ssize_t)
    cpdef bytes commit_put(self, Ref ref)
    cpdef lock(self, Ref ref)
    cpdef bytes unlock(self, Ref ref)
    @cython.locals(slot=Py_ssize_t)
    cpdef bint lock_is(self, Ref ref, object seq) except -1
    cpdef bint batched(self, Ref ref) except -1
    cpdef assign(self, Ref ref)
    cpdef bytes release(self, Ref ref)

    @cython.locals(cap=Py_ssize_t, ok=Py_ssize_t, i=Py_ssize_t, limit=Py_ssize_t, lane=Lane)
    cpdef tuple sweep_walk(self, object rear_limits)
    cpdef bint sweepable(self, Py_ssize_t slot) except -1
    @cython.locals(i=Py_ssize_t, k=Py_ssize_t, items=list)
    cpdef list snapshot(self, object slots)
    cdef bytes _encoded(self, bytes rec, object item)
    @cython.locals(k=Py_ssize_t, i=Py_ssize_t)
    cpdef object run_sizes(self, object slots)
    cpdef bint precheck_run(self, Lane lane, object slots, object recs, bint at_head) except -1
    cpdef object verify_run(self, Lane lane, object slots, object recs, bint at_head, bint prechecked=*)
    @cython.locals(prev=Py_ssize_t, i=Py_ssize_t, s=int, loc=Py_ssize_t)
    cdef object _verify(self, Lane lane, object slots, object recs, bint at_head)
    cpdef Py_ssize_t detach_to(self, Lane lane, object slots, object blob, bint at_head) except -1
    @cython.locals(p=Py_ssize_t, n=Py_ssize_t, again=Py_ssize_t, nbytes=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t)
    cdef Py_ssize_t _detach(self, Lane lane, object slots) except -1
    @cython.locals(state=int, first=Py_ssize_t, s=int, f=int, i=Py_ssize_t, k=Py_ssize_t)
    cpdef Ref splice_blob(self, Lane lane, object blob, list live, object positions, Py_ssize_t nbytes)
    @cython.locals(r=int, first=Py_ssize_t, last=Py_ssize_t, f=int, tail=Py_ssize_t)
    cpdef settle(self, Lane lane)
    @cython.locals(loc=Py_ssize_t, new=Py_ssize_t)
    cdef _compact(self)
    @cython.locals(at=Py_ssize_t, i=Py_ssize_t, s=int, sentinel=Py_ssize_t)
    cpdef tuple persistent_heads(self, Lane lane, Py_ssize_t width)
