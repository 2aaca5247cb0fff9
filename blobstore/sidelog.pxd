# Types of blobstore/sidelog.py for its compiled form (Cython pure-Python mode): the .py is the
# one source; this file only declares what the C compiler needs. Compiled because every durable
# put and get appends to the change log (issue 31). SideLog itself stays a normal class (tests
# patch its methods): its hot half, _Appending, is the C type, with the fields its append reads.
cimport cython
from sweepq.blobstore.crc cimport crc32_at

cdef Py_ssize_t _HEAD, _PAGE, _WINDOW
cdef int _POPULATE_WRITE

# A mapped log's copy (sidelog.py's module docstring), guarded against a bus error. A file cut
# under a shared map (the damage fuzz's "open" state; a user's truncate) makes a copy into a
# page past its new end raise SIGBUS, which ends the process unless handled, and no Python
# handler can run inside a copy. sweepq_map_put arms a jump (sigsetjmp, the signal mask not
# saved: no system call) that sweepq_bus, the process's SIGBUS handler while a mapped log is
# open, takes back to it: the copy returns -1 and the append fails as a pwrite would. A
# SIGBUS outside a guarded copy (one per thread at a time) is handed to the handler installed
# before (the fault happens again once this one returns, with that handler in place; one sent
# by kill() is raised again).
# sweepq_bus_guard installs it, once, or again where another took SIGBUS over since. SA_NODEFER
# leaves SIGBUS unblocked after the jump. The record's frame is written length first, then the
# record, then its crc, each field one store, with compiler fences between: a process killed
# during the copy leaves zeros, or a last record whose crc field is zero, which the scan takes
# for a cut tail (sidelog._scan), never a record that reads as whole and is not.
cdef extern from *:
    """
    #include <setjmp.h>
    #include <signal.h>
    #include <string.h>
    static __thread sigjmp_buf *sweepq_bus_jump;  /* armed while this thread copies into a map */
    /* Copies armed now, in all threads. The handler reads its thread's jump only when one is:
       a module loaded by dlopen may have a thread's TLS allocated at its first use, by malloc,
       which must not happen first inside a signal handler (the fault may be inside malloc). */
    static int sweepq_bus_copies;
    static struct sigaction sweepq_bus_before;  /* the SIGBUS handler installed before this one */
    static void sweepq_bus(int sig, siginfo_t *info, void *context) {
        (void)context;
        if (__atomic_load_n(&sweepq_bus_copies, __ATOMIC_RELAXED) > 0) {
            sigjmp_buf *jump = sweepq_bus_jump;
            if (jump != NULL) {  /* this thread's copy: its fault, first here or raised again
                                    by a handler installed since that hands on (faulthandler) */
                sweepq_bus_jump = NULL;
                siglongjmp(*jump, 1);
            }
        }
        sigaction(SIGBUS, &sweepq_bus_before, NULL);  /* not a copy's: the fault repeats there */
        if (info == NULL || info->si_code <= 0) raise(sig);  /* sent by kill(): no fault repeats */
    }
    static int sweepq_bus_guard(void) {
        struct sigaction now;
        if (sigaction(SIGBUS, NULL, &now) != 0) return -1;
        if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == sweepq_bus) return 0;
        memset(&now, 0, sizeof now);
        now.sa_sigaction = sweepq_bus;
        now.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&now.sa_mask);
        return sigaction(SIGBUS, &now, &sweepq_bus_before);
    }
    static void sweepq_put_u32(unsigned char *p, unsigned int v) {
        unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                               (unsigned char)(v >> 24)};
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memcpy(p, le, 4);  /* one store */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
    static int sweepq_map_put(unsigned char *p, const char *record, Py_ssize_t n, unsigned int crc) {
        sigjmp_buf jump;
        /* Counted in before the jump is armed and out after it is disarmed (the handler, on
           this thread, sees both in program order: the fences keep the compiler to it). */
        __atomic_fetch_add(&sweepq_bus_copies, 1, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (sigsetjmp(jump, 0) != 0) {
            __atomic_fetch_sub(&sweepq_bus_copies, 1, __ATOMIC_RELAXED);
            return -1;
        }
        sweepq_bus_jump = &jump;
        sweepq_put_u32(p, (unsigned int)n);
        memcpy(p + 8, record, (size_t)n);
        sweepq_put_u32(p + 4, crc);
        sweepq_bus_jump = NULL;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_fetch_sub(&sweepq_bus_copies, 1, __ATOMIC_RELAXED);
        return 0;
    }
    """
    int sweepq_bus_guard() nogil
    int sweepq_map_put(unsigned char *p, const char *record, Py_ssize_t n, unsigned int crc) nogil

cdef class _Appending:
    cdef public str path
    cdef public object failed, _fd, _lock
    cdef public Py_ssize_t _end, _size, _map_at, _map_len
    cdef public bint unsynced, _in_place, _mapped, _zeros_after
    cdef unsigned char *_base
    @cython.locals(crc=cython.uint, fd=int, at=Py_ssize_t, end=Py_ssize_t)
    cpdef append(self, bytes record)
    cdef _map(self, int fd, Py_ssize_t at, Py_ssize_t end)
    cpdef _unmap(self)

@cython.locals(n=Py_ssize_t, k=int, w=Py_ssize_t, e=int)
cpdef _write_record_at(int fd, bytes record, unsigned int crc, Py_ssize_t at)
