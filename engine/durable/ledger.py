"""Which messages were live: a checkpoint kept apart from the data, to recognise the dead.

A consumed message is gone from the store only by a delete (of its record's key, or a
removal mark on its blob position). Damage can take such a delete away: a table file set
aside by a repair, a cut write-ahead log, a lost block of tombstones. The message's old
record then comes back as if it had never been consumed. The store cannot tell; this
checkpoint can. It is written (``Checkpointing``, a side file outside RocksDB) when a queue
manager has just recovered and when it closes, both moments without units of work, and
says, per queue and lane:

* the persistent messages in memory (their arrival numbers and MsgIds);
* the blobs of the chain, each with its range of arrival numbers and which of its
  positions were live;

with ``next_seq`` (every message put so far has a smaller arrival number), ``blob_horizon``
(every blob written so far has a smaller id) and ``closed`` (written by a clean close:
nothing happened after it). At the next open, a message older than the checkpoint that it
does not list as live, in memory or at a live position of a blob of its lane (an own record
may be a blob position brought back since; of a blob the open could not read, any number in
its range counts as live), was consumed: recovery reports it and keeps it dead. A listed
message that does not come back was lost to damage, and is named by its MsgId, when the
checkpoint was written at a clean close or the open found damage; otherwise (a crash since)
it was consumed after the checkpoint. What happened after the checkpoint is the store's
change log's to say (since.py); without it, newer arrival numbers and blob ids are trusted
as the store has them, so a stale checkpoint only recognises less, never rejects a live
message. The keys of the messages it lists also tell a damaged store where to look one by
one when a scan must step over damage (blobstore/heal.py).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from sweepq.blobstore import Capability, Checkpointing, Store, StoreError

from ..core.swept import REMOVED
from .packed import HEADS, ascending_unique, in_ascending, seqs_and_msg_ids

if TYPE_CHECKING:
    from ..internals import Manager

MAGIC = b"SQL2"
MAGIC_1 = b"SQL1"  # the first format (a lane's arrays as they are), still read
_HEAD = struct.Struct("<4sQQIIB")  # magic, next_seq, blob_horizon, lane entries, blob entries, closed
_LANE_1 = struct.Struct("<HBI")  # name length, lane, count (then name, seqs u64, MsgIds 24 B each)
# name length, lane, count, how the arrival numbers are kept (_SEQS_RAW or the width of their
# steps), MsgId prefix runs, MsgIds that do not end in their own number; then the name and
# the parts of :func:`_pack_lane`
_LANE = struct.Struct("<HBIBII")
_SEQS_RAW = 0  # not ascending: each number as it is (u64)
_WIDTHS = (1, 2, 4, 8)
_BLOB = struct.Struct("<QHBQQI")  # blob id, name length, lane, seq min, seq max, count (then name, bitmap)


@dataclass
class BlobEntry:
    queue: str
    lane: int
    seq_min: int
    seq_max: int
    live: np.ndarray  # bool per position


@dataclass
class Ledger:
    """A parsed checkpoint (see the module docstring)."""

    next_seq: int
    blob_horizon: int
    closed: bool = False
    # (queue, lane) -> its persistent messages in memory: arrival numbers (ascending, u64)
    # and their MsgIds (a V24 array or a PackedIds, indexed alike: .tolist() gives bytes)
    records: dict[tuple[str, int], tuple[np.ndarray, np.ndarray | PackedIds]] = field(default_factory=dict)
    blobs: dict[int, BlobEntry] = field(default_factory=dict)
    # (queue, lane) -> the lane's entry as written (this format only), and the lanes the open
    # found holding exactly the messages the entry lists (:meth:`keep`)
    entries: dict[tuple[str, int], memoryview] = field(default_factory=dict)
    unchanged: set[tuple[str, int]] = field(default_factory=set)

    def keep(self, queue: str, lane: int, seqs: np.ndarray) -> None:
        """Recovery's word that the lane's own records, as loaded, are the messages numbered
        ``seqs`` (ascending): when those are the ones the entry lists, the checkpoint written
        at this open writes the entry again as it is (:func:`snapshot`) instead of reading
        every record's header back out of the queue. A message's MsgId never changes (its
        arrival number is never drawn again), so the same numbers in the same lane are the
        same MsgIds."""
        listed = self.records.get((queue, lane))
        if listed is not None and (queue, lane) in self.entries and np.array_equal(listed[0], seqs):
            self.unchanged.add((queue, lane))

    def consumed_records(
        self, queue: str, lane: int, seqs: np.ndarray, positions: Mapping[int, np.ndarray] | None = None
    ) -> np.ndarray:
        """Which of these arrival numbers (ascending) of own records of (``queue``, ``lane``)
        were consumed before the checkpoint (a bool per number): older than it, and listed
        live neither in memory nor in a blob of the lane.

        ``positions``: the arrival numbers of every position of the blobs the open read, by
        blob id. A blob the checkpoint lists and the open read lists its live messages
        exactly: those at its positions the checkpoint shows live. One it could not read
        (damaged, or deleted since) is known only by its range of numbers, which then all
        count as live: a record in it may be one of its positions brought back. A range is
        not enough where the blob was read: a message consumed out of memory before its
        neighbours on both sides were swept lies inside the range of their blob (the damage
        fuzz: its record brought back by a table file set aside was delivered again)."""
        listed = self.records[queue, lane][0] if (queue, lane) in self.records else np.zeros(0, np.uint64)
        if np.array_equal(seqs, listed):
            return np.zeros(len(seqs), bool)  # every one listed live (a reopen after a clean close)
        # Both ascending: a binary search each (np.isin sorts both again: 0.1 s for a million).
        dead = (seqs < self.next_seq) & ~in_ascending(seqs, listed)
        if not dead.any():
            return dead
        positions = positions or {}
        ranges: list[tuple[int, int]] = []
        held: list[np.ndarray] = []
        for blob_id, b in self.blobs.items():
            if b.queue != queue or b.lane != lane:
                continue
            known = positions.get(blob_id)
            if known is not None and len(known) == len(b.live):
                held.append(known[b.live])
            else:
                ranges.append((b.seq_min, b.seq_max))
        if held:
            dead &= ~in_ascending(seqs, ascending_unique(np.concatenate(held)))
        if ranges and dead.any():
            # One binary search per number over the ranges by start (a loop over the ranges
            # would cost a pass over every number per blob): a number is in a range when it
            # is at most the highest end among the ranges that start at or before it.
            lo, hi = np.array(sorted(ranges), np.uint64).T
            at = np.searchsorted(lo, seqs, "right") - 1
            dead &= ~((at >= 0) & (seqs <= np.maximum.accumulate(hi)[np.maximum(at, 0)]))
        return dead

    def consumed_positions(self, blob_id: int, alive: np.ndarray) -> np.ndarray:
        """Which of a blob's alive positions were consumed before the checkpoint."""
        if blob_id >= self.blob_horizon:
            return np.zeros(len(alive), bool)
        entry = self.blobs.get(blob_id)
        if entry is None or len(entry.live) != len(alive):
            return alive.copy()  # deleted before the checkpoint: it came back from damage
        return alive & ~entry.live


