# Types of engine/durable/checked.py for its compiled form (Cython pure-Python mode): the .py
# is the one source; this file only declares what the C compiler needs.
cimport cython
from sweepq.blobstore cimport crc

cdef Py_ssize_t _VALUE_MIN, _OFF_SEQ, _OFF_FLAGS, _PERSISTENT


@cython.locals(n=Py_ssize_t, p=cython.p_uchar, r=cython.p_uchar, k=int)
cpdef bytes stored_key(bytes prefix, int lane, bytes rec)
@cython.locals(n=Py_ssize_t, p=cython.p_uchar, r=cython.p_uchar, c=cython.uint)
cpdef bytes stored_value(bytes rec)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, vn=Py_ssize_t, kn=Py_ssize_t, keys=list, recs=list,
               pair=tuple, key=bytes, value=bytes, vp=cython.p_uchar, kp=cython.p_uchar, s=cython.ulonglong,
               ks=cython.ulonglong, lane=Py_ssize_t, stored=cython.uint,
               sv=cython.ulonglong[::1], lv=cython.uchar[::1], ov=cython.uchar[::1])
cpdef tuple check_chunk(list pairs, Py_ssize_t plen, Py_ssize_t n_lanes)
