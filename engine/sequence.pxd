# Types of engine/sequence.py for its compiled form (Cython pure-Python mode).
cimport cython

@cython.final
cdef class Arrivals:
    cdef object _count
    cdef public unsigned long long value

    cpdef unsigned long long next(self)
