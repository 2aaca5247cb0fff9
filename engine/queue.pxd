# Types of engine/queue.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.
cimport cython

from .core.lane cimport Lane
from .core.lanes cimport LaneSet, add_item
from .core.lock cimport QueueLock
from .core.ref cimport Ref
from .waiting cimport Waiters

cdef bint CHECKS
cdef int _PERSISTENT
cdef int AVAILABLE_BELOW

@cython.final
cdef class LocalQueue:
    cdef dict __dict__
    cdef public str name
    cdef public object clock, journal, budget, ident, tier, attrs, index_field, cleanup, sweep, batches
    cdef public QueueLock mutex
    cdef public bytes key_prefix
    cdef public bint backout_handling, open_exclusive, deleted, temporary, fifo
    cdef public bint default_persistent, inhibit_get, inhibit_put, keeps_items
    cdef public Py_ssize_t id, depth, puts, obtained, expired, open_input, open_output, open_handles
    cdef public Py_ssize_t checked_bytes, max_depth, max_msg_length
    cdef public Py_ssize_t poison_limit
    cdef public int default_priority
    cdef public LaneSet lanes
    cdef public list lane_list
    cdef public Waiters waiters
    cdef public dict groups_started

    cpdef must_hold(self, str what)
    @cython.locals(out=list)
    cpdef list insert_locked(self, object recs, int lane_i, int state, bint refs=*, object items=*)
    cpdef insert_one_locked(self, bytes rec, int lane_i)
    cpdef int insert_item_locked(self, unsigned long long seq, long long put_us, int priority, int lane_i,
                                 object item) except -1
    cpdef object take_head_locked(self, object miss, bint record=*)
    cpdef object item_locked(self, Ref ref)
    @cython.locals(ls=LaneSet, ref=Ref, lane=Lane)
    cpdef object find_locked(self, object match=*)
    cpdef object find_run_locked(self, Py_ssize_t limit)
    @cython.locals(lane=Lane, k=Py_ssize_t)
    cpdef tuple take_run_locked(self, Py_ssize_t limit)
    cpdef bytes record_locked(self, Ref ref)
    @cython.locals(lane=Lane)
    cpdef remove_locked(self, Ref ref, bint durable=*)
    cpdef hide_locked(self, Ref ref)
