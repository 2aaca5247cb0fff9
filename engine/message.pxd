# Types of engine/message.py for its compiled form (Cython pure-Python mode).
cimport cython

from .record cimport data_offset, tail

# No cycle can go through a result (it holds bytes, an int and the queue manager's Identity):
# the garbage collector need not track the two allocated on every put and get, and each
# comes from a free list of its class.
@cython.no_gc
@cython.freelist(64)
@cython.final
cdef class PutResult:
    cdef public object _ident
    cdef public bytes _rec
    cdef public int reason

@cython.no_gc
@cython.freelist(64)
@cython.final
cdef class Message:
    cdef public object _ident, _now_us, item
    cdef public bytes _rec, _data
    cdef public int reason

@cython.locals(r=PutResult)
cpdef list put_results(object records, object ident, int reason=*)
@cython.locals(m=Message)
cpdef list messages(object records, object ident)

cdef class _Lazy:
    cdef list _list
    cdef Py_ssize_t _n
    cpdef list _made(self)

@cython.final
cdef class PutResults(_Lazy):
    cdef object _ident, _recs
    cdef int _reason

@cython.final
cdef class Messages(_Lazy):
    cdef bytearray _buf
    cdef object _ends, _items, _ident
    cdef int _reason
@cython.locals(r=PutResults)
cpdef PutResults put_results_of(object records, object ident, int reason=*)
@cython.locals(m=Messages)
cpdef Messages messages_taken(bytearray buf, object ends, list items, object ident, int reason=*)
@cython.locals(m=Messages)
cpdef Messages messages_of(list made)
cdef bytes _span(bytearray buf, Py_ssize_t start, Py_ssize_t end)
# The results' record (and a message's read time) for the server's request path
# (net/session.py): C calls there, where the properties are attribute lookups.
cpdef bytes put_record(PutResult r)
cpdef bytes message_record(Message m)
cpdef object message_read_at_us(Message m)
@cython.locals(data=bytes, rec=bytes)
cpdef object own_data(Message m)
