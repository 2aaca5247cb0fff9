"""The receiving end of a channel: a session of the partner's server that a sender started.

A sender connects to the receiving queue manager's server as a client does (the token on
TCP, TLS when asked: net/auth.py), then sends CHL_START, and the session becomes the
receiver's message channel agent (:class:`Receiver`) for that channel until it ends. It
uses the session's own engine connection, so its unit of work lives and dies with the
session: a sender that goes away mid-batch leaves nothing half put.

For each batch (CHL_BATCH, one or more frames, the last asking to commit) it checks the
sequence number, puts every message where its transmission header says, as MQ's receiving
MCA does: resolved by this queue manager's names (engine/distributed/resolve.py), so a
message for another queue manager goes on to the transmission queue that leads there (a
second hop); a message that cannot be put (no such queue 2085, full 2053, put inhibited 2051,
too long 2030, no route 2087, no transmission header 2142, ...) goes to the dead-letter
queue with a dead-letter header carrying the reason. Persistent messages (and, with
NPMSPEED NORMAL, every message) are put under the batch's one unit of work, which commits
with the channel's sync record in the same store write (engine/distributed/sync.py); with
NPMSPEED FAST a non-persistent message is put at once, outside it. With no dead-letter queue
(or one that refuses the message too) the batch is backed out and the sender told why: its
channel stops (MQRCCF_CHANNEL_ERROR, 3235).

Thread safety: one session thread drives a receiver; its channel's sync lock keeps a second
sender out (CHANNEL_IN_USE, 4031) until this session has ended, backed out included.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from sweepq.engine import OO, PMO, MQError, Reason
from sweepq.engine.constants import ChannelType, NpSpeed
from sweepq.engine.distributed import Transmission, dead_letter, transmission
from sweepq.engine.record import PERSISTENT, data_of

from .. import protocol as P

if TYPE_CHECKING:
    from ..session import Session

# How long a receiver waits for the next frame: twice the sender's heartbeat and this margin.
HEARTBEAT_MARGIN = 10.0


def channel_ops(session: Session) -> dict:
    """The session's handlers of the channel ops (net/session.py adds them to its own)."""

    def start(name, sender_qm, seq, reset, options):
        if session.channel is not None:
            raise P.ProtocolError("CHL_START on a session that is a channel already")
        r = Receiver(session, name, sender_qm)
        reply = r.start(seq, reset, options)
        session.channel = r
        return reply

    def batch(luwid, first_seq, records, end):
        return _receiver(session).batch(luwid, first_seq, records, end)

    def heartbeat():
        _receiver(session)
        return None

    return {P.CHL_START: (5, start), P.CHL_BATCH: (4, batch), P.CHL_HEARTBEAT: (0, heartbeat)}


def _receiver(session: Session) -> Receiver:
    if session.channel is None:
        raise P.ProtocolError("a channel op before CHL_START")
    return session.channel


