# Types of blobstore/changes.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every lone
# durable put and get makes its change-log record with one() (issue 31), which the compiled
# RocksKV.write_one calls in C (blobstore/rocks.pxd cimports it).

cpdef bytes one(object horizon, object key, object value, bint whole)
