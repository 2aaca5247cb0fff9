"""Which messages a sweep moves, and how it cuts them: runs per lane, pieces, bounded blobs.

One implementation, called as it is by the live sweeper (numpy, no compiler: the engine does
not load numba) and compiled by numba into the replay kernel, so the kernel's runs and blobs
are the engine's by construction and no constant is copied between them (the blob bounds'
defaults are the blob store's, :data:`DEFAULT_MAX_BLOB_BYTES` and
:data:`DEFAULT_MAX_BLOB_RECORDS`, imported here from where they are defined).

**Run selection** (:func:`choose_runs`, docs/design.md, the sweep protocol): the buffer is
the first ``keep`` sweepable messages of the queue in get order across its lanes (the highest
priority lane first, each front list from its head); what follows the buffer in each front
list moves to the head of the lane's chain, and the sweepable stretch at the head of each rear
list (at most its limit) moves to the chain's tail.

A run is the records ``[lo, hi)`` of an array whose sizes are given by prefix sums
(``size(j) = prefix[j + 1] - prefix[j]``). It is cut into *blobs* of at most ``max_records``
records and ``max_bytes`` framed bytes (a record costs its size plus
:data:`~sweepq.blobstore.format.FRAME_BYTES` inside a blob), with at least one record per
blob, so one oversized record still makes one blob. The live sweeper first cuts a run into
*pieces* of whole blobs (:func:`pieces`: at most :data:`TARGET_MAX` records and about
:data:`TARGET_BYTES`; it pauses between pieces), then each piece into those blobs. A blob
never crosses a piece boundary; :func:`cut_run` also restarts at every :data:`TARGET_MAX`
records (the replay kernel's pieces, by count only).
"""

from __future__ import annotations

import numpy as np

from sweepq.blobstore.format import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS, FRAME_BYTES

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES",
    "DEFAULT_MAX_BLOB_RECORDS",
    "TARGET_MAX",
    "blob_ends",
    "choose_runs",
    "cut_run",
    "pieces",
    "record_ends",
]

TARGET_MAX = 16_384  # messages per piece: the sweeper's unit of work between pauses
# Bytes per piece, at most: a piece's records are copied out of memory to be written while
# the originals stay until it is linked, so a piece is what a sweep adds to memory for a
# while (16,384 messages of 1 KiB was 16 MB: more than a small budget's whole room).
TARGET_BYTES = 1 << 20


def choose_runs(front, rear, rear_limit, keep, kept, moved) -> None:
    """THE run selection of a sweep of one queue whose lanes are indexed by priority.

    ``front[l]``: the sweepable messages in lane l's front list; ``rear[l]``: the sweepable
    stretch at the head of its rear list; ``rear_limit[l]``: the most of that stretch that may
    move (the engine: what the lane held when the sweep began). Writes ``kept[l]``, lane l's
    share of the buffer of ``keep`` messages (the first ``keep`` in get order: lane 9 first),
    so its front run is what follows them; and ``moved[l]``, the rear messages that move.
    Plain integer loops over sequences (lists or numpy arrays): numba compiles this function.
    """
    remaining = keep
    for lane in range(len(front) - 1, -1, -1):
        take = front[lane] if front[lane] < remaining else remaining
        kept[lane] = take
        remaining -= take
        moved[lane] = rear[lane] if rear[lane] < rear_limit[lane] else rear_limit[lane]


def cut_run(prefix, lo, hi, max_bytes, max_records, ends):
    """Cut records ``[lo, hi)`` into blobs; write each blob's end index to ``ends[k]``.

    Returns the number of blobs. Blob ``k`` holds ``[ends[k - 1], ends[k])`` (``lo`` for the
    first): the most records from its start whose framed bytes fit ``max_bytes``, at most
    ``max_records``, never across a piece boundary, and at least one. One binary search per
    blob over numpy arrays, so it is fast interpreted and numba compiles the same function.
    """
    k = 0
    p0 = lo
    while p0 < hi:
        p1 = min(p0 + TARGET_MAX, hi)
        s = p0
        while s < p1:
            limit = min(p1, s + max_records)
            # Framed bytes of [s, e) for e = s + 1 .. limit: non-decreasing, so searchable.
            framed = prefix[s + 1 : limit + 1] - prefix[s] + FRAME_BYTES * np.arange(1, limit - s + 1)
            e = s + np.searchsorted(framed, max_bytes, side="right")
            if e == s:
                e = s + 1  # one record larger than a blob still makes one blob
            ends[k] = e
            k += 1
            s = e
        p0 = p1
    return k


def blob_ends(sizes, max_bytes: int, max_records: int) -> list[int]:
    """Where the blobs of one run of records of the given sizes end (see :func:`cut_run`)."""
    sizes = np.asarray(sizes, np.int64)
    n = len(sizes)
    prefix = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=prefix[1:])
    ends = np.empty(max(n, 1), np.int64)
    k = cut_run(prefix, 0, n, max_bytes, max_records, ends)
    return ends[:k].tolist()


def record_ends(records, max_bytes: int, max_records: int) -> list[int]:
    """:func:`blob_ends` of a run of records (their lengths are their sizes)."""
    return blob_ends(np.fromiter(map(len, records), np.int64, len(records)), max_bytes, max_records)


def pieces(sizes, max_bytes: int, max_records: int) -> list[tuple[int, int]]:
    """A run of records of the given sizes cut into pieces, in order: each whole blobs as
    :func:`cut_run` cuts them from the piece's start (so a piece's own cut, which the
    sweeper makes of its copied records, ends in a full blob, not a part-filled one), at
    most :data:`TARGET_MAX` records and about :data:`TARGET_BYTES` (at least one blob)."""
    sizes = np.asarray(sizes, np.int64)
    n = len(sizes)
    prefix = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=prefix[1:])
    ends = np.empty(min(n, TARGET_MAX) + 1, np.int64)
    out = []
    lo = 0
    while lo < n:
        # Cut only as far as a piece can reach: the records within TARGET_BYTES of ``lo`` and
        # one more (the greedy cut of a window is the whole run's for every blob that ends
        # before the window's last record), so a run of large records costs no more than one
        # cut of the run.
        reach = int(np.searchsorted(prefix, prefix[lo] + TARGET_BYTES, side="right"))
        k = cut_run(prefix, lo, min(n, lo + TARGET_MAX, reach), max_bytes, max_records, ends)
        whole = int(np.searchsorted(prefix[ends[:k]] - prefix[lo], TARGET_BYTES, side="right"))
        hi = int(ends[max(whole, 1) - 1])
        out.append((lo, hi))
        lo = hi
    return out
