"""Rebuilding a queue manager's queues from its data directory at open.

Every queue definition comes back, then every lane of every queue, in the order a get
would return its messages: the records with their own key whose arrival number is below
the lane's first blob go to the front list, then the chain of blobs (left in the store,
indexed in memory as a sweep would have left them), then the remaining records to the rear
list (docs/design.md "One queue": front ⧺ chain ⧺ rear, each in arrival order).

Inside a blob, records that are not persistent (they do not survive a restart, as in MQ)
or carry a removal mark are flagged removed; a raised backout count kept in a mark is
applied. A blob left with nothing live is deleted. A blob that cannot be read stays in the
chain as a placeholder indexed from its manifest: the first get that reaches it fails with
2101 naming its MsgIds, and every other message flows on. A record whose crc fails is
reported by its key and left out. Pending blobs were removed by the store's open.

Recovery reads every blob once (to learn which of its records are persistent); that is
most of its time for a deep swept backlog.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sweepq.blobstore import BlobCorruptError, Store, StoreError
from sweepq.blobstore.format import ids_check

from .. import record
from ..constants import Reason
from ..errors import MQError
from ..queue import QueueAttributes
from ..swept import REMOVED, SweptBlob, _hash_rows, build_index
from .layout import (
    MARK_REMOVED,
    decode_definition,
    decode_value,
    is_queue_object,
    key_parts,
    mark_backout,
    message_key_at,
)

if TYPE_CHECKING:
    from ..manager import QueueManager
    from ..queue import LocalQueue


@dataclass
class RecoveryReport:
    """What an open found: queues, messages by home, what was damaged, and how long it took."""

    queues: int = 0
    messages: int = 0
    in_memory: int = 0
    swept: int = 0
    blobs: int = 0
    blobs_deleted: int = 0
    damaged: list[str] = field(default_factory=list)
    # MsgIds of damaged messages that could still be named (a record whose own crc failed but
    # whose header is whole); a damaged blob's are named by the get that reaches it (2101).
    damaged_msg_ids: list[bytes] = field(default_factory=list)
    seconds: float = 0.0
    next_seq: int = 1


def recover(qm: QueueManager) -> RecoveryReport:
    """Define every stored queue on ``qm`` and load its messages (before any connection).

    :raises MQError: RESOURCE_PROBLEM (2102) when the store cannot be read at all."""
    t0 = time.perf_counter()
    report = RecoveryReport()
    store = qm._storage.store()
    try:
        definitions = store.objects()
    except StoreError as e:
        raise MQError(Reason.RESOURCE_PROBLEM, f"reading the queue definitions failed: {e}") from e
    max_seq = 0
    for name_b, value in sorted(definitions.items()):
        if not is_queue_object(name_b):
            continue  # the distributed-queuing objects: engine/distributed/registry.py loads them
        name = name_b.decode()
        try:
            attrs = QueueAttributes(**decode_definition(value)).validated()
        except (MQError, TypeError, ValueError) as e:
            report.damaged.append(f"queue {name!r}: its definition cannot be read ({e}); left out")
            continue
        q = qm._new_queue(name, attrs)
        max_seq = max(max_seq, _load_queue(q, store, report))
        report.queues += 1
    report.next_seq = max_seq + 1
    report.seconds = time.perf_counter() - t0
    return report


def _load_queue(q: LocalQueue, store: Store, report: RecoveryReport) -> int:
    """Load one queue's lanes; return the highest arrival number seen."""
    max_seq = 0
    by_lane: list[list[bytes]] = [[] for _ in q.lanes]
    by_keys: list[list[bytes]] = [[] for _ in q.lanes]
    salvaged = False
    try:
        pairs = store.messages(q.key_prefix)
    except StoreError as e:
        # A damaged block: read what can be read, each record checked by its own crc, and
        # name what could not be (by queue, lane and message number).
        salvage = getattr(store, "salvage_messages", None)
        if salvage is None or ("corrupt" not in str(e).lower() and "checksum" not in str(e).lower()):
            raise MQError(Reason.RESOURCE_PROBLEM, f"reading the messages of queue {q.name!r} failed: {e}") from e
        pairs, gaps = salvage(q.key_prefix)
        salvaged = True
        for lo, hi in gaps:
            what = f"after message number {key_parts(lo)[2]}" if len(lo) > len(q.key_prefix) + 1 else "at the start"
            upto = f" up to message number {key_parts(hi)[2]}" if hi else " to the end of the queue"
            report.damaged.append(f"queue {q.name!r}: unreadable records {what}{upto} ({e})")
    # Keys sort by lane, then arrival: each lane's records are one contiguous, ordered run.
    # RocksDB verified every block it read; each record's own crc is checked only when
    # the family was read past damage without those checks.
    plen = len(q.key_prefix)
    keys = [k for k, _v in pairs]
    if salvaged:
        values = []
        for key, value in pairs:
            rec = decode_value(value)
            if rec is None:
                name, lane, seq = key_parts(key)
                mid = _msg_id_of_damaged(value[4:])
                named = f" MsgId {mid.hex()}" if mid else ""
                if mid:
                    report.damaged_msg_ids.append(mid)
                report.damaged.append(
                    f"queue {name!r} lane {lane} message number {seq}{named}: damaged record, left out"
                )
            values.append(rec)
    else:
        values = [v[4:] for _k, v in pairs]
    lane_of = [k[plen] for k in keys]
    lo = 0
    for p in sorted(set(lane_of)):
        hi = bisect.bisect_right(lane_of, p, lo)
        if p < len(by_lane):
            by_lane[p] = [v for v in values[lo:hi] if v is not None]
            kept = zip(keys[lo:hi], values[lo:hi], strict=True)
            by_keys[p] = keys[lo:hi] if not salvaged else [k for k, v in kept if v]
            max_seq = max(max_seq, key_parts(keys[hi - 1])[2])
        lo = hi
    for lane in q.lanes:
        chain_name = q.tier.chain_name(lane)
        blobs = []
        for blob_id in store.chain(chain_name):
            blob, seq = _load_blob(store, chain_name, blob_id, report, q.name)
            max_seq = max(max_seq, seq)
            if blob is not None:
                blobs.append(blob)
        recs = by_lane[lane.priority]
        _place_placeholders(blobs)
        first = blobs[0].seq_min if blobs and blobs[0].seq_min else None
        # Records older than the first blob are the front list, the rest the rear list.
        split = (
            len(recs)
            if first is None
            else bisect.bisect_right(by_keys[lane.priority], message_key_at(q.key_prefix, lane.priority, first))
        )
        ls = q.lanes
        ls.extend(lane, recs[:split], lane.priority)  # in bulk: the front list
        if blobs:
            ls.mask |= lane.bit  # gets look at this lane (append sets it for in-memory ones)
        for blob in blobs:
            lane.chain.append(blob)
            lane.swept += blob.live
            q.depth += blob.live
            report.swept += blob.live
        ls.extend(lane, recs[split:], lane.priority)  # behind the chain: the rear list
        q.depth += len(recs)
        report.in_memory += len(recs)
        report.messages += len(recs)
        report.blobs += len(blobs)
    report.messages += sum(lane.swept for lane in q.lanes)
    return max_seq