def snapshot(qm: Manager, next_seq: int, blob_horizon: int, closed: bool, last: Ledger | None = None) -> bytes:
    """The checkpoint of ``qm`` now. Called when no unit of work is open (after recovery,
    and at close once every connection is gone: ``closed``); each queue's image is taken
    under its lock in one step (LocalQueue.durable_image) and encoded without it. ``last``:
    the checkpoint the open read, whose :attr:`Ledger.unchanged` lane entries are written
    again as they are (only right before anything can change a lane: at open)."""
    lanes: list = []  # each lane's entry in parts: its head, then its arrays as they are (no copy)
    blobs = []
    n_lanes = 0
    same = last.unchanged if last is not None else set()
    for q in qm.internal.queues():
        name = q.name.encode()
        skip = {lane for queue, lane in same if queue == q.name}
        for priority, recs, chain in q.durable_image(heads=HEADS, skip=skip):
            if recs is None:  # a lane the open found as the last checkpoint lists it
                lanes.append(cast("Ledger", last).entries[q.name, priority])
                n_lanes += 1
                recs = (b"", 0)
            heads, n = cast("tuple[bytes, int]", recs)  # asked for heads: (their bytes, their count)
            if n:
                lanes += _pack_lane(name, priority, *seqs_and_msg_ids(heads, n, qm.ident))
                n_lanes += 1
            for blob_id, seq_min, seq_max, count, flags in chain:
                bits = np.packbits(flags != REMOVED).tobytes()
                head = _BLOB.pack(blob_id, len(name), priority, seq_min, seq_max, count)
                blobs.append(head + name + bits)
    # Compressed part by part (a lane's parts are its arrays as they are, never joined).
    z = zlib.compressobj(1)
    parts = [z.compress(_HEAD.pack(MAGIC, next_seq, blob_horizon, n_lanes, len(blobs), closed))]
    parts += map(z.compress, lanes)
    parts += [z.compress(b"".join(blobs)), z.flush()]
    return b"".join(parts)


