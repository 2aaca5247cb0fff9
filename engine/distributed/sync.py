"""A channel's synchronisation state: what each end hardens, where and when (docs/channels.md
"In doubt").

Each end keeps one *sync record* in the store, under ``b"\\x00SYNC\\x00" + channel name``
among the message records but outside every queue's key prefix (a queue name is never
empty), so no queue's recovery reads it; its value is JSON with its own crc
(durable/layout.py ``encode_value``).

**The sender** (:class:`SenderSync`) keeps the last committed sequence number (``seq``: the
messages sent in committed batches) and LUWID, whether a user stopped the channel, and the
batch *in doubt*: its LUWID, its last sequence number and its messages' places on the
transmission queue (lane and arrival number). Three writes, each one atomic store write:

1. ``begin`` — before a batch goes out with its request to commit: the batch in doubt; with
   ``sync="commit"`` on disk before it goes. From here a crash leaves the batch in doubt,
   never unknown: at the next open the queue manager assigns its messages to a batch again
   (:func:`restore_batch`, before the sweeper starts), and they wait for resolution.
2. ``commit`` — once the receiver confirmed: the batch's messages deleted *and* the record
   (no batch in doubt, the new ``seq`` and LUWID), in the one write of ``Batch.confirm``.
   Not waited for: if a power loss takes it, the batch is in doubt again, the receiver says
   it committed it, and it is committed again.
3. ``backout`` — the record without the batch, then the batch released (its messages go
   again, in place).

**The receiver** (:class:`ReceiverSync`) keeps the ``seq`` and LUWID of the last batch it
committed, written in the very store write that commits the batch's unit of work
(``UnitOfWork.harden``): the messages and the record of having received them are one.

How a channel's batch differs from an application's unit of work: an uncommitted unit of
work is never written, so a crash backs it out; a batch sent and not yet confirmed is
written (1), because after a crash only the two ends together can say whether it arrived.

A queue manager without a data directory keeps the same state in memory only. Thread-safe:
each object's lock orders its channel's agent and the commands (reset, resolve, stop).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..batch import Batch
from ..constants import Reason
from ..durable.journal import StoreChanges
from ..durable.layout import decode_value, encode_value
from ..errors import MQError

if TYPE_CHECKING:
    from ..connection import Connection
    from ..durable.journal import Journal
    from ..queue import LocalQueue

SYNC_PREFIX = b"\x00SYNC\x00"
NO_LUWID = bytes(8)


def sync_key(channel: str) -> bytes:
    """Where a channel's sync record is kept."""
    return SYNC_PREFIX + channel.encode()


class ChannelSync:
    """What both ends keep (see the module docstring)."""

    def __init__(self, name: str, journal: Journal | None):
        self.name = name
        self.key = sync_key(name)
        self.journal = journal
        self.seq = 0
        self.luwid = NO_LUWID
        self.stopped = False
        self.active = False  # its agent runs (a sender's thread, a receiver's session): set by the agent
        self.lock = threading.RLock()

    def state(self) -> dict:
        return {"seq": self.seq, "luwid": self.luwid.hex(), "stopped": self.stopped}

    def value(self, **changes) -> bytes:
        """The record of the state with ``changes``."""
        return encode_value(json.dumps({**self.state(), **changes}).encode())

    def load(self, value: bytes) -> dict:
        """Take the state of a stored record. :raises ValueError: a damaged record."""
        rec = decode_value(value)
        if rec is None:
            raise ValueError("its checksum fails")
        state = json.loads(rec)
        self.seq = int(state["seq"])
        self.luwid = bytes.fromhex(state["luwid"])
        self.stopped = bool(state.get("stopped"))
        return state

    def write(self, value: bytes, wait: bool = False) -> None:
        """Write the record alone; ``wait``: on disk before returning (``sync="commit"``).

        :raises MQError: RESOURCE_PROBLEM (2102) when the write or that sync fails."""
        if self.journal is None:
            return
        w = StoreChanges()
        w.puts.append((self.key, value))
        self.journal.write(w, f"hardening channel {self.name!r}")
        if wait and not self.journal.wait():
            raise MQError(Reason.RESOURCE_PROBLEM, f"hardening channel {self.name!r}: the sync to disk failed")

    def set_stopped(self, stopped: bool) -> None:
        """A user stopped (or started) the channel: kept across restarts, as MQ keeps STOPPED."""
        with self.lock:
            if stopped != self.stopped:
                self.write(self.value(stopped=stopped))
                self.stopped = stopped

    def reset(self, seq: int) -> None:
        """RESET CHANNEL: the last sequence number becomes ``seq``."""
        with self.lock:
            self.write(self.value(seq=seq))
            self.seq = seq


@dataclass
class InDoubt:
    """A batch sent with its request to commit and not yet known committed."""

    luwid: bytes
    last_seq: int
    keys: list[tuple[int, int]]  # (lane, arrival number) of each message it holds
    batch: Batch | None = field(default=None, repr=False)

    def state(self) -> dict:
        return {"luwid": self.luwid.hex(), "seq": self.last_seq, "msgs": [list(k) for k in self.keys]}


