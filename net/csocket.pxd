# recv(2) and send(2) for the compiled form of net/frames.py (the server loop's reads and writes
# that never wait, made without releasing the GIL); declarations only, no module of its own.

cdef extern from "sys/socket.h" nogil:
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    ssize_t send(int fd, const void* buf, size_t n, int flags)
    enum:
        MSG_DONTWAIT
        MSG_NOSIGNAL
