# Types of engine/putpath.py for its compiled form (Cython pure-Python mode).
cimport cython

from . cimport record
from .core.lock cimport QueueLock
from .handlestate cimport HandleState
from .message cimport PutResult, PutResults
from .queue cimport LocalQueue
from .sequence cimport Arrivals

# The kernel's coarse wall clock where the system has one (Linux), else the precise one.
cdef extern from *:
    """
    #include <time.h>
    #ifdef CLOCK_REALTIME_COARSE
    #define SWEEPQ_CLOCK_COARSE CLOCK_REALTIME_COARSE
    #else
    #define SWEEPQ_CLOCK_COARSE CLOCK_REALTIME
    #endif
    """
    const int SWEEPQ_CLOCK_COARSE

cdef int _PMO_SYNC, _PMO_NEW_MSG_ID, _PMO_NEW_CORREL_ID, _HEAD_LEN, _OUTCOME_PENDING, UNCOMMITTED
cdef object _TIME

@cython.locals(q=LocalQueue, n=Py_ssize_t, res=PutResult, syncpoint=int, priority=int, put_us=cython.longlong,
               mutex=QueueLock, rec=bytes)
cpdef object put(HandleState s, object data, object md, int opts)

@cython.locals(q=LocalQueue, put_us=cython.longlong, mutex=QueueLock)
cpdef put_item(HandleState s, object item, int priority)

@cython.locals(q=LocalQueue)
cdef _put_item_other(HandleState s, object item, int priority)

@cython.locals(clock=int)
cpdef long long wall_us(HandleState s, bint coarse=*) except? -1

@cython.locals(q=LocalQueue)
cpdef put_items(HandleState s, object items, int priority)

@cython.locals(longest=Py_ssize_t, q=LocalQueue, reason=int)
cpdef PutResults put_many(HandleState s, object datas, object md, int opts)

@cython.locals(sequence=Arrivals)
cpdef list _records(HandleState s, object payloads, object extra, int priority, bint persistent, long long put_us,
                    object pieces)

@cython.locals(lane_i=int, k=Py_ssize_t, durable=bint, pinned=bint, reason=int, put_us=cython.longlong, now=double,
               held=Py_ssize_t, sequence=Arrivals, numbers="unsigned long long[::1]", j=Py_ssize_t,
               put_bytes=Py_ssize_t)
cpdef tuple place(HandleState s, LocalQueue q, object payloads, object extra, int priority, bint persistent,
                  int syncpoint, object pieces=*, object items=*)
