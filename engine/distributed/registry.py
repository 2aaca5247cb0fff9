"""The queue manager's distributed-queuing objects, kept, loaded and resolved in one place.

:class:`Distributed` is a collaborator the queue manager owns (``qm.distributed``): its own
attributes (name, default transmission queue, dead-letter queue), the remote queue
definitions and queue-manager aliases, the channel definitions and each channel's sync
state (engine/distributed/sync.py). It implements the names resolution reads
(engine/distributed/resolve.py ``Names``).

Kept in the store as queue definitions are (``QueueManager._save_object``): named objects
whose keys start with NUL, which no queue name can (durable/layout.py
``queue_objects`` tells them apart): ``\\0QMGR``, ``\\0REMOTE\\0`` + name, ``\\0CHANNEL\\0``
+ name. Channel sync records live among the message records (sync.py says why).

Definitions change under the queue manager's definitions lock; reads are plain dict
look-ups (the put path's resolution takes no lock).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from sweepq.blobstore import Capability, StoreDamageError, StoreError

from ..constants import ChannelType, Reason, Usage
from ..errors import MQError
from ..queue import check_name
from . import objects, resolve
from .objects import MAX_CHANNEL_NAME, ChannelDefinition, QmgrAttributes, RemoteQueue
from .sync import SYNC_PREFIX, ChannelSync, ReceiverSync, SenderSync, restore_batch, sync_key

if TYPE_CHECKING:
    from ..internals import Manager

QMGR_KEY = b"\x00QMGR"
REMOTE_PREFIX = b"\x00REMOTE\x00"
CHANNEL_PREFIX = b"\x00CHANNEL\x00"


class Distributed:
    """See the module docstring."""

    def __init__(self, qm: Manager):
        self.qm = qm
        self.attrs = QmgrAttributes()
        self.remotes: dict[str, RemoteQueue] = {}
        self.channels: dict[str, ChannelDefinition] = {}
        self.syncs: dict[str, ChannelSync] = {}

    # -- what resolution reads (resolve.Names) ------------------------------------------------

    @property
    def qmgr_name(self) -> str:
        return self.attrs.name

    @property
    def default_xmit_queue(self) -> str:
        return self.attrs.default_xmit_queue

    def is_local(self, name: str) -> bool:
        return self.qm.queue_named(name) is not None or self.qm.internal.dynamic.is_model(name)

    def is_xmitq(self, name: str) -> bool | None:
        q = self.qm.queue_named(name)
        return None if q is None else q.attrs.usage == Usage.TRANSMISSION

    def remote(self, name: str) -> RemoteQueue | None:
        return self.remotes.get(name)

    def resolve(self, queue: str, qmgr: str = "") -> resolve.Route:
        """Where a message for ``queue`` on ``qmgr`` goes (engine/distributed/resolve.py)."""
        return resolve.resolve(self, queue, qmgr)

    # -- opening ------------------------------------------------------------------------------

    def open_qmgr(self, name: str | None, store) -> None:
        """At open: the queue manager's attributes kept in ``store`` (None: no data directory),
        written there on the first open. :raises MQError: Q_MGR_NAME_ERROR (2058) when
        ``name`` is given and the data directory holds another queue manager."""
        value = _read(lambda: store.objects().get(QMGR_KEY), "the queue manager's name") if store else None
        if value is None:
            self.attrs = QmgrAttributes(name if name is not None else "QM1").validated()
            if store is not None:
                self.qm.internal.save_object(QMGR_KEY, objects.encode(self.attrs), "the queue manager's name")
            return
        self.attrs = objects.decode(QmgrAttributes, value)
        if name is not None and name != self.attrs.name:
            raise MQError(
                Reason.Q_MGR_NAME_ERROR,
                f"this data directory holds queue manager {self.attrs.name!r}, not {name!r}; open it without a name "
                "(or with its own)",
            )

    def load(self, store) -> list[str]:
        """At open, after the queues: every definition and sync record; a sender's batch left
        in doubt is assigned again (before the sweeper starts). Returns what could not be
        read or restored, one line each (the recovery report's ``damaged``)."""
        problems: list[str] = []
        for key, value in sorted(_read(store.objects, "the channel and remote queue definitions").items()):
            for prefix, kind, into in (
                (REMOTE_PREFIX, RemoteQueue, self.remotes),
                (CHANNEL_PREFIX, ChannelDefinition, self.channels),
            ):
                if key.startswith(prefix):
                    name = key[len(prefix) :].decode(errors="replace")
                    try:
                        into[name] = objects.decode(kind, value)
                    except (MQError, TypeError, ValueError) as e:
                        problems.append(f"{kind.__name__} {name!r}: its definition cannot be read ({e}); left out")
        for name, d in self.channels.items():
            self.syncs[name] = _new_sync(name, d, self.qm.journal)
        stale = []
        for key, value in _sync_records(store, problems):
            name = key[len(SYNC_PREFIX) :].decode(errors="replace")
            sync = self.syncs.get(name)
            if sync is None:
                stale.append(key)  # its channel was deleted after it: a record nobody reads
                continue
            try:
                sync.load(value)
            except (KeyError, TypeError, ValueError) as e:
                problems.append(f"channel {name!r}: its sync record cannot be read ({e}); sequence number 0")
        if stale:
            with contextlib.suppress(StoreError):  # else read again, and dropped again, at the next open
                store.write_messages((), stale)
        for name, sync in self.syncs.items():
            problems += self._restore(name, sync)
        return problems

    def _restore(self, name: str, sync: ChannelSync) -> list[str]:
        d = getattr(sync, "indoubt", None)
        if d is None:
            return []
        q = self.qm.queue_named(self.channels[name].xmit_queue)
        if q is None:
            return [f"channel {name!r}: its batch in doubt was on {self.channels[name].xmit_queue!r}, which is gone"]
        d.batch, missing = restore_batch(q, d.keys)
        if missing:
            return [f"channel {name!r}: {missing} message(s) of its batch in doubt were not found on {q.name!r}"]
        return []

    # -- definitions --------------------------------------------------------------------------

    def alter_qmgr(self, **changes) -> QmgrAttributes:
        """ALTER QMGR: ``default_xmit_queue``, ``dead_letter_queue`` (the name is fixed).

        :raises MQError: PARM_VALUE_ERROR (3229); RESOURCE_PROBLEM (2102) when saving fails."""
        if "name" in changes:
            raise MQError(Reason.PARM_VALUE_ERROR, "a queue manager's name is fixed when it is created")
        attrs = objects.changed(self.attrs, changes, "queue manager attribute")
        with self.qm.internal.definitions:
            self.qm.internal.save_object(QMGR_KEY, objects.encode(attrs), "the queue manager's attributes")
            self.attrs = attrs
        return attrs

    def define_remote_queue(self, name: str, **attributes) -> RemoteQueue:
        """DEFINE QREMOTE (a queue-manager alias when ``remote_queue`` is "").

        :raises MQError: OBJECT_ALREADY_EXISTS (2100) when a queue of that name exists;
            PARM_VALUE_ERROR (3229); RESOURCE_PROBLEM (2102)."""
        check_name(name)
        r = objects.changed(RemoteQueue(), attributes, "remote queue attribute")
        with self.qm.internal.definitions:
            if self.is_local(name) or name in self.remotes:
                raise MQError(Reason.OBJECT_ALREADY_EXISTS, f"queue {name!r} is already defined")
            self.qm.internal.save_object(REMOTE_PREFIX + name.encode(), objects.encode(r), f"remote queue {name!r}")
            self.remotes[name] = r
        return r

    def delete_remote_queue(self, name: str) -> None:
        """DELETE QREMOTE. :raises MQError: UNKNOWN_OBJECT_NAME (2085); RESOURCE_PROBLEM (2102)."""
        with self.qm.internal.definitions:
            if name not in self.remotes:
                raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"no remote queue named {name!r}")
            self.qm.internal.save_object(REMOTE_PREFIX + name.encode(), None, f"remote queue {name!r}")
            del self.remotes[name]

    def define_channel(self, name: str, **attributes) -> ChannelDefinition:
        """DEFINE CHANNEL (``type`` SENDER or RECEIVER, docs/channels.md).

        :raises MQError: OBJECT_ALREADY_EXISTS (2100); PARM_VALUE_ERROR (3229) naming the
            attribute; RESOURCE_PROBLEM (2102)."""
        objects.object_name(name, "channel name", MAX_CHANNEL_NAME)
        d = objects.changed(ChannelDefinition(), attributes, "channel attribute")
        with self.qm.internal.definitions:
            if name in self.channels:
                raise MQError(Reason.OBJECT_ALREADY_EXISTS, f"channel {name!r} is already defined")
            self.qm.internal.save_object(CHANNEL_PREFIX + name.encode(), objects.encode(d), f"channel {name!r}")
            self.channels[name] = d
            self.syncs[name] = _new_sync(name, d, self.qm.journal)
        return d

    def alter_channel(self, name: str, **changes) -> ChannelDefinition:
        """ALTER CHANNEL: takes effect at the channel's next start; the type never changes.

        :raises MQError: CHANNEL_NOT_FOUND (4032), PARM_VALUE_ERROR (3229), CHANNEL_INDOUBT
            (4025) for a new transmission queue while a batch is in doubt on the old one."""
        with self.qm.internal.definitions:
            old = self.channel(name)
            d = objects.changed(old, changes, "channel attribute")
            if d.type != old.type:
                raise MQError(Reason.PARM_VALUE_ERROR, f"channel {name!r} is a {old.type}; its type cannot change")
            if d.xmit_queue != old.xmit_queue and getattr(self.syncs[name], "indoubt", None) is not None:
                raise MQError(Reason.CHANNEL_INDOUBT, f"channel {name!r} has a batch in doubt on {old.xmit_queue!r}")
            self.qm.internal.save_object(CHANNEL_PREFIX + name.encode(), objects.encode(d), f"channel {name!r}")
            self.channels[name] = d
        return d

    def delete_channel(self, name: str) -> None:
        """DELETE CHANNEL, with its sync record.

        :raises MQError: CHANNEL_NOT_FOUND (4032), CHANNEL_IN_USE (4031) while it runs,
            CHANNEL_INDOUBT (4025) while a batch is in doubt; RESOURCE_PROBLEM (2102)."""
        with self.qm.internal.definitions:
            self.channel(name)
            sync = self.syncs[name]
            with sync.lock:
                if sync.active:
                    raise MQError(Reason.CHANNEL_IN_USE, f"channel {name!r} is running; stop it first")
                if getattr(sync, "indoubt", None) is not None:
                    raise MQError(Reason.CHANNEL_INDOUBT, f"channel {name!r} has a batch in doubt; resolve it first")
                self.qm.internal.save_object(CHANNEL_PREFIX + name.encode(), None, f"channel {name!r}")
                del self.channels[name], self.syncs[name]
                if self.qm.journal is not None:
                    with contextlib.suppress(StoreError):  # a record left behind is dropped at the next open
                        self.qm.internal.store().write_messages((), [sync_key(name)])

    def channel(self, name: str) -> ChannelDefinition:
        """:raises MQError: CHANNEL_NOT_FOUND (4032)."""
        try:
            return self.channels[name]
        except (KeyError, TypeError):
            raise MQError(
                Reason.CHANNEL_NOT_FOUND, f"no channel named {name!r}; define it with define_channel()"
            ) from None

    def sync(self, name: str) -> ChannelSync:
        """A channel's sync state. :raises MQError: CHANNEL_NOT_FOUND (4032)."""
        self.channel(name)
        return self.syncs[name]


