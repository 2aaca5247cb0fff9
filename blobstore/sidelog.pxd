# Types of blobstore/sidelog.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every durable
# put and get appends to the change log (issue 31). SideLog itself stays a normal class (tests
# patch its methods): its hot half, _Appending, is the C type, with the fields its append reads.
cimport cython
from sweepq.blobstore.crc cimport crc32_at

cdef Py_ssize_t _HEAD

cdef class _Appending:
    cdef public str path
    cdef public object failed, _fd, _lock
    cdef public Py_ssize_t _end, _size
    cdef public bint unsynced, _in_place
    @cython.locals(crc=cython.uint, fd=int, at=Py_ssize_t, end=Py_ssize_t)
    cpdef append(self, bytes record)

@cython.locals(n=Py_ssize_t, k=int, w=Py_ssize_t, e=int)
cpdef _write_record_at(int fd, bytes record, unsigned int crc, Py_ssize_t at)
