# Types of blobstore/rocks.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every lone
# durable put and get passes RocksKV.write_one, its way in through the gate (_enter) and the
# gate's enter and leave (issue 31). RocksKV itself stays a normal class (tests and figure
# scripts patch its methods): its hot half, _Hot, is the C type, with the fields those read.
from . cimport changes

cdef class _Gate:
    cdef object _cond
    cdef public list inside
    cdef public bint shut
    cpdef enter(self)
    cpdef leave(self)

cdef Py_ssize_t _DRAIN_WRITES, _DRAIN_BYTES, _REDO_LIMIT

cdef class _Hot:
    cdef public _Gate _gate
    cdef public object _db, _cf, _wopts, _logs, _broken, _read_only, _closed, _defer_log
    cdef public dict _view, _stuck
    cdef public long long _deferred
    cdef public Py_ssize_t _undrained, _view_bytes, _redo_bytes
    cpdef _enter(self)
