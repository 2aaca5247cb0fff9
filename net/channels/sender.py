"""The sending end of a channel: one thread per sender channel (MQ's sending MCA).

It opens its transmission queue exclusively, connects to the partner's server as a client
(``conname``, with the channel's token on TCP and its CA file on TLS: net/auth.py is the
server's side), and starts the receiver of the same name there (CHL_START). The receiver
answers with its last committed sequence number and LUWID: a batch this sender left in
doubt is committed when the LUWIDs agree and backed out when they do not
(engine/distributed/sync.py), and then the two sequence numbers must agree, or the channel
stops until it is reset.

Then, batch after batch (docs/channels.md "The protocol"):

1. assign up to ``batch_size`` messages of the transmission queue to a batch (the get
   path's ``assign_batch``: they stay in place, invisible to gets and never swept, seed
   003), waiting for the first one and keeping the batch open ``batch_interval`` for more;
   with NPMSPEED(FAST) a non-persistent message is taken off the queue at once instead;
2. harden the batch as in doubt (one store write, on disk with ``sync="commit"``);
3. send it (CHL_BATCH, in frames the server takes; the last asks the receiver to commit) and
   wait for the receiver's confirmation, which comes after its commit;
4. commit: the batch's messages leave the transmission queue in one write with the sync
   record. A failure between the receiver's commit and this one leaves the batch in doubt,
   which the next start resolves (or ``resolve`` by hand).

An idle channel sends a heartbeat every ``heartbeat`` seconds and ends itself after
``disconnect_interval`` (INACTIVE: it waits on its transmission queue and connects again when
a message comes). A partner that cannot be reached is tried again ``short_retry`` times every
``short_interval`` seconds, then ``long_retry`` times every ``long_interval`` (RETRYING), then
the channel stops. What retrying cannot mend stops it at once (STOPPED, with why): a
sequence number mismatch, a receiver that stopped the batch (no dead-letter queue), an
unknown channel at the partner, a refused token, a reset the partner refused (a sequence
number reset reaches the receiver only with the partner's admin token as the channel's token).

Waits are on the queue manager's clock, in slices of :data:`SLICE` so that ``stop`` is heard.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from sweepq.engine import OO, MQError, QueueManager, Reason
from sweepq.engine.constants import ChannelStatus, NpSpeed

from .. import client
from .. import protocol as P

if TYPE_CHECKING:
    from ..client import ClientConnection

SLICE = 0.25  # seconds: the longest a stop waits for the agent to notice it
CONNECT_TIMEOUT = 10.0
_BROKEN = (Reason.CONNECTION_BROKEN, Reason.HOST_NOT_AVAILABLE)


class _Retry(Exception):
    """The partner cannot be reached, or refused for now: try again later."""


class _Stop(Exception):
    """The channel cannot go on: it stops, and says why."""


class Sender:
    """One sender channel's agent (see the module docstring). ``status()`` is thread-safe;
    ``start`` and ``stop`` are called by :class:`~sweepq.net.channels.Channels`."""

    def __init__(self, qm: QueueManager, name: str, log: logging.Logger):
        self.qm = qm
        self.name = name
        self.log = log
        self.sync = qm.distributed.sync(name)
        self.defn = qm.distributed.channel(name)
        self.state = ChannelStatus.STARTING
        self.why = ""
        self.messages = 0
        self.batches = 0
        self.retries = 0
        self.partner = ""
        self.link: ClientConnection | None = None
        self._pending = None  # a batch assigned while the channel was not connected
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"sweepq-channel-{name}", daemon=True)

    # -- control (other threads) -----------------------------------------------------------------

    def start(self) -> None:
        """:raises MQError: CHANNEL_IN_USE (4031) when another agent runs it."""
        with self.sync.lock:
            if self.sync.active:
                raise MQError(Reason.CHANNEL_IN_USE, f"channel {self.name!r} is running already")
            self.sync.active = True
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        """End the agent: a batch in flight stays in doubt (the next start resolves it)."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        link = self.link
        if link is not None:
            link.abort()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    def status(self) -> dict:
        shown = self.state if self.alive or self.state == ChannelStatus.STOPPED else None
        out = status_of(self.qm, self.name, shown)
        out.update(messages=self.messages, batches=self.batches, retries=self.retries, partner=self.partner)
        if self.why:
            out["why"] = self.why
        return out

    # -- the thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        conn = None
        try:
            conn = self.qm.connect()
            xmitq = conn.open(self.defn.xmit_queue, OO.INPUT_EXCLUSIVE)
            self._loop(xmitq)
        except _Stop as e:
            self._stopped(str(e))
        except MQError as e:
            if not self._stopping.is_set():  # the queue manager closing ends a wait with 2009
                self._stopped(str(e))
        except Exception as e:  # an agent's bug: the channel stops, and says so
            self.log.exception("channel %s failed", self.name)
            self._stopped(f"the channel failed: {type(e).__name__}: {e}")
        finally:
            self._drop_link(bye=not self._stopping.is_set())
            self._release_pending()
            if conn is not None:
                with contextlib.suppress(MQError):
                    conn.disconnect()
            with self.sync.lock:
                self.sync.active = False
            if self.state != ChannelStatus.STOPPED:
                self.state = ChannelStatus.INACTIVE

    def _stopped(self, why: str) -> None:
        """An error retrying cannot mend: STOPPED until a user starts it, across restarts too."""
        self.state = ChannelStatus.STOPPED
        self.why = why
        self.log.warning("channel %s stopped: %s", self.name, why)
        with contextlib.suppress(MQError):
            self.sync.set_stopped(True)

    def _loop(self, xmitq) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                if self.link is None:
                    self._connect()
                    attempt = 0
                self._serve(xmitq)
                if not self._stopping.is_set():
                    self._idle(xmitq)
            except _Retry as e:
                self._drop_link()
                self._release_pending()
                if self._stopping.is_set():
                    return
                attempt += 1
                delay = self._retry_delay(attempt)
                if delay is None:
                    raise _Stop(f"{e}; gave up after {attempt - 1} retries") from None
                self.state, self.why, self.retries = ChannelStatus.RETRYING, str(e), attempt
                self.log.info("channel %s retrying in %g s (%d): %s", self.name, delay, attempt, e)
                self._pause(delay)

    def _retry_delay(self, attempt: int) -> float | None:
        d = self.defn
        if attempt <= d.short_retry:
            return d.short_interval
        if attempt <= d.short_retry + d.long_retry:
            return d.long_interval
        return None

    def _pause(self, seconds: float) -> None:
        clock = self.qm.clock
        deadline = clock.now() + seconds
        with self._cond:
            while not self._stopping.is_set() and clock.now() < deadline:
                clock.wait(self._cond, min(deadline, clock.now() + SLICE), background=True)

    # -- connecting ----------------------------------------------------------------------------

    def _connect(self) -> None:
        """Reach the partner, start its receiver, resolve a batch in doubt, agree on the
        sequence number. :raises _Retry: for now; :raises _Stop: for good."""
        d = self.defn
        try:
            self.link = client.connect(
                d.conname,
                d.token or None,
                cafile=d.cafile or None,
                client=f"channel {self.name} from {self.qm.name}",
                timeout=CONNECT_TIMEOUT,
                reply_timeout=max(30.0, 2 * d.heartbeat + 10),
            )
        except MQError as e:
            if e.reason == Reason.NOT_AUTHORIZED:
                raise _Stop(f"the partner at {d.conname} refused the channel's token ({e.text})") from None
            raise _Retry(f"cannot reach the partner at {d.conname}: {e.text}") from None
        options = {"batch_size": d.batch_size, "heartbeat": d.heartbeat, "np_speed": NpSpeed(d.np_speed).value}
        sync = self.sync
        try:
            reply = self.link.request(P.CHL_START, [self.name, self.qm.name, sync.seq, sync.reset_pending, options])
        except MQError as e:
            if e.reason == Reason.UNKNOWN_CHANNEL_NAME:
                raise _Stop(e.text) from None
            if e.reason == Reason.NOT_AUTHORIZED:  # a reset the partner's admin token did not come with
                raise _Stop(
                    f"the partner at {d.conname} refused this sender's sequence number reset (MQRC_NOT_AUTHORIZED "
                    f"2035: the admin token changes a receiver's sequence number): reset its receiver "
                    f"on its side too (sweepq channel reset {self.name} --seq {sync.seq}), or give this channel "
                    "the partner's admin token as its token, then start it again"
                ) from None
            raise _Retry(e.text) from None
        self.partner = str(reply.get("qm", ""))
        try:
            outcome = sync.resolve_with(bytes(reply["luwid"]))
        except MQError as e:
            raise _Retry(f"resolving the batch in doubt failed: {e}") from None
        if outcome is not None:
            what = "committed (the receiver had it)" if outcome else "backed out (the receiver did not have it)"
            self.log.info("channel %s: the batch in doubt was %s", self.name, what)
        if not sync.agreed(int(reply["seq"])):
            raise _Stop(
                f"sequence number mismatch: this sender's last is {sync.seq}, receiver {self.partner!r}'s is "
                f"{reply['seq']}; reset the channel (sweepq channel reset {self.name} --seq N) once you know which is "
                "right"
            )
        self.state, self.why = ChannelStatus.RUNNING, ""
        self.log.info("channel %s running to %s at %s", self.name, self.partner, d.conname)

    def _drop_link(self, bye: bool = False) -> None:
        link, self.link = self.link, None
        if link is None:
            return
        if bye:
            with contextlib.suppress(MQError):
                link.disconnect()
        else:
            link.abort()

    def _release_pending(self) -> None:
        batch, self._pending = self._pending, None
        if batch is not None:
            with contextlib.suppress(MQError):
                batch.release()

    # -- moving messages ----------------------------------------------------------------------------

    def _assign(self, xmitq):
        d = self.defn
        return xmitq.assign_batch(
            d.batch_size, int(SLICE * 1000), d.batch_interval, NpSpeed(d.np_speed) == NpSpeed.FAST
        )

    def _serve(self, xmitq) -> None:
        """Batches, heartbeats, until the stop or the disconnect interval (then it returns)."""
        d = self.defn
        clock = self.qm.clock
        idle_since = last_exchange = clock.now()
        while not self._stopping.is_set():
            batch, self._pending = self._pending or self._assign(xmitq), None
            if len(batch):
                if self._stopping.is_set():
                    batch.release()
                    return
                self._send(batch)
                idle_since = last_exchange = clock.now()
                continue
            now = clock.now()
            if d.disconnect_interval and now - idle_since >= d.disconnect_interval:
                return
            if d.heartbeat and now - last_exchange >= d.heartbeat:
                self._exchange(P.CHL_HEARTBEAT, [])
                last_exchange = now

    def _idle(self, xmitq) -> None:
        """Ended by the disconnect interval: INACTIVE until a message comes (then assigned to
        the batch that goes first once connected again)."""
        self._drop_link(bye=True)
        self.state = ChannelStatus.INACTIVE
        self.log.info(
            "channel %s ended after %g s idle; it starts again when a message comes",
            self.name,
            self.defn.disconnect_interval,
        )
        while not self._stopping.is_set():
            batch = self._assign(xmitq)
            if len(batch):
                self._pending = batch
                return

    def _exchange(self, op: int, args: list):
        try:
            return self.link.request(op, args)
        except MQError as e:
            if e.reason in _BROKEN:
                raise _Retry(f"the connection to {self.partner or self.defn.conname} broke") from None
            raise

    def _send(self, batch) -> None:
        """Steps 2 to 4 of the module docstring for one batch."""
        try:
            luwid, first = self.sync.begin(batch)
        except MQError as e:
            batch.release()
            raise _Retry(f"hardening a batch failed: {e}") from None
        try:
            self._transmit(luwid, first, batch.records)
        except MQError as e:  # the receiver refused the batch and backed it out
            try:
                self.sync.backout()
            except MQError as e2:
                raise _Retry(f"backing out a refused batch failed: {e2}") from None
            if e.reason == Reason.CHANNEL_ERROR:
                raise _Stop(e.text) from None
            raise _Retry(f"the receiver refused a batch: {e}") from None
        try:
            self.sync.commit()
        except MQError as e:
            raise _Retry(f"committing a batch failed ({e}); it is in doubt") from None
        self.messages += len(batch)
        self.batches += 1

    def _transmit(self, luwid: bytes, first: int, records: list[bytes]) -> None:
        """CHL_BATCH frames of at most half the server's frame limit; the last asks to commit."""
        limit = self.link.server.max_frame // 2
        chunks: list[list[bytes]] = [[]]
        size = 0
        for rec in records:
            if chunks[-1] and size + len(rec) > limit:
                chunks.append([])
                size = 0
            chunks[-1].append(rec)
            size += len(rec) + 8
        seq = first
        for k, chunk in enumerate(chunks):
            self._exchange(P.CHL_BATCH, [luwid, seq, chunk, k == len(chunks) - 1])
            seq += len(chunk)


