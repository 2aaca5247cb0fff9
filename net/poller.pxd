# Types of net/poller.py for its compiled form (Cython pure-Python mode): the .py is the one
# source; this file only declares what the C compiler needs (forms.py).
cimport cython

from .cepoll cimport epoll_event
from .session cimport Session

cdef int _STAY

@cython.final
cdef class Poller:
    cdef int _epfd
    cdef object _py
    cdef epoll_event _events[32]  # MAX_EVENTS

    cpdef register(self, int fd)
    cpdef unregister(self, int fd)
    cdef _ctl(self, int op, int fd)
    cpdef close(self)

    @cython.locals(n=int, err=int, i=int, room=int)
    cpdef object turn(self, dict sessions)

    cdef list _ready(self)

@cython.locals(session=Session, ready=int)
cdef object _serve_fd(int fd, dict sessions, object out)
