"""Rebuilding a queue manager's queues from its data directory at open.

Every queue definition comes back, then every lane of every queue, in the order a get
would return its messages: the records with their own key whose arrival number is below
the lane's first blob go to the front list, then the chain of blobs (left in the store,
indexed in memory as a sweep would have left them), then the remaining records to the rear
list (docs/design.md "One queue": front ⧺ chain ⧺ rear, each in arrival order).

Inside a blob, records that are not persistent (they do not survive a restart, as in MQ)
or carry a removal mark are flagged removed; a raised backout count kept in a mark is
applied. A blob left with nothing live is deleted. Pending blobs were removed by the
store's open.

Damage is detected, named and never delivered as data (docs/damage.md):

* every record's own crc is checked, on every path (RocksDB's block checksums are not
  enough: a damaged block once rewritten by a compaction carries fresh ones), and so is
  its key (the arrival number in the key is the record's own); a record that fails is
  reported by queue, lane, number and, when its header is whole, MsgId, and quarantined;
* when the store finds damage in the records (``StoreDamageError``), recovery reads what
  the store can still prove (``Capability.SALVAGE``), and names the rest;
* a blob that cannot be read stays in the chain as a placeholder indexed from its
  manifest: the first get that reaches it fails with 2101 naming its MsgIds, and every
  other message flows on;
* a message the last checkpoint (engine/durable/ledger.py) shows was already consumed, but
  whose record came back (damage took its delete), is reported and kept dead; a message it
  shows live that did not come back is named as lost, by MsgId;
* a message found in two homes (its own record and a blob) is kept once, in the blob.

Recovery reads every blob once (to learn which of its records are persistent), as one frame
indexed in place (no object per record); the records in memory are checked chunk by chunk
as the store's scan reads them, each chunk in one compiled pass (checked.py). Each lane it
finds holding exactly what the last checkpoint lists is told to the checkpoint
(``Ledger.keep``), which the open then writes again as it was. For a million messages half
swept, the scan is most of its time (docs/performance.md "Reopening a million messages").
"""

from __future__ import annotations

import bisect
import time
from dataclasses import asdict, dataclass, field
from itertools import compress
from typing import TYPE_CHECKING

import numpy as np

from sweepq.blobstore import BlobCorruptError, Capability, DamageLog, Salvaging, Store, StoreDamageError, StoreError
from sweepq.blobstore.format import ids_check

from .. import record
from ..constants import Reason
from ..core.swept import SweptBlob, index_of
from ..errors import MQError
from ..queue import QueueAttributes, check_name
from .checked import VALUE_MIN, check_chunk
from .layout import (
    MARK_REMOVED,
    backout_mark,
    decode_definition,
    decode_value,
    encode_definition,
    encode_value,
    is_queue_object,
    key_parts,
    mark_backout,
    message_key_at,
    queue_prefix,
)
from .ledger import Ledger
from .packed import CHUNK, Framed, ascending_unique, in_ascending
from .since import SinceCheckpoint, msg_id_in

if TYPE_CHECKING:
    from ..internals import Manager
    from ..queue import LocalQueue

SHOWN = 20  # damaged or lost messages named one by one in the report; the rest are counted
_NO_SEQS = np.zeros(0, np.uint64)


@dataclass
class RecoveryReport:
    """What an open found: queues, messages by home, what was damaged, and how long it took.

    ``damaged`` says, one line each, what damage was found and what it cost; ``damaged_msg_ids``
    are the MsgIds of messages lost to it that could be named (a damaged blob's are named
    by the get that reaches it, 2101, and once more by the next open when that get came
    before it: :meth:`_Recovery.name_detached`); ``consumed_again`` counts messages whose record came
    back from damage although they had been consumed (kept dead); ``redone`` counts the writes
    the store made again from its change log, which RocksDB's log had lost (a power loss under
    sync="commit", or damage to that log): nothing of them was lost."""

    queues: int = 0
    messages: int = 0
    in_memory: int = 0
    swept: int = 0
    blobs: int = 0
    blobs_deleted: int = 0
    damaged: list[str] = field(default_factory=list)
    damaged_msg_ids: list[bytes] = field(default_factory=list)
    consumed_again: int = 0
    redone: int = 0
    seconds: float = 0.0
    next_seq: int = 1


@dataclass
class _Lane:
    """One lane's own records while it is rebuilt; ``seqs`` are their arrival numbers, in
    the same (ascending) order."""

    keys: list[bytes] = field(default_factory=list)
    recs: list[bytes] = field(default_factory=list)
    seqs: np.ndarray = field(default_factory=lambda: _NO_SEQS)


