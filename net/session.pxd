# Types of net/session.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (engine/compiled.py).
cimport cython

from .frames cimport FrameSocket
from .protocol cimport Framer

@cython.final
cdef class Session:
    cdef public object server
    cdef public object qm
    cdef public FrameSocket fs
    cdef public Py_ssize_t id
    cdef public object peer
    cdef public object transport
    cdef public object since
    cdef public object pid
    cdef public object client
    cdef public bint admin
    cdef public Py_ssize_t calls
    cdef public object state
    cdef public object conn
    cdef public object backed_out
    cdef public dict handles
    cdef public set producers
    cdef public Py_ssize_t _next_hid
    cdef public object slice_s
    cdef public object ended
    cdef public object _cut_why
    cdef public dict _handlers
    cdef public object channel

    @cython.locals(fs=FrameSocket, framer=Framer, handlers=dict, entry=tuple, argc=Py_ssize_t)
    cpdef str _loop(self)
