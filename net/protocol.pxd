# Types of net/protocol.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (forms.py).
cimport cython

@cython.final
cdef class Framer:
    cdef public object _packb  # read by tests/test_net.py: the packer is replaced after a large body
    cdef public bytearray kept

    @cython.locals(n=Py_ssize_t)
    cpdef Py_ssize_t frame_kept(self, int op, object value) except -2

    @cython.locals(n=Py_ssize_t, p=cython.p_uchar)
    cpdef Py_ssize_t frame_kept_put(self, int op, long long reason, bytes rec, Py_ssize_t end) except -2

    @cython.locals(k=Py_ssize_t, t=Py_ssize_t, r=Py_ssize_t, n=Py_ssize_t, p=cython.p_uchar)
    cpdef Py_ssize_t frame_kept_message(self, int op, bytes rec, object data, long long reason, object read_at) except -2

    @cython.locals(p=cython.p_uchar)
    cdef unsigned char* _kept_at(self, int op, Py_ssize_t n) except NULL

    @cython.locals(body=bytes, n=Py_ssize_t, out=bytes, p=cython.p_uchar)
    cpdef bytes frame(self, int op, object value)

# A frame's body decoded: C-callable for the server's request path (net/session.py).
cpdef object unpack(object body)
cdef object unpack_buffer(unsigned char* p, Py_ssize_t n)
cdef object _decoded(unsigned char* p, Py_ssize_t n)

# The compiled form's MessagePack codec for the hot calls' values (net/protocol.py).
cdef object _NO
cdef Py_ssize_t KEEP_REPLY
cdef int _DEPTH

cdef Py_ssize_t _int_size(long long v) noexcept

@cython.locals(n=Py_ssize_t, overflow=int, v=cython.longlong, total=Py_ssize_t, k=Py_ssize_t)
cdef Py_ssize_t _size(object value, int depth) except -2

cdef Py_ssize_t _head_size(Py_ssize_t n, Py_ssize_t fix_limit, bint has8) noexcept

cdef unsigned char* _head_into(unsigned char* p, Py_ssize_t n, int fix_base, Py_ssize_t fix_limit, int code8, int code16, int code32) noexcept

@cython.locals(i=int)
cdef unsigned char* _be(unsigned char* p, unsigned long long v, int width) noexcept

@cython.locals(n=Py_ssize_t, s=cython.p_char)
cdef unsigned char* _pack_into(unsigned char* p, object value) except NULL

@cython.locals(n=Py_ssize_t)
cdef unsigned char* _int_into(unsigned char* p, long long v) noexcept

cdef unsigned char* _bin_into(unsigned char* p, const char* s, Py_ssize_t n) noexcept

cdef void _header_into(unsigned char* p, Py_ssize_t n, int op) noexcept

@cython.locals(v=cython.ulonglong, i=int)
cdef unsigned long long _uint(unsigned char* p, int width) noexcept

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, w=int, b=int, u=cython.ulonglong, k=Py_ssize_t, _j=Py_ssize_t, out=list)
cdef object _unpack_at(unsigned char* p, Py_ssize_t end, Py_ssize_t* pos, int depth)
