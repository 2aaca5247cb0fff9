"""zlib's crc32, in C where sweepq is compiled: the checksum of every stored message record
(engine/durable/checked.py, layout's value) and of every side-log record (blobstore/sidelog.py,
the change log and the redo log of every durable put and get).

The compiled form (crc.pxd) folds 16-byte blocks with carry-less multiplies where the CPU has
PCLMULQDQ and runs slice-by-8 over a table made at import for the rest (and all of it
elsewhere): about 300 instructions for 1 KiB where zlib's (Debian's 1.2.13) takes about 2,600.
The interpreted form calls zlib's; tests/test_recovery_check.py holds the two to the same
answers.
"""

from __future__ import annotations

import zlib
from array import array

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING


def _crc_table() -> array:
    """zlib's crc32 as 8 tables of 256 (slice-by-8): table k gives a byte's crc followed by k
    zero bytes."""
    t = [0] * 2048
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        t[i] = c
    for k in range(1, 8):
        for i in range(256):
            prev = t[(k - 1) * 256 + i]
            t[k * 256 + i] = (prev >> 8) ^ t[prev & 0xFF]
    return array("I", t)


_CRC = _crc_table()


@cython.boundscheck(False)
@cython.wraparound(False)
def crc32(p, n: int) -> int:
    """The crc32 of the ``n`` bytes at ``p`` (compiled form only: a C pointer): its 16-byte
    blocks folded with carry-less multiplies where the CPU can (crc.pxd's
    ``sweepq_crc_fold``, from 64 bytes on), the rest slice-by-8."""
    t = cython.address(_CRC[0])
    c = 0xFFFFFFFF
    if sweepq_crc_folds(n):  # type: ignore[name-defined]  # noqa: F821  (crc.pxd's C)
        k = n & ~15
        c = sweepq_crc_fold(p, k, c)  # type: ignore[name-defined]  # noqa: F821
        p += k
        n -= k
    while n >= 8:
        one = (p[0] | (p[1] << 8) | (p[2] << 16) | (p[3] << 24)) ^ c
        two = p[4] | (p[5] << 8) | (p[6] << 16) | (p[7] << 24)
        c = (
            t[1792 + (one & 0xFF)]
            ^ t[1536 + ((one >> 8) & 0xFF)]
            ^ t[1280 + ((one >> 16) & 0xFF)]
            ^ t[1024 + (one >> 24)]
            ^ t[768 + (two & 0xFF)]
            ^ t[512 + ((two >> 8) & 0xFF)]
            ^ t[256 + ((two >> 16) & 0xFF)]
            ^ t[two >> 24]
        )
        p += 8
        n -= 8
    while n > 0:
        c = (c >> 8) ^ t[(c ^ p[0]) & 0xFF]
        p += 1
        n -= 1
    # ~c, not c ^ 0xFFFFFFFF: Cython types that literal (past a C int) as a Python int, and the
    # xor went through Python objects (a PyLong made, xored and read back: about 400
    # instructions a call, callgrind).
    return ~c


def crc_folds(on: bool | None = None) -> bool:
    """Whether the compiled form's crc32 folds its blocks with carry-less multiplies (never
    interpreted, which calls zlib's); for the tests, ``on`` False makes it run the table
    loop alone, True folds again where the CPU can."""
    if not COMPILED:
        return False
    return sweepq_crc_fold_set(-1 if on is None else int(on))  # type: ignore[name-defined]  # noqa: F821


def crc32_at(data: bytes, start: int) -> int:
    """The crc32 of ``data[start:]``, in the compiled form :func:`crc32`'s over those bytes
    where they lie in ``data`` (a side log's record from 0; the tests from every offset: a
    slice of bytes is a new object, whose bytes start as aligned as any other's);
    interpreted, zlib's."""
    if not COMPILED:
        return zlib.crc32(data[start:])
    if not 0 <= start <= len(data):
        raise IndexError(start)
    return crc32(cython.cast(cython.p_uchar, PyBytes_AS_STRING(data)) + start, len(data) - start)
