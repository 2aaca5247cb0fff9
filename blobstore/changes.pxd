# Types of blobstore/changes.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every lone
# durable put and get makes its change-log record with one() (issue 31), which the compiled
# RocksKV.write_one calls in C (blobstore/rocks.pxd cimports it).

cimport cython

cdef Py_ssize_t _HEAD

@cython.locals(n=Py_ssize_t, h=cython.ulonglong, kind=cython.uchar, width=Py_ssize_t, m=Py_ssize_t,
               full=Py_ssize_t, p=cython.p_uchar, k=int)
cpdef bytes one(object horizon, bytes key, object value, bint whole, bint deferred=*)
