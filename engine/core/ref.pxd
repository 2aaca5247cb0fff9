# Types of engine/core/ref.py for its compiled form (Cython pure-Python mode).
cimport cython

@cython.freelist(32)  # a get's ref costs no allocation
cdef class Ref:
    cdef public Py_ssize_t slot, pos
    cdef public object lane, blob
    cdef public bytes rec

    @cython.locals(r=Ref)
    @staticmethod
    cdef Ref at(Py_ssize_t slot)

    cpdef void came_back(self, Py_ssize_t slot)
