# Types of engine/getpath.py for its compiled form (Cython pure-Python mode).
cimport cython

from . cimport record
from .core.ref cimport Ref
from .handlestate cimport HandleState
from .message cimport Message
from .queue cimport LocalQueue

cdef bint CHECKS
cdef int _SYNC, _SYNC_IF_PERSISTENT, _WAIT, _ACCEPT_TRUNCATED, _MARK_SKIP, _FLAGS, _HLEN
cdef int _HAS_EXPIRY, _EXPIRY_OR_ITEM, _HAS_GROUP, _HAS_ITEM, _PERSISTENT, _TRUNCATED_FAILED, _TRUNCATED_ACCEPTED, _OUTCOME_PENDING

cpdef bint in_uow(int opts, bytes rec) except -1
@cython.locals(h=Py_ssize_t, m=Message, flags=int)
cpdef Message deliver(HandleState s, bytes rec, object buffer_length, int opts, Ref ref=*)
cpdef bint take_one_locked(LocalQueue q, Ref ref, bytes rec, bint joins, bint journaled=*) except -1
@cython.locals(reason=int)
cpdef int finish(HandleState s, LocalQueue q, object refs, bint joins, bint durable, bint mark_skip=*) except -1
@cython.locals(q=LocalQueue, msg=Message, rec=bytes, joins=bint, durable=bint, pending=int, h=Py_ssize_t)
cpdef object get(HandleState s, int opts, object wait_interval, object buffer_length, object m)
@cython.locals(q=LocalQueue)
cpdef object take_item(HandleState s, object decode, object empty, object whole)
@cython.locals(ref=object, rec=bytes)
cdef object _take_other(HandleState s, LocalQueue q, object decode, object empty, object whole)
