# Types of engine/durable/journal.py for its compiled form (Cython pure-Python mode): the .py
# is the one source; this file only declares what the C compiler needs. Compiled because a
# durable put and get each pass through it (Journal.put, Journal.remove_one, _removal: issue
# 31), and a compiled journal calls checked's stored_key and stored_value in C.
cimport cython

from . cimport checked

cdef class Journal:
    cdef object _store, _write_one
    cdef public object policy, group
    cdef public bint owed

@cython.locals(rec=bytes)
cdef object _removal(object q, object ref)
