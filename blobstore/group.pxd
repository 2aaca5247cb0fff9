# Types of blobstore/group.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every lone
# durable put and get takes the right to write in WriteGroup.alone_or_join (issue 31).
# WriteGroup itself stays a normal (generic) class: its hot half, _Right, is the C type.

cdef class _Right:
    cdef public object _cond, writes, items
    cdef public list _token, _queue