def status_of(qm: QueueManager, name: str, running: ChannelStatus | None) -> dict:
    """A channel's status from its definition and sync state; ``running``: its agent's state
    (None: no agent runs it here)."""
    d = qm.distributed.channel(name)
    sync = qm.distributed.sync(name)
    indoubt = getattr(sync, "indoubt", None)
    if running is not None:
        state = running
    elif sync.active:  # a receiver's session holds it
        state = ChannelStatus.RUNNING
    elif sync.stopped:
        state = ChannelStatus.STOPPED
    else:
        state = ChannelStatus.INACTIVE
    if indoubt is not None and state != ChannelStatus.RUNNING:
        state = ChannelStatus.INDOUBT
    out = {
        "name": name,
        "type": d.type.value,
        "status": state.value,
        "indoubt": indoubt is not None,
        "seq": sync.seq,
        "luwid": sync.luwid.hex(),
        "stopped": sync.stopped,
        "messages": 0,
        "batches": 0,
    }
    if indoubt is not None:
        out.update(indoubt_luwid=indoubt.luwid.hex(), indoubt_seq=indoubt.last_seq, indoubt_messages=len(indoubt.keys))
    if d.type.value == "SENDER":
        out.update(conname=d.conname, xmit_queue=d.xmit_queue)
        with contextlib.suppress(MQError):
            out["xmit_depth"] = qm.inquire_queue(d.xmit_queue).current_depth
    return out