def _pack_lane(name: bytes, lane: int, seqs: np.ndarray, ids: np.ndarray) -> list:
    """A lane's entry: its head, then its arrival numbers and MsgIds in a few bytes a message.

    A generated MsgId is a run's 16-byte prefix and the message's own number (engine/record.py
    Identity), so the MsgIds are kept as the runs of equal prefixes (where each starts, and
    the prefix) and the few whose last 8 bytes are not their number (position, those bytes);
    ascending numbers as the first and the steps between them, in the narrowest width that
    holds the largest. A million messages' 32 MB became 1-2 MB (0.1 s to compress at open and
    to decompress at the next one, most of the checkpoint's cost); now it is about a byte each."""
    n = len(seqs)
    rows = ids.view(np.uint8).reshape(n, 24)
    heads = np.ascontiguousarray(rows[:, :16]).view("<u8").reshape(n, 2)
    starts = np.flatnonzero(np.concatenate(([True], (heads[1:] != heads[:-1]).any(axis=1)))).astype("<u4")
    own = np.ascontiguousarray(rows[:, 16:]).view(">u8").ravel() != seqs
    odd = np.flatnonzero(own).astype("<u4")
    steps = np.diff(seqs)
    numbers: list[bytes | np.ndarray]
    if n > 1 and not (steps > 0).all():
        how, numbers = _SEQS_RAW, [seqs.astype("<u8")]
    else:
        top = int(steps.max()) if n > 1 else 0
        how = next(w for w in _WIDTHS if top < 1 << (8 * w))
        numbers = [struct.pack("<Q", int(seqs[0])), steps.astype(f"<u{how}")]
    head = _LANE.pack(len(name), lane, n, how, len(starts), len(odd)) + name
    return [head, *numbers, starts, np.ascontiguousarray(rows[starts, :16]), odd, np.ascontiguousarray(rows[odd, 16:])]


def _unpack_lane(raw: bytes, pos: int) -> tuple[str, int, np.ndarray, PackedIds, int]:
    """The lane entry of :func:`_pack_lane` at ``pos`` of ``raw``: (queue, lane, arrival
    numbers, MsgIds as a ``V24`` array, where the next entry starts)."""
    nlen, lane, n, how, n_runs, n_odd = _LANE.unpack_from(raw, pos)
    pos += _LANE.size
    name = raw[pos : pos + nlen].decode()
    pos += nlen
    if how == _SEQS_RAW:
        seqs = np.frombuffer(raw, "<u8", n, pos).astype(np.uint64)
        pos += 8 * n
    elif how in _WIDTHS:
        first = struct.unpack_from("<Q", raw, pos)[0] if n else 0
        steps = np.frombuffer(raw, f"<u{how}", max(n - 1, 0), pos + 8 * bool(n)).astype(np.uint64)
        pos += 8 * bool(n) + how * max(n - 1, 0)
        seqs = np.empty(n, np.uint64)
        if n:
            seqs[0] = first
            np.cumsum(steps, out=seqs[1:])
            seqs[1:] += np.uint64(first)
    else:
        raise ValueError(f"arrival numbers kept in an unknown way ({how})")
    starts = np.frombuffer(raw, "<u4", n_runs, pos).astype(np.int64)
    pos += 4 * n_runs
    prefixes = np.frombuffer(raw, np.uint8, 16 * n_runs, pos).reshape(n_runs, 16)
    pos += 16 * n_runs
    odd = np.frombuffer(raw, "<u4", n_odd, pos).astype(np.int64)
    pos += 4 * n_odd
    tails = np.frombuffer(raw, np.uint8, 8 * n_odd, pos).reshape(n_odd, 8)
    pos += 8 * n_odd
    if n and (not n_runs or starts[0] != 0 or (starts[1:] <= starts[:-1]).any() or starts[-1] >= n):
        raise ValueError(f"MsgId prefix runs out of order in lane {lane} of queue {name!r}")
    if n_odd and (int(odd.max()) >= n or (odd[1:] <= odd[:-1]).any()):
        raise ValueError(f"a MsgId past the end of lane {lane} of queue {name!r}, or out of order")
    return name, lane, seqs, PackedIds(seqs, starts, prefixes, odd, tails), pos