class _Recovery:
    """One open's recovery: the store, what the checkpoint says, what changed since it (the
    store's change log), and the report.

    ``lost_writes`` is the evidence that damage took writes the store had made: the store
    found it at open (a log cut or gone, a table file set aside by repair, a family rebuilt),
    or recovery did (a damaged record or blob, a consumed message brought back). Without it,
    a message that the checkpoint lists but that is gone was consumed since the checkpoint,
    not lost (a plain kill -9 after gets: issue 24 item 3)."""

    def __init__(self, store: Store, ledger: Ledger | None, report: RecoveryReport, repaired: bool = False):
        self.store = store
        self.ledger = ledger
        self.report = report
        self.since = SinceCheckpoint(store)
        self.lost_writes = self.since.since.lost_writes or repaired
        report.redone = redone = self.since.since.redone
        if redone:
            # Not evidence of lost writes (the store has them all again), but said: under
            # sync="os" only damage to RocksDB's log loses a write a kill would not.
            self.damage(
                f"RocksDB's log had lost {redone} write(s) that sweepq's change log holds whole (a power loss "
                'under sync="commit" leaves it so; any other loss is damage to that log): made again, none lost'
            )
        self.unlogged = not self.since.since.logged  # sync="none": no write-ahead log
        self.quarantine: list[bytes] = []  # message keys to move aside
        self.marks: list[tuple[int, int, bytes | None]] = []  # removal marks to write
        self.found: dict[tuple[str, int], np.ndarray] = {}  # arrival numbers recovered, by queue and lane
        self.loaded: set[int] = set()  # the blobs of every chain (damaged ones too)
        self.bad: list[tuple[bytes, bytes, str]] = []  # the queue's damaged records: (key, bytes, what)
        # blob id -> the arrival numbers of its positions, of the blobs of the queue being loaded
        # that could be read (settle, keep_in_blobs)
        self.positions: dict[int, np.ndarray] = {}
        self.deletes: list[bytes] = []  # own records of messages a blob holds (keep_in_blobs)
        self.detached: list[int] = []  # blobs detached as damaged by an earlier run, named (name_detached)

    def damage(self, line: str, msg_id: bytes | None = None) -> None:
        if msg_id:
            self.report.damaged_msg_ids.append(msg_id)
        self.report.damaged.append(line)

    def lost_again(self, line: str, consumed: int = 0) -> None:
        """Writes the change log has and the store lost, set right again: damage (said, and
        evidence that writes were lost), unless the store keeps no write-ahead log and nothing
        else was found: then a crash lost the writes since the last flush, which is what
        sync="none" says it does, and nothing is said (a plain kill -9 is no damage)."""
        if self.unlogged and not self.lost_writes:
            return
        self.report.consumed_again += consumed
        self.lost_writes = True
        self.damage(line)

    # -- own records --------------------------------------------------------------------------

    def records(self, q: LocalQueue) -> list[_Lane]:
        """The queue's own records by lane, every one proven: its crc and its key (whether it
        was consumed is :meth:`settle`'s, once the lanes' blobs are read)."""
        lanes = [_Lane() for _ in q.lanes]
        seqs: list[list[np.ndarray]] = [[] for _ in q.lanes]
        bad, quarantined = len(self.bad), len(self.quarantine)
        try:
            # Checked chunk by chunk as the scan reads them, each dropped before the next: the
            # next chunk's records reuse its memory (a fifth of the time of holding them all).
            for chunk in self.store.message_chunks(q.key_prefix, CHUNK):
                self._proven(q, chunk, lanes, seqs)
        except StoreDamageError as e:
            # What the chunks before the damage gave is read again, with the rest of what can be proven.
            lanes = [_Lane() for _ in q.lanes]
            seqs = [[] for _ in q.lanes]
            del self.bad[bad:], self.quarantine[quarantined:]
            pairs = self._salvage(q, e)
            for lo in range(0, len(pairs), CHUNK):
                self._proven(q, pairs[lo : lo + CHUNK], lanes, seqs)
        except StoreError as e:
            raise MQError(Reason.RESOURCE_PROBLEM, f"reading the messages of queue {q.name!r} failed: {e}") from e
        for ln, parts in zip(lanes, seqs, strict=True):
            ln.seqs = np.concatenate(parts) if parts else _NO_SEQS
        return lanes

    def settle(self, q: LocalQueue, lanes: list[_Lane]) -> None:
        """Keep dead the queue's own records of consumed messages (:meth:`_drop_consumed`),
        then raise again the backout counts of the others that damage took. Called once the
        blobs of every lane are read (:attr:`positions`): the checkpoint tells which of their
        positions were live, a message at none of them was not."""
        if self.ledger is not None or self.since.removed:
            for p, ln in enumerate(lanes):
                self._drop_consumed(q, p, ln)
        if self.since.written:
            self._backouts_again(q, lanes)

    def _backouts_again(self, q: LocalQueue, lanes: list[_Lane]) -> None:
        """Raise again, in memory and durably, the backout counts the change log has and the
        store lost (the record written with the raised count was in the part of a log that
        damage took): a backout count never goes back."""
        written, raised = self.since.written, []
        for ln in lanes:
            for k, key in enumerate(ln.keys):
                head = written.get(key)
                if head is None or len(head) < 4 + record.OFF_BACKOUT + 2:
                    continue
                count = record.backout_of(head[4:])
                if count > record.backout_of(ln.recs[k]):
                    ln.recs[k] = record.with_backout(ln.recs[k], count)
                    raised.append((key, encode_value(ln.recs[k])))
        if raised:
            try:
                self.store.write_messages(puts=raised)
            except StoreError as e:
                self.damage(f"queue {q.name!r}: writing raised backout counts again failed ({e})")
            self.lost_again(
                f"queue {q.name!r}: {len(raised)} raised backout count(s) were lost to damage; raised again from "
                "the change log"
            )

    def _proven(
        self, q: LocalQueue, pairs: list[tuple[bytes, bytes]], lanes: list[_Lane], seqs: list[list[np.ndarray]]
    ) -> None:
        """Sort a chunk of the queue's (key, value) pairs into ``lanes`` (with their arrival
        numbers into ``seqs``), in key order. The checks run over the whole chunk at once
        (checked.py, compiled: one C loop); only a pair that fails one goes through
        :meth:`_reject`, which names what is wrong with it."""
        keys, recs, seq, lane, ok = check_chunk(pairs, len(q.key_prefix), len(lanes))
        if len(lane) and ok.all() and (lane == lane[0]).all():  # the usual chunk: whole, of one lane
            p = int(lane[0])
            lanes[p].keys += keys
            lanes[p].recs += recs
            seqs[p].append(seq)
            return
        for i in np.flatnonzero(~ok).tolist():
            self._reject(q, keys[i], pairs[i][1], len(lanes))
        for p in np.flatnonzero(np.bincount(lane[ok], minlength=len(lanes))).tolist():
            mine = ok & (lane == p)
            take = mine.tolist()
            lanes[p].keys += compress(keys, take)
            lanes[p].recs += compress(recs, take)
            seqs[p].append(seq[mine])

    def _reject(self, q: LocalQueue, key: bytes, value: bytes, n_lanes: int) -> None:
        """Quarantine and name a pair that failed a check of :meth:`_proven` (the checks one
        by one, in the order that says best what is wrong)."""
        plen = len(q.key_prefix)
        rec = decode_value(value)
        lane = key[plen] if len(key) == plen + 9 else -1
        if rec is None:
            self._bad(q, key, value[4:], "damaged record (its checksum fails)")
        elif len(rec) < VALUE_MIN - 4:
            self._bad(q, key, rec, f"record too short to be a message ({len(rec)} bytes)")
        elif not 0 <= lane < n_lanes or record.seq_of(rec) != int.from_bytes(key[plen + 1 :], "big"):
            self._bad(q, key, rec, f"record under a damaged key (it holds message number {record.seq_of(rec)})")
        else:
            self._bad(q, key, rec, "record of a message that is not persistent")

    def _salvage(self, q: LocalQueue, e: StoreDamageError) -> list[tuple[bytes, bytes]]:
        """What the store can still prove of the queue's records; the rest is named."""
        if Capability.SALVAGE not in self.store.capabilities:
            raise MQError(
                Reason.RESOURCE_PROBLEM,
                f"the messages of queue {q.name!r} are damaged ({e}) and this store cannot read past damage",
            ) from e
        salvaging: Salvaging = self.store  # type: ignore[assignment]  # declared by Capability.SALVAGE
        self.lost_writes = True
        try:
            salvage = salvaging.salvage_messages(q.key_prefix, self._probes())
        except StoreError as e2:
            raise MQError(Reason.RESOURCE_PROBLEM, f"reading the messages of queue {q.name!r} failed: {e2}") from e2
        for lo, hi in salvage.gaps:
            what = f"after message number {_seq(lo)}" if len(lo) > len(q.key_prefix) + 1 else "at the start"
            upto = f" up to message number {_seq(hi)}" if hi else " to the end of the queue"
            self.damage(f"queue {q.name!r}: unreadable records {what}{upto} ({e})")
        # The keys the checkpoint knew in those ranges that could not be read are named with
        # every other message it lists and that did not come back (finish).
        return salvage.pairs

    def _probes(self) -> list[bytes]:
        """The keys of every message the checkpoint lists in memory, and of every record written
        since: read one by one where a scan of damaged records must step over a range."""
        listed = (
            [
                message_key_at(queue_prefix(name), lane, int(seq))
                for (name, lane), (seqs, _ids) in self.ledger.records.items()
                for seq in seqs
            ]
            if self.ledger is not None
            else []
        )
        return [*listed, *self.since.written]

    def _named(self, q: LocalQueue, key: bytes, rec: bytes, what: str) -> None:
        """A damaged record of ``q``: named once its blobs are loaded (:meth:`name_bad`)."""
        self.bad.append((key, rec, what))

    def _bad(self, q: LocalQueue, key: bytes, rec: bytes, what: str) -> None:
        self._named(q, key, rec, what)
        self.quarantine.append(key)
        self.lost_writes = True

    def name_bad(self, q: LocalQueue) -> None:
        """Name the queue's damaged records: lost messages by MsgId, unless a blob of the
        lane holds the message (the record was a second home, and the message is whole)."""
        plen = len(q.key_prefix)
        held: dict[int, set[int]] = {}  # see _held
        for key, rec, what in self.bad:
            whole_key = len(key) == plen + 9
            lane, seq = (key[plen], _seq(key)) if whole_key else ("?", "?")
            if whole_key and seq in self._held(q.name, key[plen], held):
                self.damage(f"queue {q.name!r} lane {lane} message number {seq}: {what}; its blob holds it whole")
                continue
            mid = msg_id_in(rec)
            named = f" MsgId {mid.hex()}" if mid else ""
            self.damage(f"queue {q.name!r} lane {lane} message number {seq}{named}: {what}, left out", mid)
        self.bad = []

    def _held(self, name: str, lane: int, held: dict[int, set[int]]) -> set[int]:
        """The arrival numbers recovered in a lane of queue ``name``, as a set made once (in
        ``held``) and only for a lane with a damaged record."""
        if lane not in held:
            held[lane] = set(self.found.get((name, lane), _NO_SEQS).tolist())
        return held[lane]

    def _drop_consumed(self, q: LocalQueue, lane: int, ln: _Lane) -> None:
        """Keep dead the records of consumed messages that damage brought back: consumed
        before the checkpoint (it lists them live neither in memory nor at a position of a
        blob the open read: :meth:`Ledger.consumed_records`), or since (the change log has
        the removal that the store lost)."""
        if not ln.recs:
            return
        seqs = ln.seqs
        dead = (
            self.ledger.consumed_records(q.name, lane, seqs, self.positions)
            if self.ledger is not None
            else np.zeros(len(seqs), bool)
        )
        removed = self.since.removed
        if removed:
            dead |= np.fromiter((k in removed for k in ln.keys), bool, len(ln.keys))
        if not dead.any():
            return
        n = int(dead.sum())
        self.lost_again(
            f"queue {q.name!r} lane {lane}: {n} message(s) already consumed came back from damage "
            f"(numbers {', '.join(str(int(s)) for s in seqs[dead][:SHOWN])}); kept dead",
            n,
        )
        self.quarantine += compress(ln.keys, dead.tolist())
        keep = (~dead).tolist()
        ln.keys = list(compress(ln.keys, keep))
        ln.recs = list(compress(ln.recs, keep))
        ln.seqs = seqs[~dead]

    # -- blobs --------------------------------------------------------------------------------

    def _load_blob(
        self, q: LocalQueue, lane: int, chain: bytes, blob_id: int
    ) -> tuple[SweptBlob | None, int, np.ndarray]:
        """A chain's blob as a :class:`SweptBlob` (None: deleted, or unusable), its highest
        seq and the arrival numbers it holds live. Positions the checkpoint or the change log
        show consumed are flagged removed. The arrival numbers of every position of a blob
        that could be read go to :attr:`positions` (:meth:`settle`, :meth:`keep_in_blobs`)."""
        store = self.store
        try:
            records = Framed(store.read_frame(blob_id, chain, None))
            marks = store.marks(blob_id)
        except BlobCorruptError as e:
            self.damage(f"queue {q.name!r}: {e}")
            self.lost_writes = True
            return self._placeholder(q, lane, blob_id)
        except StoreError as e:
            raise MQError(Reason.RESOURCE_PROBLEM, f"reading blob {blob_id} of queue {q.name!r} failed: {e}") from e
        # Which records survive: persistent, and not marked removed (numpy over the headers).
        lens = records.lens
        alive = (records.byte(record.OFF_FLAGS) & record.PERSISTENT != 0) & (lens >= record.HEAD_LEN)
        # The index hashes the MsgIds of the messages that can be got: a durable record carries
        # its own (record.pin_msg_id), so the blob's manifest is read only for one that does not.
        ids, has = records.own_msg_ids()
        if (alive & ~has).any():
            listed = self._manifest_ids(blob_id)
            ids = b"".join(listed) if len(listed) == len(records) else ids  # unreadable: ids serve the index only
        index = index_of(records.buf, records.starts, ids, records.__getitem__)
        seqs = index[3]
        self.positions[blob_id] = seqs
        seq = int(seqs.max()) if len(records) else 0
        self._marks_again(q, blob_id, marks)
        self._blob_backouts_again(q, lane, blob_id, seqs, records, marks)
        bumps = {}
        for pos, mark in marks.items():
            if pos >= len(alive):
                continue
            if mark == MARK_REMOVED:
                alive[pos] = False
            elif alive[pos]:
                count = mark_backout(mark)
                rec = records[pos]
                if count is not None and count > record.backout_of(rec):
                    bumps[pos] = count - record.backout_of(rec)
        self._drop_dead_positions(q, lane, blob_id, alive, seqs)
        if not alive.any():
            try:
                store.unlink(chain, blob_id)
                self.report.blobs_deleted += 1
            except StoreError:
                pass  # nothing live in it: the next open finds it empty again
            return None, seq, _NO_SEQS
        blob = SweptBlob.recovered(blob_id, int(lens[alive].sum()), records.check, index, alive, bumps)
        return blob, seq, seqs[alive]

    def _placeholder(self, q: LocalQueue, lane: int, blob_id: int) -> tuple[SweptBlob | None, int, np.ndarray]:
        """A damaged blob as a placeholder (:func:`_placeholder`) whose consumed positions
        are flagged removed: marked removed in the store or in the change log, or shown dead
        by the checkpoint. The 2101 of the get that reaches it names only the others (a
        consumed message named lost would be sent again: a false loss); nothing left: None."""
        ids = self._manifest_ids(blob_id)
        blob, seq, held = _placeholder(blob_id, ids)
        if blob is None:
            return blob, seq, held
        try:
            marks = self.store.marks(blob_id)
        except StoreError:
            marks = {}
        marks.update(self.since.marks(blob_id))
        alive = np.ones(len(ids), bool)
        alive[[p for p, m in marks.items() if m == MARK_REMOVED and p < len(ids)]] = False
        if self.ledger is not None:
            alive &= ~self.ledger.consumed_positions(blob_id, alive)
        seqs = _seqs_of(ids)  # 0 where not known
        removed = self.since.removed_seqs(q.name, lane)
        if len(removed):
            alive &= ~((seqs > 0) & in_ascending(seqs, removed))
        if not alive.any():
            return None, seq, _NO_SEQS
        blob.drop_dead(alive)
        return blob, seq, held[np.isin(held, seqs[alive])]

    def _manifest_ids(self, blob_id: int) -> list[bytes]:
        """The record ids a blob's manifest lists ([] when it cannot be read)."""
        try:
            return self.store.manifest(blob_id)[1]
        except StoreError:
            return []

    def _blob_backouts_again(
        self, q: LocalQueue, lane: int, blob_id: int, seqs: np.ndarray, records: Framed, marks: dict[int, bytes]
    ) -> None:
        """Set, in ``marks`` and durably, a backout mark on each position of the blob whose
        record the change log shows written with a higher count since (the record left the
        blob and was backed out; damage took both writes): a backout count never goes back."""
        raised = self.since.raised_backouts(q.name, lane)
        if not raised:
            return
        lost = []
        for pos in np.flatnonzero(np.isin(seqs, np.fromiter(raised, np.uint64, len(raised)))).tolist():
            count = raised[int(seqs[pos])]
            have = max(record.backout_of(records[pos]), mark_backout(marks.get(pos, b"")) or 0)
            if count > have and marks.get(pos) != MARK_REMOVED:
                marks[pos] = backout_mark(count)
                lost.append((blob_id, pos, marks[pos]))
        if lost:
            self.marks += lost
            self.lost_again(
                f"queue {q.name!r}: {len(lost)} raised backout count(s) of messages in blob {blob_id} were lost to "
                "damage; raised again from the change log"
            )

    def _marks_again(self, q: LocalQueue, blob_id: int, marks: dict[int, bytes]) -> None:
        """Set again, in ``marks`` and durably, the marks of the blob that the change log has
        and the store lost (a removal or a raised backout count that damage took)."""
        logged = self.since.marks(blob_id)
        if not logged:
            return
        lost = {pos: v for pos, v in logged.items() if _says_more(v, marks.get(pos))}
        if not lost:
            return
        marks.update(lost)
        self.marks += [(blob_id, pos, v) for pos, v in lost.items()]
        removals = sum(v == MARK_REMOVED for v in lost.values())
        self.lost_again(
            f"queue {q.name!r}: {len(lost)} mark(s) of blob {blob_id} were lost to damage ({removals} of them "
            "removals of consumed messages); set again from the change log",
            removals,
        )

    def _drop_dead_positions(self, q: LocalQueue, lane: int, blob_id: int, alive: np.ndarray, seqs: np.ndarray) -> None:
        """Flag removed, durably, the alive positions that are consumed: consumed before the
        checkpoint (it shows them dead), or since, after the blob came back into memory (the
        change log has the removal of their record, and damage took both that and the write
        that took the blob out of its chain)."""
        dead = np.zeros(len(alive), bool)
        if self.ledger is not None:
            dead = self.ledger.consumed_positions(blob_id, alive)
        removed = self.since.removed_seqs(q.name, lane)
        if len(removed):
            dead |= alive & in_ascending(seqs, removed)
        if dead.any():
            n = int(dead.sum())
            self.lost_again(
                f"queue {q.name!r}: {n} message(s) of blob {blob_id} already consumed came back from damage; kept dead",
                n,
            )
        if dead.any():
            alive &= ~dead
            self.marks += [(blob_id, int(p), MARK_REMOVED) for p in np.flatnonzero(dead)]

    def keep_in_blobs(self, q: LocalQueue, lane: int, own: _Lane, chain: list[int], live: np.ndarray) -> None:
        """Drop from ``own`` (and, durably, from the store) the records of messages a blob of
        the lane holds too (the blobs of ``chain``, by the arrival numbers of their positions
        in :attr:`positions`; ``live``: those of its positions still live): damage took the
        delete of the sweep that moved them. The message stays once, in its blob, where the
        sweep put it (its place in FIFO order; kept as its own record it went to the rear of
        the lane); one whose blob position is removed was consumed, and stays dead."""
        read = [self.positions[b] for b in chain if b in self.positions]
        held = ascending_unique(np.concatenate(read)) if read else _NO_SEQS
        if not len(own.seqs) or not len(held):
            return
        both = in_ascending(own.seqs, held)
        if not both.any():
            return
        consumed = int((both & ~in_ascending(own.seqs, ascending_unique(live))).sum())
        self.report.consumed_again += consumed
        self.deletes += compress(own.keys, both.tolist())
        self.damage(
            f"queue {q.name!r} lane {lane}: {int(both.sum())} message(s) had a record of their own besides their "
            f"place in a blob (damage took the delete that moved them); kept once, in the blob"
            + (f" ({consumed} of them consumed there: kept dead)" if consumed else "")
        )
        keep = (~both).tolist()
        own.keys = list(compress(own.keys, keep))
        own.recs = list(compress(own.recs, keep))
        own.seqs = own.seqs[~both]

    def name_detached(self) -> None:
        """Name the messages of the blobs an earlier run found damaged and took out of their
        chains (``DamageLog.detached``). The get that reached such a blob failed with 2101
        naming them, but nothing else said they were lost: the blob is in no chain, the
        checkpoint of a clean close no longer lists it, and this open used to delete it as a
        sweep's leftover (the damage fuzz's silent loss: 28 messages). A position consumed
        from the blob before (a removal mark, in the store or the change log) is not named:
        it was not lost. :meth:`finish` deletes the blobs, so the next open says nothing more."""
        store = self.store
        if Capability.DAMAGE_LOG not in store.capabilities:
            return
        log: DamageLog = store  # type: ignore[assignment]  # declared by Capability.DAMAGE_LOG
        for blob_id in log.detached():
            try:
                owner, ids = store.manifest(blob_id)
                marks = store.marks(blob_id)
            except StoreError as e:
                self.damage(
                    f"blob {blob_id} was found damaged while the queue manager last ran and left its queue; "
                    f"what it held cannot be named ({e})"
                )
                self.detached.append(blob_id)
                continue
            marks = {**marks, **{p: m for p, m in self.since.marks(blob_id).items() if m == MARK_REMOVED}}
            lost = [i for p, i in enumerate(ids) if marks.get(p) != MARK_REMOVED]
            queue, _, lane = owner.decode(errors="replace").rpartition("/")
            named = set(self.report.damaged_msg_ids)
            self.report.damaged_msg_ids += [i for i in lost if i not in named]
            shown = ", ".join(i.hex() for i in lost[:SHOWN]) + (" ..." if len(lost) > SHOWN else "")
            self.damage(
                f"queue {queue!r} lane {lane}: blob {blob_id} was found damaged while the queue manager last ran "
                f"and left the queue (the get that reached it failed with 2101); {len(lost)} message(s) it held "
                f"were lost" + (f": MsgId {shown}" if lost else "")
            )
            self.detached.append(blob_id)

    # -- after every queue ----------------------------------------------------------------------

    def finish(self) -> None:
        """Write what recovery decided (quarantines, marks), then name the messages the
        checkpoint shows live that did not come back."""
        store = self.store
        try:
            if self.marks or self.deletes:
                store.write_messages(deletes=self.deletes, marks=self.marks)
            if self.quarantine and Capability.SALVAGE in store.capabilities:
                salvaging: Salvaging = store  # type: ignore[assignment]
                salvaging.quarantine_messages(self.quarantine)
            elif self.quarantine:
                store.write_messages(deletes=self.quarantine)
            store.delete_pending(self.detached)  # named (name_detached): kept no longer
        except StoreError as e:
            self.damage(
                f"writing what recovery decided about damaged records failed ({e}); the next open decides again"
            )
        named = set(self.report.damaged_msg_ids)
        for (qname, lane), gone in sorted(self._gone().items()):
            lost = [i for i in gone if i not in named]
            if lost:
                self.report.damaged_msg_ids += lost
                shown = ", ".join(i.hex() for i in lost[:SHOWN]) + (" ..." if len(lost) > SHOWN else "")
                self.damage(f"queue {qname!r} lane {lane}: {len(lost)} message(s) were lost to damage: MsgId {shown}")

    def _gone(self) -> dict[tuple[str, int], list[bytes]]:
        """The MsgIds, by queue and lane, of messages that should have come back and did not:
        those the checkpoint lists in memory, and those written since (the change log).

        One that the change log shows removed, or moved into a blob that came back or was
        deleted since, was consumed (see :meth:`SinceCheckpoint.consumed`). Otherwise it was lost when the
        checkpoint was written at a clean close (nothing happened after it), or when there is
        evidence that writes were lost (:attr:`lost_writes`); without it, it was consumed
        since the checkpoint: a process killed between the store's write of a removal and
        the change log's record of it leaves no other trace."""
        out: dict[tuple[str, int], list[bytes]] = {}
        listed: set[tuple[str, int, int]] = set()
        if self.ledger is not None:
            closed = self.ledger.closed
            for (qname, lane), (seqs, ids) in self.ledger.records.items():
                gone = ~np.isin(seqs, self.found.get((qname, lane), _NO_SEQS))
                prefix = queue_prefix(qname)
                for seq, mid in zip(seqs[gone].tolist(), ids[gone].tolist(), strict=True):
                    listed.add((qname, lane, seq))
                    key = message_key_at(prefix, lane, seq)
                    if (closed or self.lost_writes) and not self.since.consumed(key, self.loaded):
                        out.setdefault((qname, lane), []).append(mid)
        if not self.lost_writes:
            return out
        held: dict[tuple[str, int], set[int]] = {}

        def found(queue: str, lane: int) -> set[int]:
            if (queue, lane) not in held:
                held[queue, lane] = set(self.found.get((queue, lane), _NO_SEQS).tolist())
            return held[queue, lane]

        for at, mids in self.since.gone(found, self.loaded, listed).items():
            out.setdefault(at, []).extend(mids)
        return out


