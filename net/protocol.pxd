# Types of net/protocol.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (engine/compiled.py).
cimport cython

@cython.final
cdef class Framer:
    cdef public object _packb  # read by tests/test_net.py: the packer is replaced after a large body

    @cython.locals(body=bytes, n=Py_ssize_t, out=bytes, p=cython.p_uchar)
    cpdef bytes frame(self, int op, object value)
