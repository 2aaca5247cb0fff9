# Types of net/session.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (forms.py).
cimport cython

from sweepq.engine.handle cimport Handle
from sweepq.engine.message cimport Message, PutResult, message_read_at_us, message_record, own_data, put_record
from sweepq.engine.record cimport data_offset, is_persistent

from .frames cimport FrameSocket
from .protocol cimport Framer

cdef int _PUT, _GET, _GET_MANY, _OK

@cython.final
cdef class Session:
    cdef public object server
    cdef public object qm
    cdef public FrameSocket fs
    cdef public Py_ssize_t id
    cdef public object peer
    cdef public object transport
    cdef public object since
    cdef public object pid
    cdef public object client
    cdef public bint admin
    cdef public Py_ssize_t calls
    cdef public object state
    cdef public object conn
    cdef public object backed_out
    cdef public dict handles
    cdef public set producers
    cdef public Py_ssize_t _next_hid
    cdef public object slice_s
    cdef public object ended
    cdef public object _cut_why
    cdef public dict _handlers
    cdef public object channel
    cdef tuple _put_entry, _get_entry
    cdef Framer _framer
    cdef object _pending
    cdef object _unsent
    cdef bint _said_bye
    cdef bint _syncs_at_commit
    cdef bint _syncs
    cdef Py_ssize_t _kept_n

    @cython.locals(fs=FrameSocket, handlers=dict, entry=tuple)
    cpdef str _loop(self)

    @cython.locals(fs=FrameSocket, step=int)
    cpdef run_alone(self, dict hello, bint admin)

    @cython.locals(fs=FrameSocket, handlers=dict, entry=tuple, sent=Py_ssize_t, reply=bytes, op=int, kept=bytearray)
    cpdef int serve_ready(self) except -1

    cdef bytes _call(self, int op, tuple entry, list args, bint kept=*)

    cpdef list _put(self, object hid, object data, object md, object options)

    @cython.locals(r=PutResult, rec=bytes)
    cpdef object _put_result(self, object hid, object data, object md, object options)

    cpdef list _put_reply(self, PutResult r)

    cpdef object _get(self, object hid, object options, object wait_interval, object buffer_length, object match,
                      object msg_id, object correl_id, object group, object seq, object offset, object token)

    cpdef object _got(self, object hid, object options, object wait_interval, object buffer_length, object match,
                      object msg_id, object correl_id, object group, object seq, object offset, object token)

@cython.locals(msg=Message, rec=bytes, reason=int)
cpdef list message_to_wire(object m)


@cython.locals(r=PutResult, rec=bytes, msg=Message)
cdef Py_ssize_t _kept_reply(Framer framer, int op, object value) except -2

@cython.locals(end=Py_ssize_t)
cdef bytes _header(bytes rec)
cdef list _arguments(object op, tuple entry, object args)
cdef bint _may_wait(int op, list args) except -1
cdef bint _waits(object options, object wait_interval) except -1