def _seq(key: bytes) -> int | str:
    try:
        return key_parts(key)[2]
    except Exception:
        return "?"


def recover(qm: Manager, ledger: Ledger | None = None) -> RecoveryReport:
    """Define every stored queue on ``qm`` and load its messages (before any connection),
    checking them against ``ledger``, the last checkpoint (None: there is none).

    :raises MQError: RESOURCE_PROBLEM (2102) when the store cannot be read at all."""
    t0 = time.perf_counter()
    report = RecoveryReport()
    store = qm.internal.store()
    storage = qm.internal.storage
    run = _Recovery(store, ledger, report, repaired=storage.repair_ran)
    if storage.repair_ran and not storage.repaired:
        report.damaged.append(
            "repair=True rebuilt the store from the files it found, none of them unreadable: what a missing file "
            "held is lost (named below when sweepq's records know it)"
        )
    try:
        definitions = store.objects()
    except StoreError as e:
        raise MQError(Reason.RESOURCE_PROBLEM, f"reading the queue definitions failed: {e}") from e
    max_seq = 0
    queues = {}
    for name_b, value in sorted(definitions.items()):
        if not is_queue_object(name_b):
            continue  # the distributed-queuing objects: engine/distributed/registry.py loads them
        name = name_b.decode(errors="replace")
        try:
            queues[name] = QueueAttributes(**decode_definition(value)).validated()
        except (MQError, TypeError, ValueError) as e:
            report.damaged.append(f"queue {name!r}: its definition cannot be read ({e})")
    for name in _orphans(store, ledger, run.since, set(queues), run.lost_writes):
        queues[name] = _define_again(store, name, report)
    for name, attrs in sorted(queues.items()):
        q = qm.internal.new_queue(name, attrs)
        max_seq = max(max_seq, _load_queue(q, run))
        report.queues += 1
    run.name_detached()
    run.finish()
    max_seq = max(max_seq, run.since.highest_seq())  # a number the change log has is never drawn again
    report.next_seq = max(max_seq + 1, ledger.next_seq if ledger is not None else 1)
    report.seconds = time.perf_counter() - t0
    return report