def _read(read, what: str):
    """What ``read()`` returns. :raises MQError: RESOURCE_PROBLEM (2102) when the store fails."""
    try:
        return read()
    except StoreError as e:
        raise MQError(Reason.RESOURCE_PROBLEM, f"reading {what} failed: {e}") from e


def _sync_records(store, problems: list[str]) -> list[tuple[bytes, bytes]]:
    """The channels' sync records; after damage, those the store can still prove (a channel
    whose record is lost starts again at sequence number 0 and says so in ``problems``).

    :raises MQError: RESOURCE_PROBLEM (2102) when the store cannot be read at all."""
    try:
        return store.messages(SYNC_PREFIX)
    except StoreDamageError as e:
        if Capability.SALVAGE not in store.capabilities:
            raise MQError(Reason.RESOURCE_PROBLEM, f"the channels' sync records are damaged ({e})") from e
        problems.append(f"the channels' sync records were damaged ({e}): a channel whose record is lost restarts at 0")
        return _read(lambda: store.salvage_messages(SYNC_PREFIX).pairs, "the channels' sync records")
    except StoreError as e:
        raise MQError(Reason.RESOURCE_PROBLEM, f"reading the channels' sync records failed: {e}") from e


def _new_sync(name: str, d: ChannelDefinition, journal) -> ChannelSync:
    return SenderSync(name, journal) if d.type == ChannelType.SENDER else ReceiverSync(name, journal)