def _msg_id_of_damaged(rec: bytes) -> bytes | None:
    """The MsgId a damaged record still shows, when its header looks whole: a durable record
    carries its MsgId itself (record.pin_msg_id)."""
    if len(rec) >= record.HEAD_LEN + 24 and rec[record.OFF_FLAGS] & record.HAS_MSG_ID and rec[0] >= 45:
        return bytes(rec[record.HEAD_LEN : record.HEAD_LEN + 24])
    return None


def _place_placeholders(blobs: list[SweptBlob]) -> None:
    """A damaged blob whose arrival numbers are unknown takes those of the next readable blob
    (or the previous one), so that the lane's own records stay on the right side of the
    chain (front records before it, rear records after it)."""
    for k, blob in enumerate(blobs):
        if blob.seq_min:
            continue
        later = next((b.seq_min for b in blobs[k + 1 :] if b.seq_min), 0)
        earlier = next((b.seq_max for b in reversed(blobs[:k]) if b.seq_max), 0)
        blob.seq_min = blob.seq_max = later or earlier


def _load_blob(
    store: Store, chain: bytes, blob_id: int, report: RecoveryReport, qname: str
) -> tuple[SweptBlob | None, int]:
    """A chain's blob as a :class:`SweptBlob` (None: deleted, or unusable), and its highest seq."""
    try:
        _owner, ids = store.manifest(blob_id)
    except StoreError:
        ids = []
    try:
        records = store.read(blob_id, chain, None)
        marks = store.marks(blob_id)
    except BlobCorruptError as e:
        report.damaged.append(f"queue {qname!r}: {e}")
        if not ids:
            return None, 0
        # A placeholder: the first get that reaches it reports its MsgIds (2101). Its arrival
        # numbers place the lane's own records before or after it: a persistent message's
        # MsgId, when generated, ends in its number (record.Identity); otherwise they are
        # taken from the neighbouring blobs (_place_placeholders).
        n = len(ids)
        seqs = np.array([int.from_bytes(i[16:], "big") if i[:4] == b"SWQ " else 0 for i in ids], "<u8")
        index = (_hash_rows(b"".join(ids), n), None, None, seqs)
        blob = SweptBlob(blob_id, 0, 0, ids_check(ids), index)
        if not seqs.all():
            blob.seq_min = blob.seq_max = 0  # unknown: see _place_placeholders
        return blob, int(seqs.max()) if n else 0
    except StoreError as e:
        raise MQError(Reason.RESOURCE_PROBLEM, f"reading blob {blob_id} of queue {qname!r} failed: {e}") from e
    check = ids_check(ids)
    if len(ids) != len(records):
        ids = [b"\0" * 24] * len(records)  # an unreadable manifest: ids serve only the index
        check = None
    index = build_index(records, ids)
    seq = int(index[3].max()) if len(records) else 0
    # Which records survive: persistent, and not marked removed (numpy over the headers).
    lens = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    starts = np.cumsum(lens) - lens
    flags = np.frombuffer(b"".join(records), dtype=np.uint8)[starts + record.OFF_FLAGS]
    alive = (flags & record.PERSISTENT) != 0
    bumps = {}
    for pos, mark in marks.items():
        if mark == MARK_REMOVED:
            alive[pos] = False
        elif alive[pos]:
            count = mark_backout(mark)
            rec = records[pos]
            if count is not None and count > record.backout_of(rec):
                bumps[pos] = count - record.backout_of(rec)
    if not alive.any():
        try:
            store.unlink(chain, blob_id)
            report.blobs_deleted += 1
        except StoreError:
            pass  # nothing live in it: the next open finds it empty again
        return None, seq
    blob = SweptBlob(blob_id, int(lens[alive].sum()), 0, check, index)
    dead = np.flatnonzero(~alive)
    if len(dead):
        blob.flags[dead] = REMOVED
        blob.live -= len(dead)
    blob.bumps = bumps or None
    return blob, seq
