# Types of engine/core/lock.py for its compiled form (Cython pure-Python mode).
cimport cython
from cpython.pythread cimport PyLockStatus, PyThread_type_lock

cdef extern from "pythread.h":  # not in Cython's cpython/pythread.pxd
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds, int intr_flag) nogil

cdef bint _CHECKS

@cython.final
cdef class QueueLock:
    cdef PyThread_type_lock _lock
    cdef bint _held
    cdef int _waiting
    cdef public object owner

    cpdef take(self)
    cpdef give(self)
    @cython.locals(deadline=double, left=double, us=cython.longlong)
    cdef bint _wait(self, double timeout) except -1
    @cython.locals(got=bint)
    cpdef bint acquire(self, bint blocking=*, double timeout=*) except -1
    cpdef release(self)
    cpdef bint locked(self) except -1