def _orphans(
    store: Store, ledger: Ledger | None, since: SinceCheckpoint, defined: set[str], lost_writes: bool = True
) -> list[str]:
    """Queues that hold messages but whose definition damage took: named by the chains of
    their swept messages, by the checkpoint's list of messages in memory and by the records
    written since it. ``lost_writes``: the open found evidence that writes were lost."""
    # A queue the checkpoint lists that was deleted since is no orphan: its definition went
    # in the same write as its records (a kill -9 after DELETE QLOCAL, no checkpoint since).
    held = {name for name, _lane in ledger.records} if ledger is not None else set()
    held = {name for name in held if not since.dropped(name)}
    held |= since.queues()
    chained = {chain.rsplit(b"/", 1)[0].decode(errors="replace") for chain in store.chains()}
    out = []
    for name in sorted((held | chained) - defined):
        try:
            check_name(name)
        except MQError:
            continue  # not a name a queue can have
        if name not in chained and not lost_writes and not _holds_records(store, name):
            # Deleted, the kill came before the change log's record of it: the store holds
            # every write it made, and the delete took the definition, every record and every
            # chain in one write (found checking a plain kill -9 for false alarms).
            continue
        out.append(name)
    return out


def _holds_records(store: Store, name: str) -> bool:
    """Whether the store holds any message record of queue ``name`` (damage: it may)."""
    try:
        return any(chunk for chunk in store.message_chunks(queue_prefix(name), 1))
    except StoreError:
        return True