class Receiver:
    """One receiving channel at work, on one session (see the module docstring)."""

    def __init__(self, session: Session, name: object, sender_qm: object):
        self.session = session
        self.qm = session.qm
        self.name = name
        self.sender_qm = str(sender_qm)[:48]
        self.sync = None
        self.np_fast = True
        self.next_seq = 0  # the sequence number the open batch's next message must carry; 0: none open
        self.first = 0  # the open batch's first sequence number
        self.luwid = b""
        self.messages = 0
        self.batches = 0
        self._handles: dict[str, object] = {}

    # -- starting and ending ------------------------------------------------------------------

    def start(self, seq, reset, options) -> dict:
        """CHL_START: this queue manager's receiver of that name takes the sender, unless it is
        stopped or another sender holds it. Returns the receiver's last committed sequence
        number and LUWID, which the sender compares with its own (its batch in doubt)."""
        dq = self.qm.distributed
        try:
            d = dq.channel(self.name)
        except MQError:
            raise MQError(
                Reason.UNKNOWN_CHANNEL_NAME, f"queue manager {self.qm.name!r} has no channel named {self.name!r}"
            ) from None
        if d.type != ChannelType.RECEIVER:
            raise MQError(Reason.CHANNEL_NOT_AVAILABLE, f"channel {self.name!r} of {self.qm.name!r} is not a receiver")
        if not isinstance(options, dict) or type(seq) is not int or type(reset) is not bool:
            raise P.ProtocolError("CHL_START with arguments of the wrong types")
        sync = dq.sync(self.name)
        with sync.lock:
            if sync.stopped:
                raise MQError(Reason.CHANNEL_NOT_AVAILABLE, f"channel {self.name!r} of {self.qm.name!r} is stopped")
            if sync.active:
                raise MQError(Reason.CHANNEL_IN_USE, f"channel {self.name!r} of {self.qm.name!r} is in use")
            reset = reset and seq != sync.seq  # a reset to the number it has changes nothing: anyone may
            if reset and not self.session.admin:
                raise P.not_authorized(
                    f"resetting channel {self.name!r}'s sequence number on {self.qm.name!r} (the sender's "
                    f"{seq} against the receiver's {sync.seq})"
                )
            sync.active = True
            self.sync = sync
        self.qm.channels.attach(self)
        if reset:
            sync.reset(seq)
        self.np_fast = options.get("np_speed", NpSpeed.FAST) == NpSpeed.FAST
        heartbeat = options.get("heartbeat")
        if isinstance(heartbeat, int | float) and not isinstance(heartbeat, bool) and heartbeat > 0:
            fs = self.session.fs
            fs.sock.settimeout(2 * heartbeat + HEARTBEAT_MARGIN)  # a silent sender is a gone one
            fs.set_blocking_timeout()
        self.session.server.log.info(
            "channel %s from %s started on #%d (sequence number %d)",
            self.name,
            self.sender_qm,
            self.session.id,
            sync.seq,
        )
        return {"qm": self.qm.name, "seq": sync.seq, "luwid": sync.luwid}

    def end(self) -> None:
        """The session ended (its unit of work is backed out by then): the channel is free."""
        if self.sync is not None:
            with self.sync.lock:
                self.sync.active = False
            self.qm.channels.detach(self)
            self.sync = None

    def stop(self) -> None:
        """From another thread (STOP CHANNEL): end the session; its thread backs out."""
        self.session.stop()

    def status(self) -> dict:
        return {
            "partner": f"{self.sender_qm} ({self.session.peer})",
            "messages": self.messages,
            "batches": self.batches,
        }

    # -- batches ------------------------------------------------------------------------------

    def batch(self, luwid, first_seq, records, end):
        """CHL_BATCH: put ``records`` (transmission queue records, in order; the first carries
        sequence number ``first_seq``); with ``end``, commit the batch as ``luwid`` and reply
        with the last sequence number, else reply None and wait for the rest."""
        if type(first_seq) is not int or not isinstance(records, list) or not isinstance(luwid, bytes | bytearray):
            raise P.ProtocolError("CHL_BATCH with arguments of the wrong types")
        if not self.next_seq:
            if first_seq != self.sync.seq + 1:
                raise MQError(
                    Reason.CHANNEL_ERROR,
                    f"sequence number mismatch on channel {self.name!r}: the sender sent {first_seq}, receiver "
                    f"{self.qm.name!r} expected {self.sync.seq + 1}; reset the channel once you know which side is "
                    "right (sweepq channel reset)",
                )
            self.next_seq, self.first, self.luwid = first_seq, first_seq, bytes(luwid)
        try:
            for rec in records:
                self._deliver(rec if type(rec) is bytes else bytes(rec))
                self.next_seq += 1
            if not end:
                return None
            last = self.next_seq - 1
            self.sync.commit(self.session.conn, last, self.luwid)
        except BaseException:
            self._abandon()
            raise
        self.messages += last - self.first + 1
        self.batches += 1
        self.next_seq = 0
        self._close_handles()
        return [last]

    def _abandon(self) -> None:
        """A batch that cannot be committed: back its unit of work out."""
        self.next_seq = 0
        with contextlib.suppress(MQError):
            self.session.conn.backout()
        self._close_handles()

    def _deliver(self, rec: bytes) -> None:
        """Put one message where its transmission header says (or on the dead-letter queue)."""
        opts = 0 if self.np_fast and not rec[2] & PERSISTENT else int(PMO.SYNCPOINT)
        x = Transmission.parse(data_of(rec))
        if x is None:
            self._dead_letter(rec, Reason.HEADER_ERROR, "", "", opts)
            return
        try:
            route = self.qm.distributed.resolve(x.remote_queue, x.remote_qmgr)
            out = x.record
            if route.transmitted:  # for another queue manager: on through the next transmission queue
                out = transmission(out, self.qm.ident, route.remote_queue, route.remote_qmgr)
            self._handle(route.queue).put_as_received(out, opts)
        except MQError as e:
            self._dead_letter(x.record, e.reason, x.remote_queue, x.remote_qmgr, opts)

    def _dead_letter(self, rec: bytes, reason: int, queue: str, qmgr: str, opts: int) -> None:
        dlq = self.qm.distributed.attrs.dead_letter_queue
        where = f"a message for {queue or '?'!r} on {qmgr or '?'!r} cannot be put (MQRC {int(reason)})"
        if not dlq:
            raise MQError(
                Reason.CHANNEL_ERROR,
                f"{where} and queue manager {self.qm.name!r} has no dead-letter queue: channel {self.name!r} stops; "
                "define one (alter_qmgr(dead_letter_queue=...)) and start it again",
            )
        dl = dead_letter(rec, reason, queue, qmgr, int(self.qm.clock.wall() * 1e6))
        try:
            self._handle(dlq).put_as_received(dl, opts)
        except MQError as e:
            raise MQError(
                Reason.CHANNEL_ERROR,
                f"{where} and the dead-letter queue {dlq!r} refused it too ({e}): channel {self.name!r} stops",
            ) from None

    def _handle(self, name: str):
        h = self._handles.get(name)
        if h is None:
            h = self._handles[name] = self.session.conn.open(name, OO.OUTPUT)
        return h

    def _close_handles(self) -> None:
        """Handles are held for one batch only, so that a queue can be deleted between two."""
        for h in self._handles.values():
            with contextlib.suppress(MQError):
                h.close()
        self._handles.clear()
