"""The Kombu transport: Kombu's virtual Channel and Transport on MQ queues (docs/celery.md).

* A Kombu queue is an MQ queue (names.py), defined when Kombu declares it.
* A publish is an MQ put: Kombu's priority 0-9 is the MQ priority (9 first, as RabbitMQ
  orders them), delivery mode 2 a persistent message, a message's ``expires`` header (Celery's
  broadcasts) its MQ expiry.
* A delivery is an MQ get under syncpoint on a connection of its own: each unacknowledged
  message holds one connection's unit of work, so that messages are settled one by one, in
  any order. ``ack`` commits it; ``reject`` commits (the message is dropped) or, with
  ``requeue``, backs out (the message is back in its place, its backout count raised:
  Kombu's ``redelivered``). A worker that dies has its connections broken, and the queue
  manager backs their units of work out: with ``task_acks_late`` its tasks are delivered
  again. Consumers with ``no_ack`` get outside syncpoint.
* Bindings are shared by every process (bindings.py), so direct, topic and fanout exchanges
  route across processes: Celery's remote control (``celery inspect``) works.
* Nothing blocks in the queue manager: an empty poll of every queue sleeps
  ``polling_interval`` (0.05 s unless the transport option says otherwise), as Kombu's other
  virtual transports do.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from queue import Empty
from typing import Any

from kombu.transport import virtual

from sweepq.engine import GMO, MD, OO, MQError, Persistence, Reason
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
    """A connection and its open input handles, by MQ queue name."""

    __slots__ = ("conn", "handles")

    def __init__(self, conn: QueueConnection):
        self.conn = conn
        self.handles: dict[str, QueueHandle] = {}

    def handle(self, name: str, options: OO) -> QueueHandle:
        h = self.handles.get(name)
        if h is None:
            h = self.handles[name] = self.conn.open(name, options)
        return h

    def drop(self, name: str) -> None:
        h = self.handles.pop(name, None)
        if h is not None:
            with contextlib.suppress(MQError):
                h.close()

    def disconnect(self) -> None:
        with contextlib.suppress(MQError):
            self.conn.disconnect()


class QoS(virtual.QoS):
    """Kombu's QoS with MQ's settlement: ack commits, reject backs out or commits."""

    channel: Channel

    def ack(self, delivery_tag: Any) -> None:
        self.channel._settle(delivery_tag, commit=True)
        super().ack(delivery_tag)

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        self.channel._settle(delivery_tag, commit=not requeue)
        self._quick_ack(delivery_tag)

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

    def __init__(self, connection: Transport, **kwargs: Any):
        super().__init__(connection, **kwargs)
        self.site: Site = connection.site
        self._main: _Holder | None = None
        self._outputs: dict[str, QueueHandle] = {}
        self._idle: list[_Holder] = []
        self._held: dict[Any, _Holder] = {}
        self._no_ack: set[str] = set()
        self._auto_delete: set[str] = set()  # declared auto_delete here: deleted when this channel closes
        self._settling = threading.Lock()

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
        """Commit or back out the unit of work that holds ``delivery_tag``'s message."""
        holder = self._held.pop(delivery_tag, None)
        if holder is None:  # a no-ack delivery, or settled already
            return
        try:
            if commit:
                holder.conn.commit()
            else:
                holder.conn.backout()
        except MQError as e:
            holder.disconnect()  # its unit of work is backed out by the queue manager
            if commit:
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
        name = mq_name(queue)
        if queue in self._no_ack:
            holder, options = self.main, GMO.NO_SYNCPOINT
        else:
            holder, options = self._delivery_holder(), GMO.SYNCPOINT
        try:
            m = holder.handle(name, OO.INPUT_SHARED).get(options)
        except MQError as e:
            if holder is not self._main:
                self._idle.append(holder)
            if e.reason == Reason.NO_MSG_AVAILABLE:
                raise Empty() from None
            if e.reason == Reason.UNKNOWN_OBJECT_NAME:  # deleted by another process
                holder.drop(name)
                raise Empty() from None
            raise _reached(e) from None
        payload = json.loads(m.data)
        props = payload["properties"]
        if m.backout_count:
            props.setdefault("delivery_info", {})["redelivered"] = True
            payload["redelivered"] = True
        if holder is not self._main:
            self._held[props["delivery_tag"]] = holder
        return payload

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