class PackedIds:
    """A lane's MsgIds as :func:`_pack_lane` keeps them (runs of prefixes, the odd tails),
    made into 24-byte MsgIds only for the positions asked for: an open reads the MsgIds of
    the listed messages that did not come back, usually none (making all of them, 12 MB for a
    half-swept million, was a tenth of a reopen). Indexed like the ``V24`` array it stands for."""

    def __init__(self, seqs: np.ndarray, starts: np.ndarray, prefixes: np.ndarray, odd: np.ndarray, tails: np.ndarray):
        self._seqs, self._starts, self._prefixes, self._odd, self._tails = seqs, starts, prefixes, odd, tails

    def __len__(self) -> int:
        return len(self._seqs)

    def __getitem__(self, which: np.ndarray | slice) -> np.ndarray:
        """The MsgIds at ``which`` (a bool mask or positions), as a ``V24`` array."""
        at = np.arange(len(self._seqs))[which]
        rows = np.empty((len(at), 24), np.uint8)
        rows[:, :16] = self._prefixes[np.searchsorted(self._starts, at, "right") - 1]
        rows[:, 16:] = self._seqs[at].astype(">u8").view(np.uint8).reshape(len(at), 8)
        odd = np.searchsorted(self._odd, at)  # the odd positions are ascending (np.flatnonzero)
        mine = odd < len(self._odd)
        mine[mine] = self._odd[odd[mine]] == at[mine]
        rows[mine, 16:] = self._tails[odd[mine]]
        return rows.view("V24").ravel()

    def tolist(self) -> list[bytes]:
        return self[slice(None)].tolist()


def parse(data: bytes) -> Ledger:
    """:raises ValueError: not a checkpoint of this format."""
    try:
        raw = zlib.decompress(data)
        magic, next_seq, horizon, n_lanes, n_blobs, closed = _HEAD.unpack_from(raw)
        if magic not in (MAGIC, MAGIC_1):
            raise ValueError(f"bad magic {magic!r}")
        out = Ledger(next_seq, horizon, bool(closed))
        pos = _HEAD.size
        ids: np.ndarray | PackedIds
        for _ in range(n_lanes):
            if magic == MAGIC:
                start = pos
                name, lane, seqs, ids, pos = _unpack_lane(raw, pos)
                out.entries[name, lane] = memoryview(raw)[start:pos]
            else:
                name, lane, seqs, ids, pos = _unpack_lane_1(raw, pos)
            count = len(seqs)
            if count > 1 and not (seqs[1:] > seqs[:-1]).all():  # written in order: sorted already
                order = np.argsort(seqs, kind="stable")
                seqs, ids = seqs[order], ids[order]  # PackedIds made whole: a rare case
            out.records[name, lane] = (seqs, ids)
        for _ in range(n_blobs):
            blob_id, nlen, lane, lo, hi, count = _BLOB.unpack_from(raw, pos)
            pos += _BLOB.size
            name = raw[pos : pos + nlen].decode()
            pos += nlen
            nbits = (count + 7) // 8
            live = np.unpackbits(np.frombuffer(raw, np.uint8, nbits, pos))[:count].astype(bool)
            pos += nbits
            out.blobs[blob_id] = BlobEntry(name, lane, lo, hi, live)
        if pos != len(raw):
            raise ValueError(f"{len(raw) - pos} bytes left over")
        return out
    except (zlib.error, struct.error, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"not a checkpoint of this sweepq: {e}") from e


def _unpack_lane_1(raw: bytes, pos: int) -> tuple[str, int, np.ndarray, np.ndarray, int]:
    """:func:`_unpack_lane` of the first format (:data:`MAGIC_1`)."""
    nlen, lane, count = _LANE_1.unpack_from(raw, pos)
    pos += _LANE_1.size
    name = raw[pos : pos + nlen].decode()
    pos += nlen
    seqs = np.frombuffer(raw, "<u8", count, pos).astype(np.uint64)
    pos += 8 * count
    ids = np.frombuffer(raw, "V24", count, pos)
    return name, lane, seqs, ids, pos + 24 * count


def read(store: Store, damaged: list[str]) -> Ledger | None:
    """The store's last checkpoint (None: it keeps none, has none yet, or it is unreadable,
    which ``damaged`` is told)."""
    if Capability.CHECKPOINT not in store.capabilities:
        return None
    keeper: Checkpointing = store  # type: ignore[assignment]  # declared by Capability.CHECKPOINT
    try:
        data = keeper.checkpoint()
        return parse(data) if data is not None else None
    except (StoreError, ValueError) as e:
        damaged.append(
            f"the checkpoint of live messages is damaged ({e}): messages already consumed cannot be told "
            "apart this time if damage brought them back"
        )
        return None


def write(qm: Manager, next_seq: int, closed: bool, last: Ledger | None = None) -> str | None:
    """Write ``qm``'s checkpoint now (see :func:`snapshot` for when, and for ``last``). Returns
    why it could not be written, or None; the previous checkpoint then stands (it only
    recognises less)."""
    store = qm.internal.store()
    if Capability.CHECKPOINT not in store.capabilities:
        return None
    keeper: Checkpointing = store  # type: ignore[assignment]
    try:
        keeper.write_checkpoint(snapshot(qm, next_seq, keeper.blob_horizon(), closed, last))
    except StoreError as e:
        return f"writing the checkpoint of live messages failed ({e}); the previous one stands"
    return None
