# Types of engine/core/arena.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs.
import cython

# A 64-bit field written little endian (engine/record.py HEAD) in one store where the machine is
# little endian (GCC and clang say so), byte by byte elsewhere: Arena.store_plain's fields.
cdef extern from *:
    """
    #include <string.h>
    static inline void sweepq_put_le64(unsigned char *p, unsigned long long v) {
    #if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, &v, 8);
    #else
        int k;
        for (k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
    #endif
    }
    """
    void sweepq_put_le64(unsigned char *p, unsigned long long v)

cdef Py_ssize_t _PAGE_SHIFT, _PAGE, _OFF_MASK, _SEQ_AT, _BACKOUT_AT, _POOL, _HEAD_LEN


@cython.final
cdef class Arena:
    cdef public list blocks, spare, doomed, pool
    cdef public long long[::1] live, used
    cdef public Py_ssize_t cur, top, held, dead, reused
    cdef Py_ssize_t _defer

    @cython.locals(lenlen=Py_ssize_t, need=Py_ssize_t, off=Py_ssize_t, page=Py_ssize_t, v=Py_ssize_t, k=Py_ssize_t,
                   p=cython.p_uchar)
    cpdef Py_ssize_t store(self, bytes rec, Py_ssize_t n=*) except -1
    @cython.locals(n=Py_ssize_t, size=Py_ssize_t, loc=Py_ssize_t, at=Py_ssize_t, p=cython.p_uchar)
    cpdef Py_ssize_t store_plain(self, unsigned long long seq, long long put_us, int priority, int flags,
                                 bytes payload) except -1
    cdef Py_ssize_t _page(self, Py_ssize_t size) except -1
    @cython.locals(page=Py_ssize_t, v=Py_ssize_t, size=Py_ssize_t)
    cpdef Py_ssize_t free(self, Py_ssize_t loc, Py_ssize_t n) except -1
    cdef _give_back(self, Py_ssize_t page)
    cpdef defer(self)
    cpdef release(self)
    @cython.locals(at=Py_ssize_t)
    cpdef set_backout(self, Py_ssize_t loc, Py_ssize_t count)
    @cython.locals(off=Py_ssize_t, n=Py_ssize_t, h=Py_ssize_t, shift=int, b=Py_ssize_t, p=cython.p_uchar)
    cdef inline Py_ssize_t _size(self, Py_ssize_t loc) except -1
    cpdef Py_ssize_t length(self, Py_ssize_t loc) except -1
    @cython.locals(size=Py_ssize_t, off=Py_ssize_t, n=Py_ssize_t)
    cpdef bytes read(self, Py_ssize_t loc)
    @cython.locals(size=Py_ssize_t, off=Py_ssize_t, n=Py_ssize_t)
    cpdef Py_ssize_t head(self, Py_ssize_t loc, bytearray out, Py_ssize_t at, Py_ssize_t width) except -1
    @cython.locals(at=Py_ssize_t)
    cpdef int byte(self, Py_ssize_t loc, Py_ssize_t k) except -1
    @cython.locals(at=Py_ssize_t, size=Py_ssize_t)
    cpdef Py_ssize_t sized_byte(self, Py_ssize_t loc, Py_ssize_t k) except -1
    @cython.locals(at=Py_ssize_t)
    cpdef object seq(self, Py_ssize_t loc)
    cpdef trim(self)
    cpdef bint fragmented(self)
    @cython.locals(page=Py_ssize_t)
    cpdef bint sparse(self, Py_ssize_t loc)
    cpdef Py_ssize_t move(self, Py_ssize_t loc) except -1
    cpdef Py_ssize_t footprint(self, Py_ssize_t loc) except -1
