# Types of blobstore/changelog.py for its compiled form (Cython pure-Python mode): the .py is
# the one source; this file only declares what the C compiler needs. Compiled because every
# lone durable put and get passes ChangeLog.write_message (issue 31). ChangeLog itself stays a
# normal class (tests patch its methods): its hot half, _Writer, is the C type.

cdef class _Writer:
    cdef public object _access, _bytes, whole
