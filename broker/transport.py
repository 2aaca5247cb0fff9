"""The Kombu transport: Kombu's virtual Channel and Transport on MQ queues (docs/celery.md).

* A Kombu queue is an MQ queue (names.py), defined when Kombu declares it.
* A publish is an MQ put: Kombu's priority 0-9 is the MQ priority (9 first, as RabbitMQ
  orders them), delivery mode 2 a persistent message, a message's ``expires`` header (Celery's
  broadcasts) its MQ expiry.
* A delivery is a batch: one MQ get of up to the consumer's prefetch room (``batch_size`` at
  most, 64 unless the transport option says otherwise) under syncpoint, on a connection of
  its own, in one round trip; the batch's unit of work is committed once every message of
  it is settled. ``ack`` settles a message; ``reject`` settles it (the message is dropped)
  or, with ``requeue``, asks for it back: when no message of the batch was acknowledged the
  batch is backed out (each back in its place, its backout count raised: Kombu's
  ``redelivered``), otherwise a copy marked ``redelivered`` is put back under the batch's
  unit of work, which then commits. A worker that dies has its connections broken, and the
  queue manager backs their units of work out: with ``task_acks_late`` its tasks are
  delivered again (a whole batch: those of it already acknowledged too, at least once).
  ``basic_get`` takes one message, its own unit of work. Consumers with ``no_ack`` get
  outside syncpoint.
* Bindings are shared by every process (bindings.py), so direct, topic and fanout exchanges
  route across processes: Celery's remote control (``celery inspect``) works.
* Nothing blocks in the queue manager: an empty poll of every queue waits
  ``polling_interval`` (0.05 s unless the transport option says otherwise), as Kombu's other
  virtual transports sleep, or less: until the consumer's prefetch window has room again,
  when the poll was empty because it had too little. A window is topped up once half of it
  is free (``batch_size`` at most), not at every acknowledgement.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from queue import Empty
from typing import Any

from kombu.transport import virtual

from sweepq.engine import GMO, MD, OO, PMO, Message, MQError, Persistence, Reason
from sweepq.engine.api import QueueConnection, QueueHandle

from .bindings import Bindings
from .names import mq_name
from .site import Site, site_of

_GONE = (Reason.CONNECTION_BROKEN, Reason.HOST_NOT_AVAILABLE, Reason.Q_MGR_NOT_AVAILABLE)


class BrokerUnreachable(ConnectionError):
    """The queue manager cannot be reached (MQ's 2009, 2538, 2059): Kombu and Celery count it
    as a connection error, and connect again."""


def _reached(e: MQError) -> Exception:
    return BrokerUnreachable(str(e)) if e.reason in _GONE else e


class _Holder:
    """A connection and its open handles, by MQ queue name and open options."""

    __slots__ = ("conn", "handles")

    def __init__(self, conn: QueueConnection):
        self.conn = conn
        self.handles: dict[tuple[str, OO], QueueHandle] = {}

    def handle(self, name: str, options: OO) -> QueueHandle:
        h = self.handles.get((name, options))
        if h is None:
            h = self.handles[name, options] = self.conn.open(name, options)
        return h

    def drop(self, name: str) -> None:
        for key in [key for key in self.handles if key[0] == name]:
            with contextlib.suppress(MQError):
                self.handles.pop(key).close()

    def disconnect(self) -> None:
        with contextlib.suppress(MQError):
            self.conn.disconnect()


class _Batch:
    """The messages of one delivery, held in one connection's unit of work until each is
    settled: acknowledged (``acked``) or asked back (``requeued``, their messages kept to put
    back a copy). Settled from any thread (Kombu's acks come from a worker's pool threads)."""

    __slots__ = ("acked", "holder", "lock", "messages", "pending", "queue", "requeued")

    def __init__(self, holder: _Holder, queue: str, messages: dict[Any, Message]):
        self.holder = holder
        self.queue = queue
        self.messages = messages  # delivery tag -> the MQ message
        self.pending = set(messages)
        self.acked = 0
        self.requeued: list[Message] = []
        self.lock = threading.Lock()

    def settled(self, tag: Any, ack: bool) -> bool:
        """Note ``tag`` settled; true when it was the batch's last (its unit of work to end)."""
        with self.lock:
            self.pending.discard(tag)
            if ack:
                self.acked += 1
            else:
                self.requeued.append(self.messages[tag])
            return not self.pending


def _redelivered(m: Message) -> tuple[bytes, MD]:
    """A copy of ``m`` to put back, marked ``redelivered``, with its priority, persistence and
    what remains of its expiry."""
    payload = json.loads(m.data)
    payload["redelivered"] = True
    payload.setdefault("properties", {}).setdefault("delivery_info", {})["redelivered"] = True
    md = m.md
    expiry = md.expiry if md.expiry != 0 else 1  # -1: none; a tenth of a second at least
    return json.dumps(payload).encode(), MD(priority=md.priority, persistence=md.persistence, expiry=expiry)


class QoS(virtual.QoS):
    """Kombu's QoS with MQ's settlement: ack commits, reject backs out or commits."""

    channel: Channel

    def ack(self, delivery_tag: Any) -> None:
        self.channel._settle(delivery_tag, commit=True)
        super().ack(delivery_tag)
        self._room_made()

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        self.channel._settle(delivery_tag, commit=not requeue)
        self._quick_ack(delivery_tag)
        self._room_made()

    def refill_at(self) -> int:
        """The room the prefetch window needs before its consumer takes more: half the window,
        ``batch_size`` at most, 1 with no window. Topped up at every acknowledgement, a
        worker's window took its batches one or two messages at a time, a round trip each."""
        p = self.prefetch_count
        return max(1, min(self.channel.batch_size, p // 2)) if p else 1

    def can_consume(self) -> bool:
        """Kombu's: the window has room, here ``refill_at()`` at least."""
        p = self.prefetch_count
        return not p or p - (len(self._delivered) - len(self._dirty)) >= self.refill_at()

    def _room_made(self) -> None:
        transport = self.channel.connection
        if transport is not None and self.can_consume():  # its consumer's empty poll waits for this
            transport.settled.set()

    def restore_unacked(self) -> list:
        """Back out every unacknowledged message (they return in place, as MQ keeps them)."""
        self._flush()
        for tag in list(self._delivered):
            self.channel._settle(tag, commit=False)
        self._delivered.clear()
        return []


class Channel(virtual.Channel):
    """A Kombu channel on MQ queues (see the module docstring)."""

    QoS = QoS
    supports_fanout = True
    from_transport_options = (*virtual.Channel.from_transport_options, "queue_attributes")
    #: Attributes a queue Kombu declares is defined with (e.g. ``{"memory_policy": ...}``).
    queue_attributes: dict | None = None

    from_transport_options = (*from_transport_options, "batch_size")
    #: The most messages one delivery takes under one unit of work (1: each its own).
    batch_size: int = 64

    def __init__(self, connection: Transport, **kwargs: Any):
        super().__init__(connection, **kwargs)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise MQError(
                Reason.PARM_VALUE_ERROR,
                f"transport option batch_size={self.batch_size!r}: give a whole number of messages, 1 or more",
            )
        self.site: Site = connection.site
        self._main: _Holder | None = None
        self._outputs: dict[str, QueueHandle] = {}
        self._idle: list[_Holder] = []
        self._held: dict[Any, _Batch] = {}
        self._no_ack: set[str] = set()
        self._auto_delete: set[str] = set()  # declared auto_delete here: deleted when this channel closes

    # -- connections ---------------------------------------------------------------------

    @property
    def main(self) -> _Holder:
        """The channel's connection for puts, no-ack gets and inquiries."""
        if self._main is None:
            try:
                self._main = _Holder(self.site.connect())
            except MQError as e:
                raise _reached(e) from None
        return self._main

    def _delivery_holder(self) -> _Holder:
        try:
            return self._idle.pop()
        except IndexError:
            try:
                return _Holder(self.site.connect())
            except MQError as e:
                raise _reached(e) from None

    def _settle(self, delivery_tag: Any, commit: bool) -> None:
        """Settle ``delivery_tag``'s message: acknowledged (``commit``) or asked back. The last
        of its batch ends the batch's unit of work (see the module docstring)."""
        batch = self._held.pop(delivery_tag, None)
        if batch is None:  # a no-ack delivery, or settled already
            return
        if batch.settled(delivery_tag, commit):
            self._end(batch)

    def _end(self, batch: _Batch) -> None:
        """Commit the batch's unit of work, with a copy of each message asked back put under
        it; or back it all out when none was acknowledged."""
        holder = batch.holder
        try:
            if not batch.acked:
                holder.conn.backout()
            else:
                if batch.requeued:
                    out = holder.handle(mq_name(batch.queue), OO.OUTPUT)
                    for m in batch.requeued:
                        out.put(*_redelivered(m), PMO.SYNCPOINT)
                holder.conn.commit()
        except MQError as e:
            holder.disconnect()  # its unit of work is backed out by the queue manager
            if batch.acked:
                raise _reached(e) from None
            return
        self._idle.append(holder)

    # -- Kombu's virtual channel ---------------------------------------------------------

    def queue_bind(self, queue: str, exchange: str | None = None, routing_key: str = "", *a: Any, **k: Any) -> None:
        if not exchange:  # the default exchange routes by queue name: no binding to share (Celery's rpc://)
            return
        super().queue_bind(queue, exchange, routing_key, *a, **k)

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack.add(queue)
            try:
                return super().basic_get(queue, no_ack, **kwargs)
            finally:
                self._no_ack.discard(queue)
        return super().basic_get(queue, no_ack, **kwargs)

    def _get(self, queue: str, timeout: float | None = None) -> dict:
        """One message (Kombu's ``basic_get``), its own unit of work."""
        return self._take(queue, 1)[0]

    def _get_and_deliver(self, queue: str, callback: Any) -> None:
        """A batch from ``queue`` to the consumer's callback (Kombu's poll of one queue): as
        many as its prefetch window has room for, ``batch_size`` at most."""
        room = self.qos.can_consume_max_estimate() if queue not in self._no_ack else None
        payloads = self._take(queue, min(room or self.batch_size, self.batch_size))
        delivered = 0
        try:
            for payload in payloads:
                callback(payload, queue)
                delivered += 1
        finally:
            for payload in payloads[delivered + 1 :]:  # the callback failed: those after it go back
                self._settle(payload["properties"]["delivery_tag"], commit=False)

    def _take(self, queue: str, n: int) -> list[dict]:
        """Up to ``n`` messages of ``queue`` in one get: Kombu's payloads, held in one unit of
        work (a ``_Batch``) unless the queue is consumed with ``no_ack``.

        :raises Empty: none is there (or the queue is gone)."""
        name = mq_name(queue)
        if queue in self._no_ack:
            holder, options = self.main, GMO.NO_SYNCPOINT
        else:
            holder, options = self._delivery_holder(), GMO.SYNCPOINT
        try:
            got = holder.handle(name, OO.INPUT_SHARED).get_many(n, options)
        except MQError as e:
            got = []
            if e.reason == Reason.UNKNOWN_OBJECT_NAME:  # deleted by another process
                holder.drop(name)
            elif e.reason != Reason.NO_MSG_AVAILABLE:
                if holder is not self._main:
                    holder.disconnect()
                raise _reached(e) from None
        if not got:
            if holder is not self._main:
                self._idle.append(holder)
            raise Empty()
        payloads, held = [], {}
        for m in got:
            payload = json.loads(m.data)
            props = payload["properties"]
            if m.backout_count:
                props.setdefault("delivery_info", {})["redelivered"] = True
                payload["redelivered"] = True
            payloads.append(payload)
            held[props["delivery_tag"]] = m
        if holder is not self._main:
            batch = _Batch(holder, queue, held)
            for tag in held:  # before any is delivered: an ack may come from another thread at once
                self._held[tag] = batch
        return payloads

    def _put(self, queue: str, message: dict, **kwargs: Any) -> None:
        name = mq_name(queue)
        props = message.get("properties") or {}
        md = MD(
            priority=self._get_message_priority(message),
            persistence=Persistence.PERSISTENT if props.get("delivery_mode") == 2 else Persistence.NOT_PERSISTENT,
        )
        expires = (message.get("headers") or {}).get("expires")
        if isinstance(expires, int | float) and expires > 0:
            md.expiry = max(1, int((expires - time.time()) * 10))
        data = json.dumps(message).encode()
        try:
            h = self._outputs.get(name)
            if h is None:
                try:
                    h = self.main.conn.open(name, OO.OUTPUT)
                except MQError as e:
                    if e.reason != Reason.UNKNOWN_OBJECT_NAME:
                        raise
                    self._new_queue(queue)  # as Redis makes a list on a push
                    h = self.main.conn.open(name, OO.OUTPUT)
                self._outputs[name] = h
            h.put(data, md)
        except MQError as e:
            raise _reached(e) from None

    def _put_fanout(self, exchange: str, message: dict, routing_key: str, **kwargs: Any) -> None:
        for queue in {queue for _, _, queue in self.get_table(exchange)}:
            self._put(queue, message)

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        self.connection.bindings.add((exchange, routing_key, pattern, queue))

    def queue_unbind(self, queue: str, exchange: str | None = None, routing_key: str = "", *a: Any, **k: Any) -> None:
        super().queue_unbind(queue, exchange, routing_key, *a, **k)
        self.connection.bindings.remove(lambda b: b[0] == exchange and b[1] == routing_key and b[3] == queue)

    def get_table(self, exchange: str) -> list:
        return self.connection.bindings.table(exchange)

    def _new_queue(self, queue: str, auto_delete: bool = False, **kwargs: Any) -> None:
        if auto_delete:
            self._auto_delete.add(queue)
        self.connection.define(mq_name(queue), self.queue_attributes or {})

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        try:
            self.site.inquire(mq_name(queue))
        except MQError as e:
            if e.reason == Reason.UNKNOWN_OBJECT_NAME:
                return False
            raise _reached(e) from None
        return True

    def _size(self, queue: str) -> int:
        try:
            return self.site.inquire(mq_name(queue)).current_depth
        except MQError as e:
            if e.reason == Reason.UNKNOWN_OBJECT_NAME:
                return 0
            raise _reached(e) from None

    def _purge(self, queue: str) -> int:
        name = mq_name(queue)
        h = self.main.handle(name, OO.INPUT_SHARED)
        count = 0
        while batch := h.get_many(1000, GMO.NO_SYNCPOINT):
            count += len(batch)
        return count

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any) -> None:
        """Delete the MQ queue and its bindings (in every process's view)."""
        if if_empty and self._size(queue):
            return
        self.state.queue_bindings_delete(queue)
        self.connection.bindings.remove(lambda b: b[3] == queue)
        name = mq_name(queue)
        self.main.drop(name)
        out = self._outputs.pop(name, None)
        if out is not None:
            out.close()
        self.connection.delete(name)

    def close(self) -> None:
        if not self.closed and self.connection is not None:
            for queue in self._auto_delete & set(self._active_queues):  # AMQP's auto_delete: its consumer goes
                with contextlib.suppress(MQError, ConnectionError):
                    self.queue_delete(queue)
        super().close()
        for tag in list(self._held):
            self._settle(tag, commit=False)
        for holder in [*self._idle, *([self._main] if self._main is not None else [])]:
            holder.disconnect()
        self._idle.clear()
        self._outputs.clear()
        self._main = None


class Transport(virtual.Transport):
    """Kombu's transport for sweepq (``sweepq+unix://``, ``+tcp://``, ``+tls://``, ``+dir://``,
    ``+memory://``: site.py). One per Kombu connection; its channels share its bindings."""

    Channel = Channel
    polling_interval = 0.05
    default_port = 1414
    driver_type = "sweepq"
    driver_name = "sweepq"
    can_parse_url = True  # the URL is read here (site.py), not by Kombu
    connection_errors = (*virtual.Transport.connection_errors, BrokerUnreachable)
    implements = virtual.Transport.implements.extend(exchange_type=frozenset(["direct", "topic", "fanout"]))

    def __init__(self, client: Any, **kwargs: Any):
        super().__init__(client, **kwargs)
        options = client.transport_options
        self.site = site_of(client.hostname, options)
        self._defined: set[str] = set()
        self.bindings = Bindings(
            self.site.connect, lambda name: self.define(name, {}), options.get("bindings_ttl", 1.0)
        )
        #: Set when a consumer's prefetch window has room again (QoS.refill_at), so that an
        #: empty poll waits for it rather than all of polling_interval.
        self.settled = threading.Event()

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Kombu's virtual ``drain_events`` (deliver from the next channel that has a message,
        waiting ``polling_interval`` between empty polls), the wait cut short when a consumer's
        prefetch window has room again: with a worker's window full, the poll is empty until
        its pool acknowledges tasks, and sleeping all of the interval then would idle the pool."""
        start = time.monotonic()
        interval = self.polling_interval
        if timeout and interval and interval > timeout:
            interval = timeout
        while True:
            self.settled.clear()
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                if timeout is not None and time.monotonic() - start >= timeout:
                    raise TimeoutError() from None  # socket.timeout, as Kombu raises
                if interval is not None:
                    self.settled.wait(interval)

    def establish_connection(self) -> Transport:
        """Kombu's, and the queue manager reached now: a wrong URL or token fails at connect."""
        conn = super().establish_connection()
        self._avail_channels[-1].main  # noqa: B018 - its connection, opened
        return conn

    def define(self, name: str, attributes: dict) -> None:
        """Define the MQ queue ``name`` unless it exists (once per transport)."""
        if name in self._defined:
            return
        try:
            try:
                self.site.inquire(name)
            except MQError as e:
                if e.reason != Reason.UNKNOWN_OBJECT_NAME:
                    raise
                try:
                    self.site.admin.define_queue(name, **attributes)
                except MQError as e2:
                    if e2.reason == Reason.NOT_AUTHORIZED:
                        raise MQError(
                            e2.reason,
                            f"queue {name!r} is not defined, and defining it needs the admin token "
                            "(transport option admin_token, ?admin_token= or $SWEEPQ_ADMIN_TOKEN), "
                            f"or define it first: sweepq define {name} --server URL",
                        ) from None
                    if e2.reason != Reason.OBJECT_ALREADY_EXISTS:
                        raise
        except MQError as e:
            raise _reached(e) from None
        self._defined.add(name)

    def delete(self, name: str) -> None:
        """Delete the MQ queue ``name`` with its messages (nothing when it is gone already)."""
        self._defined.discard(name)
        try:
            self.site.admin.delete_queue(name, purge=True)
        except MQError as e:
            if e.reason not in (Reason.UNKNOWN_OBJECT_NAME, Reason.OBJECT_IN_USE):
                raise _reached(e) from None

    def driver_version(self) -> str:
        from importlib.metadata import version

        return version("sweepq")

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        self.bindings.close()
        self.site.close()