def _define_again(store: Store, name: str, report: RecoveryReport) -> QueueAttributes:
    """A queue whose definition was lost, defined again with the default attributes (its
    messages carry their own persistence and priority) and written back."""
    attrs = QueueAttributes().validated()
    try:
        store.put_object(name.encode(), encode_definition(asdict(attrs)))
        saved = ""
    except StoreError as e:
        saved = f" (writing it back failed: {e})"
    report.damaged.append(
        f"queue {name!r}: its definition was lost to damage; defined again with the default attributes{saved}, "
        "and its messages recovered"
    )
    return attrs


def _load_queue(q: LocalQueue, run: _Recovery) -> int:
    """Load one queue's lanes; return the highest arrival number seen."""
    report = run.report
    max_seq = 0
    lanes = run.records(q)
    run.positions = {}
    chains = []  # each lane's: (its blob ids, its blobs loaded, the arrival numbers each holds live)
    for lane in q.lanes:
        chain_name = q.tier.chain_name(lane)
        ids = list(run.store.chain(chain_name))  # its blobs as found (one left empty leaves it)
        blobs = []
        found = []
        for blob_id in ids:
            run.loaded.add(blob_id)
            blob, seq, held = run._load_blob(q, lane.priority, chain_name, blob_id)
            max_seq = max(max_seq, seq)
            found.append(held)
            if blob is not None:
                blobs.append(blob)
        chains.append((ids, blobs, found))
    run.settle(q, lanes)  # the own records checked against the checkpoint, the blobs read
    for lane, (ids, blobs, found) in zip(q.lanes, chains, strict=True):
        own = lanes[lane.priority]
        if own.recs:
            max_seq = max(max_seq, int(own.seqs[-1]))
        run.keep_in_blobs(q, lane.priority, own, ids, np.concatenate(found) if found else _NO_SEQS)
        if run.ledger is not None:
            run.ledger.keep(q.name, lane.priority, own.seqs)  # own.seqs: what the lane loads
        run.found[q.name, lane.priority] = np.concatenate([own.seqs, *found])
        _place_placeholders(blobs)
        first = blobs[0].seq_min if blobs and blobs[0].seq_min else None
        # Records older than the first blob are the front list, the rest the rear list.
        split = (
            len(own.recs)
            if first is None
            else bisect.bisect_right(own.keys, message_key_at(q.key_prefix, lane.priority, first))
        )
        # In bulk: the front list, the chain, and behind it the rear list.
        q.load_lane(lane, own.recs[:split], blobs, own.recs[split:])
        report.swept += sum(blob.live for blob in blobs)
        report.in_memory += len(own.recs)
        report.messages += len(own.recs)
        report.blobs += len(blobs)
    report.messages += sum(lane.swept for lane in q.lanes)
    run.name_bad(q)
    return max_seq


