# Types of engine/core/found.py for its compiled form (Cython pure-Python mode).
cimport cython

@cython.final
cdef class Found:
    cdef public list refs, recs
    cdef public bint run
