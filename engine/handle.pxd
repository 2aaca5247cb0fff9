# Types of engine/handle.py for its compiled form (Cython pure-Python mode).
cimport cython

from . cimport getpath, putpath
from .handlestate cimport HandleState
from .queue cimport LocalQueue

cdef object _FLAGS_MAX, _WHOLE
cdef int _CURSOR_ANY, _GROUP_GMO, _MARK_SKIP, _PMO_LOGICAL, _MAX_PRIORITY

cdef int _take_turn(list token) except -1

@cython.final
cdef class Handle:
    cdef public HandleState _s
    cdef public list _token
    cdef public object options
    cdef public LocalQueue queue