def _says_more(logged: bytes, stored: bytes | None) -> bool:
    """Whether a mark the change log has says more than the store's mark of the position: a
    removal the store lacks, or a higher backout count. A removal is final and a count never
    goes back, so a store that says more is newer, not damaged: a change log read only up to
    damage in it has an older mark for the position (which, written over a removal, brought
    the consumed message back)."""
    if stored == MARK_REMOVED or logged == stored:
        return False
    if logged == MARK_REMOVED:
        return True
    return (mark_backout(logged) or 0) > (mark_backout(stored or b"") or 0)


def _placeholder(blob_id: int, ids: list[bytes]) -> tuple[SweptBlob | None, int, np.ndarray]:
    """A damaged blob as a placeholder indexed from its manifest (None: nothing to index).

    The first get that reaches it reports its MsgIds (2101). Its arrival numbers place the
    lane's own records before or after it: a persistent message's MsgId, when generated,
    ends in its number (record.Identity); otherwise they are taken from the neighbouring
    blobs (_place_placeholders). The arrival numbers it holds are those known."""
    if not ids:
        return None, 0, _NO_SEQS
    n = len(ids)
    seqs = _seqs_of(ids)
    blob = SweptBlob.placeholder(blob_id, ids, seqs, ids_check(ids))  # unknown numbers: _place_placeholders
    return blob, int(seqs.max()) if n else 0, seqs[seqs > 0]


def _seqs_of(ids: list[bytes]) -> np.ndarray:
    """The arrival numbers of the messages of a blob's manifest, where their MsgIds tell them
    (a persistent message's generated MsgId ends in its number: record.Identity), else 0."""
    return np.array([int.from_bytes(i[16:], "big") if i[:4] == b"SWQ " else 0 for i in ids], "<u8")


def _place_placeholders(blobs: list[SweptBlob]) -> None:
    """A damaged blob whose arrival numbers are unknown takes those of the next readable blob
    (or the previous one), so that the lane's own records stay on the right side of the
    chain (front records before it, rear records after it)."""
    for k, blob in enumerate(blobs):
        if blob.seq_min:
            continue
        later = next((b.seq_min for b in blobs[k + 1 :] if b.seq_min), 0)
        earlier = next((b.seq_max for b in reversed(blobs[:k]) if b.seq_max), 0)
        blob.assume_seqs(later or earlier)
