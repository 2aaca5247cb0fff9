# Types of net/frames.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (forms.py).
cimport cython

from .protocol cimport unpack

cdef Py_ssize_t _HEAD, _SMALL, _NONE, _REST

@cython.final
cdef class FrameSocket:
    cdef public object sock
    cdef public object clock
    cdef public object frame_since
    cdef public object active_at
    cdef public Py_ssize_t max_frame
    cdef public object partial_timeout
    cdef public object memory
    cdef public Py_ssize_t receiving
    cdef Py_ssize_t _held
    cdef bytearray _buf
    cdef object _view
    cdef Py_ssize_t _start
    cdef Py_ssize_t _end
    cdef bint _drained
    cdef object _timeout
    cdef object _idle_clock
    cdef object _sock_recv_into
    cdef int _fd
    cdef int _ready_op
    cdef Py_ssize_t _ready_start
    cdef Py_ssize_t _ready_n
    cdef object _ready_body

    @cython.locals(got=Py_ssize_t, n=Py_ssize_t, version=int, op=int, total=Py_ssize_t, p=cython.p_uchar)
    cpdef tuple read(self)

    @cython.locals(start=Py_ssize_t, n=Py_ssize_t, p=cython.p_char)
    cpdef object read_ready(self)

    @cython.locals(start=Py_ssize_t)
    cpdef int ready_op(self) except -2

    @cython.locals(start=Py_ssize_t, n=Py_ssize_t)
    cpdef object ready_value(self)

    @cython.locals(got=Py_ssize_t, n=Py_ssize_t, version=int, op=int, total=Py_ssize_t, have=Py_ssize_t,
                   start=Py_ssize_t, p=cython.p_uchar)
    cdef Py_ssize_t _ready_at(self) except -3

    cpdef bint partial(self)

    @cython.locals(got=Py_ssize_t)
    cpdef fill(self)

    @cython.locals(got=Py_ssize_t)
    cdef Py_ssize_t _recv_nowait(self) except -2

    cpdef Py_ssize_t send_ready(self, bytes data) except -1

    cpdef Py_ssize_t send_ready_from(self, bytearray buf, Py_ssize_t n) except -1

@cython.locals(sent=Py_ssize_t)
cdef Py_ssize_t _send_nowait(int fd, const char* p, Py_ssize_t n) except -1
