# Types of engine/waiting.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.
cimport cython

from .core.lock cimport QueueLock

cdef bint CHECKS

@cython.final
cdef class Waiters:
    cdef public QueueLock mutex
    cdef public object clock
    cdef public list waiting

    cdef _must_hold(self, str what)
