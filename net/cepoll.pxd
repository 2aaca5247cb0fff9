# epoll(7) for the compiled form of net/poller.py (the server loop's wait, made into a buffer
# the poller keeps, without Python's select.epoll and its list of tuples); declarations only,
# no module of its own.
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "sys/epoll.h" nogil:
    ctypedef union epoll_data_t:
        void* ptr
        int fd
        uint32_t u32
        uint64_t u64

    cdef struct epoll_event:
        uint32_t events
        epoll_data_t data

    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event* event)
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)
    enum:
        EPOLL_CLOEXEC
        EPOLL_CTL_ADD
        EPOLL_CTL_DEL
        EPOLLIN
