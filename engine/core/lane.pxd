# Types of engine/core/lane.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.

cdef class Lane:
    cdef public int priority, bit, front, rear, sweeping
    cdef public Py_ssize_t ready, mem, swept, ahead, back
    cdef public object chain
