"""How a sweep cuts a run of messages: pieces for the paced sweeper, bounded blobs in each piece.

One implementation, called by the live sweeper (through :data:`cut_run_jit`) and compiled
into the replay kernel, so the kernel's blobs are the engine's blobs by construction and no
constant is copied between them.

A run is the records ``[lo, hi)`` of an array whose sizes are given by prefix sums
(``size(j) = prefix[j + 1] - prefix[j]``). It is cut into *pieces* of at most
:data:`TARGET_MAX` records (the sweeper pauses between pieces) and each piece into *blobs* of
at most ``max_records`` records and ``max_bytes`` framed bytes (a record costs its size plus
:data:`~sweepq.blobstore.format.FRAME_BYTES` inside a blob), with at least one record per
blob, so one oversized record still makes one blob. A blob never crosses a piece boundary.
"""

from __future__ import annotations

import numba
import numpy as np

from sweepq.blobstore.format import FRAME_BYTES

TARGET_MAX = 16_384  # messages per piece: the sweeper's unit of work between pauses


def cut_run(prefix, lo, hi, max_bytes, max_records, ends):
    """Cut records ``[lo, hi)`` into blobs; write each blob's end index to ``ends[k]``.

    Returns the number of blobs. Blob ``k`` holds ``[ends[k - 1], ends[k])`` (``lo`` for the
    first). Plain integer code with no Python objects, so numba compiles this same function.
    """
    k = 0
    p0 = lo
    while p0 < hi:
        p1 = min(p0 + TARGET_MAX, hi)
        s = p0
        while s < p1:
            e = s
            used = 0
            while e < p1 and e - s < max_records:
                size = prefix[e + 1] - prefix[e] + FRAME_BYTES
                if e > s and used + size > max_bytes:
                    break
                used += size
                e += 1
            ends[k] = e
            k += 1
            s = e
        p0 = p1
    return k


cut_run_jit = numba.njit(cache=True, nogil=True)(cut_run)


def blob_ends(sizes, max_bytes: int, max_records: int) -> list[int]:
    """Where the blobs of one run of records of the given sizes end (see :func:`cut_run`)."""
    sizes = np.asarray(sizes, np.int64)
    n = len(sizes)
    prefix = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=prefix[1:])
    ends = np.empty(max(n, 1), np.int64)
    k = cut_run_jit(prefix, 0, n, max_bytes, max_records, ends)
    return ends[:k].tolist()


def record_ends(records, max_bytes: int, max_records: int) -> list[int]:
    """:func:`blob_ends` of a run of records (their lengths are their sizes)."""
    return blob_ends(np.fromiter(map(len, records), np.int64, len(records)), max_bytes, max_records)


def blob_bounds(sizes, max_bytes: int, max_records: int) -> list[tuple[int, int]]:
    """The blobs of one run of records of the given sizes, as ``(lo, hi)`` pairs."""
    ends = blob_ends(sizes, max_bytes, max_records)
    return list(zip([0, *ends[:-1]], ends, strict=True))


def pieces(n: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into pieces of at most TARGET_MAX, in order."""
    return [(lo, min(lo + TARGET_MAX, n)) for lo in range(0, n, TARGET_MAX)]
