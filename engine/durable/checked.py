"""A chunk of a queue's stored records checked in one pass (recovery at open).

Each (key, value) pair the store's scan gives is proven before its record is loaded: the
value holds a record long enough to be a message, its crc32 (the value's first 4 bytes) is
the record's, the key is the queue's prefix, a lane and the record's own arrival number,
and the record is persistent. :func:`check_chunk` answers for a whole chunk at once, with
the record of each pair (its value without the crc), its arrival number and lane.
:func:`stored_key` and :func:`stored_value` make what the journal writes of a record
(engine/durable/layout.py's key and value), with the same crc32.

The compiled form (Cython, checked.pxd) does it in one C loop over the pairs, the crc32
included (blobstore/crc.py's, in C: its 16-byte blocks folded with carry-less multiplies
where the CPU has PCLMULQDQ, the rest slice-by-8), zlib's crc32 either way: a reopen of half
a million records in memory spent a fifth of its time in the interpreted form's per-record
calls (the crc32, the slices, the joins). The interpreted form runs the same checks with
numpy over the joined chunk; the tests run both forms and hold them to the same answers.
"""

from __future__ import annotations

import struct
import zlib
from operator import itemgetter

import cython
import numpy as np
from cython import compiled as COMPILED

from ...blobstore import crc
from .. import record
from .packed import gather, joined

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy

VALUE_MIN = 4 + record.OFF_SEQ + 8  # a value that holds a crc and a record up to its seq
_U32 = struct.Struct("<I")  # the crc before a stored record (layout.encode_value)
_KEY, _VALUE, _AFTER_CRC = itemgetter(0), itemgetter(1), itemgetter(slice(4, None))
# The compiled form's C copies (checked.pxd types them).
_VALUE_MIN, _OFF_SEQ, _OFF_FLAGS, _PERSISTENT = VALUE_MIN, record.OFF_SEQ, record.OFF_FLAGS, record.PERSISTENT


def stored_key(prefix: bytes, lane: int, rec: bytes) -> bytes:
    """layout.message_key: the key of ``rec`` in lane ``lane`` of the queue whose key prefix
    is ``prefix`` (``prefix + lane + seq``, big endian), made in one allocation: every durable
    put and get makes one (issue 31). The tests hold it to layout's in both forms."""
    if not COMPILED or len(rec) < _OFF_SEQ + 8 or not 0 <= lane <= 255:
        return prefix + bytes((lane,)) + rec[_OFF_SEQ : _OFF_SEQ + 8][::-1]  # (raises as layout's)
    n = len(prefix)
    out = PyBytes_FromStringAndSize(cython.NULL, n + 9)
    p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    r = cython.cast(cython.p_uchar, PyBytes_AS_STRING(rec)) + _OFF_SEQ
    memcpy(p, PyBytes_AS_STRING(prefix), n)
    p[n] = lane
    for k in range(8):  # the record's seq is little endian, the key's big endian: key order is arrival order
        p[n + 1 + k] = r[7 - k]
    return out


def stored_value(rec: bytes) -> bytes:
    """layout.encode_value: ``crc32 of rec (u32, little endian) + rec``, made in one
    allocation and one copy, the crc32 blobstore/crc.py's (folded, or slice-by-8) in the
    compiled form: every durable put makes one (issue 31)."""
    if not COMPILED:
        return _U32.pack(zlib.crc32(rec)) + rec
    n = len(rec)
    out = PyBytes_FromStringAndSize(cython.NULL, 4 + n)
    p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    r = cython.cast(cython.p_uchar, PyBytes_AS_STRING(rec))
    c = crc.crc32(r, n)
    p[0] = c & 0xFF
    p[1] = (c >> 8) & 0xFF
    p[2] = (c >> 16) & 0xFF
    p[3] = c >> 24
    if n:
        memcpy(p + 4, r, n)
    return out


@cython.boundscheck(False)  # every index below is within the arrays made for the chunk
@cython.wraparound(False)
def check_chunk(
    pairs: list[tuple[bytes, bytes]], plen: int, n_lanes: int
) -> tuple[list[bytes], list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """``pairs`` (a chunk of the scan of a queue whose key prefix is ``plen`` bytes long, with
    ``n_lanes`` lanes) as (their keys, their records, the records' arrival numbers (u64), the
    keys' lanes, and whether each pair passed every check (bool)). A number and a lane mean
    something only where the pair passed."""
    if not COMPILED:
        keys = list(map(_KEY, pairs))  # not zip(*pairs): unpacking a chunk as arguments costs 4x
        values = list(map(_VALUE, pairs))
        recs = list(map(_AFTER_CRC, values))
        vals, vstart, vlen = joined(values, VALUE_MIN)
        kbuf, kstart, klen = joined(keys, plen + 9)
        crcs = gather(vals, vstart, 4).view("<u4").ravel()
        seqs = gather(vals, vstart + 4 + record.OFF_SEQ, 8).view("<u8").ravel()
        flags = vals[vstart + 4 + record.OFF_FLAGS]
        lanes = kbuf[kstart + plen]
        ok = (
            (vlen >= VALUE_MIN)
            & (crcs == np.fromiter(map(zlib.crc32, recs), np.uint32, len(recs)))
            & (klen == plen + 9)
            & (lanes < n_lanes)
            & (gather(kbuf, kstart + plen + 1, 8).view(">u8").ravel() == seqs)
            & (flags & record.PERSISTENT != 0)
        )
        return keys, recs, seqs, lanes, ok
    n = len(pairs)
    keys, recs = [], []
    seqs = np.zeros(n, np.uint64)
    lanes = np.zeros(n, np.uint8)
    ok = np.zeros(n, np.bool_)
    sv: cython.ulonglong[::1] = seqs
    lv: cython.uchar[::1] = lanes
    ov: cython.uchar[::1] = ok.view(np.uint8)
    for i in range(n):
        pair = pairs[i]
        key = pair[0]
        value = pair[1]
        keys.append(key)
        vn = len(value)
        kn = len(key)
        recs.append(PyBytes_FromStringAndSize(PyBytes_AS_STRING(value) + 4, vn - 4) if vn > 4 else b"")
        if vn < _VALUE_MIN or kn != plen + 9:
            continue
        vp = cython.cast(cython.p_uchar, PyBytes_AS_STRING(value))
        kp = cython.cast(cython.p_uchar, PyBytes_AS_STRING(key))
        s = 0
        ks = 0
        for k in range(8):
            s |= cython.cast(cython.ulonglong, vp[4 + _OFF_SEQ + k]) << (8 * k)
            ks = (ks << 8) | kp[plen + 1 + k]
        lane = kp[plen]
        if lane >= n_lanes or ks != s or not vp[4 + _OFF_FLAGS] & _PERSISTENT:
            continue
        stored = vp[0] | (vp[1] << 8) | (vp[2] << 16) | (cython.cast(cython.uint, vp[3]) << 24)
        if crc.crc32(vp + 4, vn - 4) != stored:
            continue
        sv[i] = s
        lv[i] = lane
        ov[i] = 1
    return keys, recs, seqs, lanes, ok
