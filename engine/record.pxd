# Types of engine/record.py for its compiled form (Cython pure-Python mode).
cimport cython

cdef int _HEAD_LEN, _PERSISTENT, _OFF_SEQ, _HAS_ITEM, _OFF_FLAGS, _HAS_MSG_ID, _PINNED_HLEN

@cython.locals(n=Py_ssize_t)
cpdef bytes tail(bytes rec, Py_ssize_t start)
cpdef bytes plain(unsigned long long seq, long long put_us, int priority, bint persistent, bytes payload)
@cython.locals(n=Py_ssize_t, p=cython.p_uchar, v=cython.ulonglong, k=int, flags=int, prefix=bytes)
cpdef bytes pinned(unsigned long long seq, long long put_us, int priority, bint persistent, bytes payload,
                   object ident)
cpdef bytes item_head(unsigned long long seq, long long put_us, int priority)
@cython.locals(n=Py_ssize_t, p=cython.p_uchar)
cdef bytes _plain(unsigned long long seq, long long put_us, int priority, int flags, bytes payload)
@cython.locals(v=cython.ulonglong, w=cython.ulonglong, k=int)
cdef inline void _write_head(unsigned char *p, int hlen, int priority, int flags, unsigned long long seq,
                             long long put_us) noexcept
# C-callable for the server's request path (net/session.py): a C call there, not a Python one.
cpdef Py_ssize_t data_offset(bytes rec) except -1
cpdef bint is_persistent(bytes rec) except -1
