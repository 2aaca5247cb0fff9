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
    # C methods too: the server's request path (net/session.py) calls them as C calls, with no
    # method lookup and no argument parsing; a Python caller goes through the same wrapper.
    cpdef object put(self, object data, object md=*, object options=*)
    cpdef object _get(self, object options=*, object wait_interval=*, object buffer_length=*, object match=*,
                      object msg_id=*, object correl_id=*, object group_id=*, object msg_seq_number=*,
                      object offset=*, object msg_token=*)
