"""Many records at once: joined into one numpy buffer, their header fields read in bulk.

Recovery and the checkpoint handle a whole backlog (a million records) in one go; one
Python call per record and field would be most of a reopen's time (issue 23). These
functions read the fields of engine/record.py's header for every record with a few numpy
operations instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from sweepq.blobstore import Frame

from .. import record

HEADS = record.HEAD_LEN + 24  # a record's bytes up to the end of its own MsgId, if it has one
CHUNK = 4096  # records joined at once: the joined copy stays in the CPU's cache (4 MiB for 1 KiB records)


def joined(items: Sequence[bytes], pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``items`` joined into one byte array, with where each starts and its length; ``pad``
    zero bytes after the last, so that the first ``pad`` bytes of any item can be read
    whatever its length (what a short one lacks reads as garbage: check its length)."""
    lens = np.fromiter(map(len, items), np.int64, len(items))
    buf = np.frombuffer(b"".join([*items, bytes(pad)]), np.uint8)  # one copy, the padding with it
    return buf, np.cumsum(lens) - lens, lens


def gather(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each of ``starts`` in ``buf``, one row each (contiguous, to view
    as a number). ``buf`` must hold ``width`` bytes from every start (see :func:`joined`)."""
    return sliding_window_view(buf, width)[starts]


def seqs_and_msg_ids(heads: bytes, n: int, ident: record.Identity) -> tuple[np.ndarray, np.ndarray]:
    """The arrival numbers (u64) and MsgIds (24 bytes each, a ``V24`` array) of ``n`` records
    given by their first :data:`HEADS` bytes back to back (LaneSet.persistent):
    Identity.msg_id for every record at once (a record's own MsgId, else the one made of its
    number)."""
    rows = np.frombuffer(heads, np.uint8).reshape(n, HEADS)
    seq_rows = rows[:, record.OFF_SEQ : record.OFF_SEQ + 8]
    seqs = np.ascontiguousarray(seq_rows).view("<u8").ravel()
    ids = np.empty((n, 24), np.uint8)
    ids[:, :16] = np.frombuffer(ident.msg_id(bytes(record.HEAD_LEN))[:16], np.uint8)  # made of number 0
    ids[:, 16:] = seq_rows[:, ::-1]  # then the number, big endian
    own = (rows[:, record.OFF_FLAGS] & record.HAS_MSG_ID) != 0
    ids[own] = rows[own, record.HEAD_LEN : HEADS]
    return seqs, ids.view("V24").ravel()


def in_ascending(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in the ascending array ``ascending`` (a bool each): a binary
    search each, where np.isin would sort the (large) ``ascending`` again at every call."""
    if not len(ascending):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def ascending_unique(values: np.ndarray) -> np.ndarray:
    """``values`` ascending, each once: np.unique's answer, without its cost where ``values``
    is ascending already (a chain's arrival numbers are: one comparison per value). numpy 2.4's
    np.unique hashes every value first: 0.5 s for a reopen's 500,000 swept numbers."""
    if len(values) < 2 or (values[1:] > values[:-1]).all():
        return values
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


class Framed:
    """A blob's records as read (blobstore ``Frame``), left back to back: each one's start
    and length, its header fields for all at once, and a record on demand (``framed[i]``)."""

    def __init__(self, frame: Frame):
        n = frame.count
        self.check = frame.check  # the crc32 of the blob's record ids (a later read verifies it)
        self.data = frame.data
        self.lens = np.frombuffer(frame.data, "<u4", n).astype(np.int64)
        self.starts = 4 * n + np.cumsum(self.lens) - self.lens
        self.buf = np.frombuffer(frame.data + bytes(HEADS), np.uint8)  # the first HEADS bytes of any record

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes:
        start = int(self.starts[i])
        return self.data[start : start + int(self.lens[i])]

    def byte(self, offset: int) -> np.ndarray:
        """The byte at ``offset`` of every record (garbage for a record shorter: check ``lens``)."""
        return self.buf[self.starts + offset]

    def own_msg_ids(self) -> tuple[bytes, np.ndarray]:
        """The MsgIds the records carry themselves (record.HAS_MSG_ID), back to back, 24 zero
        bytes for each that carries none; and which carry one."""
        has = (self.byte(record.OFF_FLAGS) & record.HAS_MSG_ID != 0) & (self.lens >= HEADS)
        rows = gather(self.buf, self.starts + record.HEAD_LEN, 24)
        rows[~has] = 0
        return rows.tobytes(), has
