# Types of engine/handlestate.py for its compiled form (Cython pure-Python mode).
cimport cython

from .queue cimport LocalQueue
from .sequence cimport Arrivals

@cython.final
cdef class HandleState:
    cdef public object conn, qm, uow, cursor, gbrowse, groups, match, selector, xmit
    cdef public object ident, wall, recorder
    cdef public Arrivals sequence
    cdef public Py_ssize_t max_msg_length
    cdef public LocalQueue queue
    cdef public bint can_browse, can_get, can_put, closed
