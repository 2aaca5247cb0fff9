"""What the engine keeps in memory about a swept blob: a few bytes per message, no objects.

A :class:`SweptBlob` sits in a lane's chain. It holds the blob's id and an index of its
messages: 16-bit hashes of each MsgId, CorrelId and GroupId and a flags byte (numpy
arrays: 3 bytes a message, 7 when the blob holds CorrelIds and groups), plus the range of
message sequence numbers. A get that
selects by id scans these arrays and reads only a blob that can match (docs/design.md
invariant 5); nothing is unswept just to look.

A message taken out of the middle of a blob is flagged in ``flags``: REMOVED for good,
GOTTEN while a unit of work holds it (restored by backout, in place), LOCKED while a browse
lock holds it. Backout counts raised while swept are kept in ``bumps`` and applied when the
record is read back. The refs that hold a position (GOTTEN or LOCKED) are kept in ``held``:
when the blob comes back, the core moves each of them to the message's new slot
(engine/core/lanes.py :meth:`~sweepq.engine.core.lanes.LaneSet.splice_blob`).

Only the core (engine/core/) writes a blob's fields: code outside it calls the methods here
(:meth:`SweptBlob.recovered`, :meth:`SweptBlob.keep`, ...; tests/test_core_door.py holds
that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .. import record
from ..constants import CORRELID_NONE, GROUPID_NONE

if TYPE_CHECKING:
    from concurrent.futures import Future


class Holder(Protocol):
    """A ref holding one of a blob's positions (engine/core/ref.py's :class:`Ref`): what the
    core asks of it through the blob. A protocol, so that this module, below the ref's,
    imports nothing above it."""

    @property
    def pos(self) -> int: ...

    @property
    def blob(self) -> SweptBlob | None: ...

    def came_back(self, slot: int) -> None: ...


LIVE = 0
REMOVED = 1
GOTTEN = 2
LOCKED = 3  # locked by a browse handle (engine/browse.py): invisible to others, kept in place


_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M3 = np.uint64(0x165667B19E3779F9)


def hash_rows(ids: bytes, n: int) -> np.ndarray:
    """16-bit hashes of ``n`` 24-byte identifiers packed back to back (vectorised)."""
    w = np.frombuffer(ids, dtype="<u8").reshape(n, 3)
    with np.errstate(over="ignore"):
        h = w[:, 0] * _M1 ^ w[:, 1] * _M2 ^ w[:, 2] * _M3
    h ^= h >> np.uint64(32)
    h ^= h >> np.uint64(16)
    return (h & np.uint64(0xFFFF)).astype(np.uint16)


def hash16(value: bytes) -> int:
    """The 16-bit index hash of one 24-byte identifier (the same function, vectorised above)."""
    return int(hash_rows(value, 1)[0])


_H_CORREL_NONE = hash16(CORRELID_NONE)
_H_GROUP_NONE = hash16(GROUPID_NONE)


# A blob's index: (h_msg, h_correl, h_group, seqs); h_correl, h_group None when no record has one.
Index = tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]


def build_index(records: list[bytes], ids: list[bytes]) -> Index:
    """(h_msg, h_correl, h_group, seqs) for a run of records, computed without the lock.

    Vectorised: the records are joined once and their header fields gathered with numpy;
    only the rare records that carry a CorrelId or a group are visited one by one.
    """
    n = len(records)
    lens = np.fromiter(map(len, records), dtype=np.int64, count=n)
    starts = np.cumsum(lens) - lens
    buf = np.frombuffer(b"".join(records), dtype=np.uint8)
    return index_of(buf, starts, b"".join(ids), records.__getitem__)


def index_of(buf: np.ndarray, starts: np.ndarray, ids: bytes, record_at: Callable[[int], bytes]) -> Index:
    """:func:`build_index` of records already back to back in ``buf`` (each at its start in
    ``starts``; a reopen reads blobs so, blobstore Frame), their ids back to back in ``ids``
    (24 bytes each); ``record_at(i)`` gives the i-th record, asked only for the rare ones
    that carry a CorrelId or a group."""
    n = len(starts)
    h_msg = hash_rows(ids, n)
    flags = buf[starts + record.OFF_FLAGS]
    seq_bytes = buf[starts[:, None] + np.arange(record.OFF_SEQ, record.OFF_SEQ + 8)]
    seqs = np.ascontiguousarray(seq_bytes).view("<u8").reshape(n)
    # Most messages carry no CorrelId and no group: then there is no array at all (None).
    h_cor = h_grp = None
    with_correl = np.flatnonzero(flags & record.HAS_CORREL_ID).tolist()
    if with_correl:
        h_cor = np.full(n, _H_CORREL_NONE, np.uint16)
        for i in with_correl:
            h_cor[i] = hash16(record.correl_id(record_at(i)))
    with_group = np.flatnonzero(flags & record.HAS_GROUP).tolist()
    if with_group:
        h_grp = np.full(n, _H_GROUP_NONE, np.uint16)
        for i in with_group:
            rec = record_at(i)
            off = record._sections(rec)[2]
            h_grp[i] = hash16(rec[off : off + 24])
    return h_msg, h_cor, h_grp, seqs


class SweptBlob:
    """One blob of a lane's chain, as the engine sees it.

    ``check`` is the crc32 of the blob's record ids: the store verifies it (with the blob id
    and the chain name) on every read, so a valid blob under the wrong key is refused.
    ``prefetch`` is a Future of the records (read-ahead); ``loaded`` the records once read,
    kept while the blob is in the queue's small cache of decoded blobs.
    """

    __slots__ = (
        "blob_id",
        "bumps",
        "check",
        "comp_len",
        "count",
        "damaged",
        "flags",
        "h_correl",
        "h_group",
        "h_msg",
        "held",
        "live",
        "loaded",
        "prefetch",
        "raw_bytes",
        "seq_max",
        "seq_min",
        "unswept",
    )

    def __init__(self, blob_id: int, raw_bytes: int, comp_len: int, check: int | None, index: Index):
        h_msg, h_cor, h_grp, seqs = index
        self.blob_id = blob_id
        self.count = len(h_msg)
        self.live = self.count  # not REMOVED
        self.raw_bytes = raw_bytes  # record bytes, as counted in memory
        self.comp_len = comp_len
        self.check = check
        self.h_msg = h_msg
        self.h_correl = h_cor
        self.h_group = h_grp
        self.seq_min = int(seqs.min()) if self.count else 0
        self.seq_max = int(seqs.max()) if self.count else 0
        self.flags = np.zeros(self.count, np.uint8)
        self.bumps: dict[int, int] | None = None  # position -> backout count added while swept
        self.held: dict[int, Holder] = {}  # position -> the ref holding it (GOTTEN or LOCKED)
        self.prefetch: Future[list[bytes]] | None = None
        self.loaded: list[bytes] | None = None
        self.unswept = False
        self.damaged = False  # found damaged and taken out of the chain

    @classmethod
    def recovered(
        cls,
        blob_id: int,
        raw_bytes: int,
        check: int | None,
        index: Index,
        alive: np.ndarray,
        bumps: dict[int, int] | None,
    ) -> SweptBlob:
        """A blob as recovery found it in the store (engine/durable/recovery.py): its
        positions where ``alive`` is False already REMOVED, and ``bumps`` the backout counts
        raised while it was swept (position -> count added)."""
        blob = cls(blob_id, raw_bytes, 0, check, index)
        blob.drop_dead(alive)
        blob.bumps = bumps or None
        return blob

    @classmethod
    def placeholder(cls, blob_id: int, ids: list[bytes], seqs: np.ndarray, check: int) -> SweptBlob:
        """A damaged blob indexed from its manifest's record ids alone (recovery), whose
        messages' arrival numbers are ``seqs`` (0 where not known). With any unknown its range
        is 0..0 until :meth:`assume_seqs` places it."""
        blob = cls(blob_id, 0, 0, check, (hash_rows(b"".join(ids), len(ids)), None, None, seqs))
        if not seqs.all():
            blob.seq_min = blob.seq_max = 0
        return blob

    def assume_seqs(self, seq: int) -> None:
        """A placeholder whose arrival numbers are unknown takes ``seq`` as its range, so that
        its lane's own records stay on the right side of it (recovery)."""
        self.seq_min = self.seq_max = seq

    def drop_dead(self, alive: np.ndarray) -> None:
        """The positions where ``alive`` is False are REMOVED (recovery, before the blob joins
        a chain: no ref holds any of them)."""
        dead = np.flatnonzero(~alive)
        if len(dead):
            self.flags[dead] = REMOVED
            self.live -= len(dead)

    def reading(self, fut: Future[list[bytes]] | None) -> None:
        """``fut`` reads the records ahead (engine/tiering.py); None: a read-ahead that failed
        is forgotten, and the next get reads the blob itself."""
        self.prefetch = fut

    def keep(self, records: list[bytes] | None) -> None:
        """The decoded records are kept while the blob is in the queue's cache of decoded
        blobs (None: it left the cache)."""
        self.loaded = records

    def survivors(self, records: list[bytes]) -> tuple[list[bytes], list[int] | None, int]:
        """What of this blob comes back when it is unswept: its live records (with the backout
        counts raised while swept), their positions in the blob (None: all of them), and
        their bytes. Pure: the caller writes what the store needs, then the core splices them
        (LaneSet.splice_blob)."""
        if self.live == self.count and not self.bumps and not self.flags.any():
            return records, None, self.raw_bytes
        positions = [p for p, f in enumerate(self.flags.tolist()) if f != REMOVED]
        live = [self.record(records, p) for p in positions]
        return live, positions, sum(map(len, live))

    def records(self) -> list[bytes] | None:
        """The decoded records if they are at hand (read, or read ahead successfully), else
        None: then the caller reads them without the queue's lock (a failed read-ahead is
        read again there, and its error reported)."""
        if self.loaded is not None:
            return self.loaded
        fut = self.prefetch
        if fut is not None and fut.done() and fut.exception() is None:
            return fut.result()
        return None

    def candidates(self, msg_id: bytes | None, correl_id: bytes | None, group_id: bytes | None, seq: int | None):
        """Positions that may match: live, and equal in every hashed field that is asked for."""
        if seq is not None and not self.seq_min <= seq <= self.seq_max:
            return ()
        mask = self.flags == LIVE
        if msg_id is not None:
            mask &= self.h_msg == hash16(msg_id)
        if correl_id is not None:
            if self.h_correl is None:  # every message here has CorrelId NONE
                return ()
            mask &= self.h_correl == hash16(correl_id)
        if group_id is not None:
            if self.h_group is None:
                return ()
            mask &= self.h_group == hash16(group_id)
        return np.flatnonzero(mask)

    def flag(self, pos: int) -> int:
        """The position's flag: LIVE, REMOVED, GOTTEN or LOCKED."""
        return int(self.flags.item(pos))

    def first_after(self, records: list[bytes], after: int) -> int:
        """The first position whose record's arrival number is above ``after`` (records are
        in arrival order)."""
        lo, hi = 0, len(records)
        while lo < hi:
            mid = (lo + hi) // 2
            if record.seq_of(records[mid]) <= after:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def record(self, records: list[bytes], pos: int) -> bytes:
        """The record at ``pos`` with any backout raised while swept applied."""
        rec = records[pos]
        if self.bumps and pos in self.bumps:
            rec = record.with_backout(rec, record.backout_of(rec) + self.bumps[pos])
        return rec

    def describe(self) -> str:
        """What a damaged blob held, from the in-memory index (when the store cannot say)."""
        return (
            f"{self.live} live message(s), instance numbers {self.seq_min}..{self.seq_max} "
            "(generated MsgIds end in these numbers, big endian)"
        )