class SenderSync(ChannelSync):
    """A sender's state (see the module docstring): ``indoubt`` is the batch in doubt, or None;
    ``reset_pending``: a reset the receiver has not heard of yet (the next start tells it)."""

    def __init__(self, name: str, journal: Journal | None):
        super().__init__(name, journal)
        self.indoubt: InDoubt | None = None
        self.reset_pending = False

    def state(self) -> dict:
        indoubt = self.indoubt.state() if self.indoubt else None
        return {**super().state(), "indoubt": indoubt, "reset": self.reset_pending}

    def load(self, value: bytes) -> dict:
        state = super().load(value)
        self.reset_pending = bool(state.get("reset"))
        d = state.get("indoubt")
        if d:
            self.indoubt = InDoubt(bytes.fromhex(d["luwid"]), int(d["seq"]), [(int(a), int(b)) for a, b in d["msgs"]])
        return state

    def begin(self, batch: Batch) -> tuple[bytes, int]:
        """Write 1: ``batch`` is about to go with its request to commit. Returns its LUWID and
        the sequence number of its first message.

        :raises MQError: CHANNEL_INDOUBT (4025) when a batch is in doubt already;
            RESOURCE_PROBLEM (2102) when the write fails (nothing is in doubt then)."""
        with self.lock:
            if self.indoubt is not None:
                raise MQError(Reason.CHANNEL_INDOUBT, f"channel {self.name!r} has a batch in doubt; resolve it first")
            doubt = InDoubt(os.urandom(8), self.seq + len(batch), batch_keys(batch), batch)
            self.write(self.value(indoubt=doubt.state()), wait=True)
            self.indoubt = doubt
            return doubt.luwid, self.seq + 1

    def commit(self) -> None:
        """Write 2: the batch in doubt arrived: its messages leave the transmission queue in
        the same write as the record. :raises MQError: 2102 (still in doubt: try again)."""
        with self.lock:
            d = self.indoubt
            if d is None:
                return
            value = self.value(seq=d.last_seq, luwid=d.luwid.hex(), indoubt=None)
            if d.batch is not None:
                d.batch.confirm([(self.key, value)])
            else:
                self.write(value)
            self.seq, self.luwid, self.indoubt = d.last_seq, d.luwid, None

    def backout(self) -> None:
        """Write 3: the batch in doubt did not arrive: it goes again, in place.
        :raises MQError: 2102 (still in doubt: try again)."""
        with self.lock:
            d = self.indoubt
            if d is None:
                return
            value = self.value(indoubt=None)
            if d.batch is not None:
                d.batch.release([(self.key, value)])
            else:
                self.write(value)
            self.indoubt = None

    def resolve_with(self, partner_luwid: bytes) -> bool | None:
        """At a start: commit the batch in doubt when the receiver's last committed LUWID is
        its own, else back it out. Returns True (committed), False (backed out) or None
        (nothing was in doubt)."""
        with self.lock:
            d = self.indoubt
            if d is None:
                return None
            if partner_luwid == d.luwid:
                self.commit()
                return True
            self.backout()
            return False

    def reset(self, seq: int) -> None:
        """RESET CHANNEL on the sender: its last sequence number becomes ``seq``, and the
        receiver takes the same at the next start. :raises MQError: CHANNEL_INDOUBT (4025)
        while a batch is in doubt."""
        with self.lock:
            if self.indoubt is not None:
                raise MQError(
                    Reason.CHANNEL_INDOUBT,
                    f"channel {self.name!r} has a batch in doubt: resolve it (commit or backout) before a reset",
                )
            self.write(self.value(seq=seq, reset=True))
            self.seq, self.reset_pending = seq, True

    def agreed(self, partner_seq: int) -> bool:
        """At a start, once the batch in doubt is resolved: whether the receiver's last
        sequence number is this sender's. Without a data directory there is nothing of its
        own to compare, so the sender takes the receiver's. A reset the receiver has now
        heard of is no longer pending."""
        with self.lock:
            if self.journal is None:
                self.seq = partner_seq
            if partner_seq != self.seq:
                return False
            if self.reset_pending:
                self.write(self.value(reset=False))
                self.reset_pending = False
            return True


class ReceiverSync(ChannelSync):
    """A receiver's state: ``seq`` and LUWID of the last batch it committed."""

    def commit(self, conn: Connection, seq: int, luwid: bytes):
        """Commit ``conn``'s unit of work (the batch's puts) with the record of ``seq`` and
        ``luwid`` in the same store write. Returns the commit's reason (NONE, or the warning
        OUTCOME_PENDING). :raises MQError: BACKED_OUT (2003) when it could not be written."""
        with self.lock:
            if self.journal is not None:
                conn.uow.harden(self.journal, self.key, self.value(seq=seq, luwid=luwid.hex()))
            reason = conn.commit()
            self.seq, self.luwid = seq, luwid
            return reason


def batch_keys(batch: Batch) -> list[tuple[int, int]]:
    """(lane, arrival number) of each message ``batch`` holds on its queue."""
    return batch.queue.batches.keys(batch.id)


def restore_batch(q: LocalQueue, keys: list[tuple[int, int]]) -> tuple[Batch, int]:
    """At open: assign the messages named by ``keys`` to a batch again (they were in doubt
    when the queue manager stopped), so that no get takes and no sweep moves them before
    the batch is resolved. Returns the batch and how many named messages were not found."""
    batch_id = Batch.next_id()
    recs = q.batches.assign_keys(batch_id, keys)
    return Batch(q, q.ident, recs, batch_id), len(keys) - len(recs)
