"""The queue manager: the registry of queues and connections, and the manager-wide settings.

Defining, altering and deleting queues is serialised by one definitions lock; everything a
message does (put, get, commit) takes only the locks of the queues it touches.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from sweepq.blobstore import Capability, DamageLog, Store, StoreError
from sweepq.blobstore.store import DEFAULT_MAX_BLOB_BYTES
from sweepq.sweeper import Sweeper, SweepStats
from sweepq.sweeper.clock import Clock, SystemClock

from . import checks, extensions
from .budget import MemoryBudget, MemoryUse, give_back, store_options_within
from .connection import Connection
from .constants import Reason
from .distributed import Distributed
from .durable import Journal, ledger
from .durable.layout import encode_definition, queue_prefix
from .durable.recovery import RecoveryReport, recover
from .durable.rewrite import rewrite
from .dynamic import DEFAULT_DYNAMIC_NAME, DynamicQueues
from .errors import MQError
from .internals import ManagerInternals, Service
from .queue import LocalQueue, QueueAttributes, QueueInfo, check_name
from .queuesweep import QueueSweep
from .record import Identity
from .sequence import arrivals
from .settings import DurabilitySettings, MemorySettings, MessageSettings, SweeperSettings, check_place
from .storage import Storage

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    from .distributed import ChannelDefinition, QmgrAttributes, RemoteQueue, Route

_ATTR_NAMES = frozenset(f.name for f in fields(QueueAttributes))
Group = TypeVar("Group", SweeperSettings, DurabilitySettings, MemorySettings, MessageSettings)


class QueueManager:
    """An in-process queue manager.

    ``QueueManager(name=None, *, path=None, clock=None, store=None, sweeping=None,
    durability=None, memory=None, messages=None)``: every setting has one spelling. Besides
    the name, the clock and where the blobs go, the settings come in four groups
    (engine/settings.py), each checked when it is made and each None for its defaults:
    ``sweeping=SweeperSettings(...)`` (the slow queue sweeper: on or off, its rule, its duty,
    read-ahead, a trace of the run), ``durability=DurabilitySettings(...)`` (durable, sync,
    repair, store options), ``memory=MemorySettings(...)`` (the memory budget and what it
    counts) and ``messages=MessageSettings(...)`` (MAXMSGL, MAXUMSGS, backout handling). The
    fields' docstrings say what each setting does.

    ``path`` is the data directory of the blob store that swept messages go to (None: a
    private temporary store, removed at close); ``store`` puts the queues' blobs in a given
    :class:`~sweepq.blobstore.Store` instead. The sweeper runs on a background thread every
    ``policy.interval`` seconds of ``clock`` time; the ``SweepPolicy`` holds the rule's
    factor and buffer extra (seed 003: 2 and 5; ``rule="adaptive"`` does not re-sweep what
    came back).

    A memory budget (``MemorySettings.budget``; 0: none) makes the sweeper sweep beyond its
    rule while the messages in memory and the store's own memory are over it: the queues with
    the most sweepable bytes first, each keeping its x + extra buffer
    (``SweepPolicy.memory_budget``), and each queue's ``memory_policy`` acts on puts near it
    (engine/budget.py, docs/sweeper.md "The memory budget").

    Durability (default: on with a data directory, off otherwise): queue definitions and
    persistent messages are kept in the store and come back, in order and with their backout
    counts, when a queue manager opens it again (engine/durable). ``DurabilitySettings.sync``
    says when a durable change is safe: ``"commit"`` (default: on disk before put, get or
    commit returns; concurrent commits share one fsync), ``"os"`` (in the log: a crash of the
    process loses nothing that returned), ``"none"`` (no log). Non-persistent messages are
    never written for durability and do not survive a restart, as in MQ. ``recovery`` reports
    what the open found.

    ``name``: the queue manager's name (None: the data directory's, or QM1). ``clock``
    drives WAIT intervals, put times and the sweep cycle (inject a ``ManualClock`` in tests).

    :raises MQError: Q_MGR_NAME_ERROR (2058) for a name that is not a str; PARM_VALUE_ERROR
        (3229) naming the first wrong setting, or a group of the wrong kind; RESOURCE_PROBLEM
        (2102) when the data directory cannot be opened.
    :raises TypeError: for a keyword it does not take (as any Python call).
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        path: str | os.PathLike | None = None,
        clock: Clock | None = None,
        store: Store | None = None,
        sweeping: SweeperSettings | None = None,
        durability: DurabilitySettings | None = None,
        memory: MemorySettings | None = None,
        messages: MessageSettings | None = None,
    ):
        # Everything is checked before anything is made: each group checks itself (settings.py).
        if name is not None and not isinstance(name, str):  # None: the data directory's, or QM1
            raise MQError(Reason.Q_MGR_NAME_ERROR, "the queue manager name must be a str")
        check_place(path, store)
        self._start(
            name,
            clock,
            path,
            store,
            _group(sweeping, SweeperSettings, "sweeping"),
            _group(durability, DurabilitySettings, "durability"),
            _group(memory, MemorySettings, "memory"),
            _group(messages, MessageSettings, "messages"),
        )

    def _start(
        self,
        name: str | None,
        clock: Clock | None,
        path: str | os.PathLike | None,
        store: Store | None,
        sweeping: SweeperSettings,
        durability: DurabilitySettings,
        memory: MemorySettings,
        messages: MessageSettings,
    ) -> None:
        """Make the queue manager of checked settings, in the order each part needs: the
        registries, the store, the queues and messages recovered from it, then the sweeper
        and the memory budget over what was recovered (its first count includes them)."""
        budget = memory.limit
        self.clock: Clock = clock or SystemClock()
        self.max_uncommitted = messages.max_uncommitted
        self.backout_handling = messages.backout_handling
        self.max_msg_length = messages.max_msg_length
        self.readahead_low_water = sweeping.readahead_low_water
        # Message instance numbers (engine/sequence.py): tokens, arrival order. The put path
        # draws them with sequence.next (next_seq, for the callers that take a function).
        self.sequence = arrivals(1)
        self.next_seq = self.sequence.next
        self._queues: dict[str, LocalQueue] = {}
        self._defs = threading.Lock()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self.internal: ManagerInternals = _Internals(self)  # for the engine's own modules: internals.py
        self._dynamic = DynamicQueues(self)  # model queues and temporary dynamic queues
        self._servers: list[Service] = []  # listeners started by serve(), stopped first by close()
        self._channels: Any = None  # the channel agents (net/channels/), once asked for: see channels
        # Distributed queuing: the queue manager's own attributes (its name), remote queues,
        # channels and their sync state (engine/distributed/).
        self.distributed = Distributed(self)
        self.closed = False
        # Started after recovery (_start_budget), over every queue recovered: the queues that
        # recovery defines get it there, the ones defined later in _new_queue.
        self.budget: MemoryBudget | None = None
        self.recorder = None
        if sweeping.trace_path is not None:
            from .recorder import TraceRecorder

            self.recorder = TraceRecorder(sweeping.trace_path, self.clock)
        store_options = durability.store_options
        if budget:
            store_options = store_options_within(budget, store_options, memory.counts)
        self._storage = Storage(
            path,
            store_options,
            store,
            wal=durability.sync != "none",
            repair=durability.repair,
            redo=durability.sync == "commit",
            defer=durability.sync == "os",
        )
        keeps = durability.keeps(on_disk=path is not None)
        self.journal: Journal | None = Journal(self._storage.store, durability.sync) if keeps else None
        self.recovery: RecoveryReport | None = None
        self._damage: list[str] = []  # what rewriting records after damage could not do
        try:
            self.distributed.open_qmgr(name, self._storage.store() if self.journal is not None else None)
        except BaseException:
            self._storage.abandon()
            raise
        self.name = self.distributed.qmgr_name  # kept in the data directory
        self.ident = Identity.for_qmgr(self.name)  # the MsgIds it generates carry the name
        if self.journal is not None:
            try:
                self.recovery = self._recover()
                self.recovery.damaged += self.distributed.load(self._storage.store())  # batches in doubt
            except BaseException:
                self._storage.abandon()
                raise
        policy = replace(sweeping.policy, memory_budget=budget) if budget else sweeping.policy
        self.sweeper = Sweeper(self, policy, self.clock, duty=sweeping.duty)
        if budget:
            self._start_budget(budget, store_options, memory.counts)
        if sweeping.run:
            self.sweeper.start()

    def _start_budget(self, memory_budget: int, store_options: dict | None, counts: str) -> None:
        """The memory budget (engine/budget.py) over every queue recovered so far; queues
        defined later get it from define_queue. Pages are at most the store's blob size.
        ``counts``: what it counts (``budget_counts``). A private store opens at its first
        write: until then the budget reserves the limits it will open with."""
        opts = store_options or {}
        unopened = 0 if self._storage.opened else opts["write_buffer_bytes"] + opts["block_cache_bytes"]
        self.budget = MemoryBudget(
            memory_budget, self._swept_queues, self.store_memory, self.sweeper, self.clock, counts, unopened
        )
        blob_bytes = (store_options or {}).get("max_blob_bytes", DEFAULT_MAX_BLOB_BYTES)
        page_bytes = self.budget.page_bytes = self.budget.page_size(blob_bytes)
        self.budget.ahead_bytes = self.budget.ahead_size(blob_bytes)
        self.sweeper.budget = self.budget
        for q in self._queues.values():
            q.budget, q.sweep.page_bytes = self.budget, page_bytes
            q.tier.readahead_bytes = self.budget.ahead_bytes

    def _recover(self) -> RecoveryReport:
        """Load the stored queues and messages, checked against the last checkpoint; say
        what damage the open found; write the checkpoint anew (a lane found as the last one
        lists it is written as it was: ledger.snapshot); listen for damage found while
        open (the store rebuilds, this manager writes again what it holds in memory)."""
        store = self._storage.store()
        found: list[str] = []
        last = ledger.read(store, found)
        report = recover(self, last)
        if Capability.DAMAGE_LOG in store.capabilities:
            log: DamageLog = store  # type: ignore[assignment]  # declared by Capability.DAMAGE_LOG
            found += log.damage_log()
            log.on_damage(lambda families: rewrite(self, families, self._damage))
        found += [
            f"repair set store file {name} aside (moved to lost/); records only it held are gone"
            for name in self._storage.repaired
        ]
        report.damaged[:0] = found
        self.sequence = arrivals(report.next_seq)
        self.next_seq = self.sequence.next
        why = ledger.write(self, report.next_seq, closed=False, last=last)
        if why:
            report.damaged.append(why)
        return report

    def damage(self) -> list[str]:
        """What the store found damaged and set right since this queue manager opened (a
        family of records rebuilt without what it could not prove, a reopen after a failed
        write), oldest first; at open, ``recovery.damaged`` says what the open found. Empty
        for a store that keeps no such log."""
        store = self._storage.store() if self._storage.opened else None
        if store is None or Capability.DAMAGE_LOG not in store.capabilities:
            return list(self._damage)
        log: DamageLog = store  # type: ignore[assignment]
        return [*log.damage_log(), *self._damage]

    @classmethod
    def open(cls, path: str | os.PathLike, **options: Any) -> QueueManager:
        """A queue manager on the data directory ``path`` (created if missing; its parent must
        exist): every queue definition and persistent message stored there comes back. The
        ``options`` are the constructor's other keywords (``name``, ``clock``, the groups).

        :raises MQError: RESOURCE_PROBLEM (2102) with what to do when ``path`` is a file, not
            a sweepq store, of a newer format, or open in another queue manager."""
        return cls(path=path, **options)

    # -- the sweeper's view (sweeper.cycle.SweepSource) ---------------------------------------

    def _swept_queues(self) -> list[LocalQueue]:
        temporary = self._dynamic.temporary  # never swept: nothing of them outlives them
        return [q for q in self._queues.values() if q.name not in temporary]

    def sweepables(self) -> list[QueueSweep]:
        return [q.sweep for q in self._swept_queues()]

    def blob_store(self) -> Store:
        return self._storage.store()

    def stats(self) -> dict[str, SweepStats]:
        """Sweep statistics per queue, and their sum under the key ``"*"``. Still readable
        after :meth:`close`: they are then the final figures (also written beside the store)."""
        per = {q.name: q.stats() for q in self.sweepables()}
        per["*"] = SweepStats.total(list(per.values()))
        return per

    def memory_use(self) -> MemoryUse:
        """What the queues and the store hold in memory now, as the memory budget counts it
        (engine/budget.py): records in memory with their per-message cost, and the store's
        memtables and block cache; ``budget`` is 0 without one. Thread-safe, lock-free."""
        if self.budget is not None:
            return self.budget.use()
        return MemoryBudget(0, self._swept_queues, self.store_memory, None, self.clock).use()

    def store_memory(self) -> dict[str, int]:
        """Bytes the blob store holds in memory (write buffers, read cache), by kind, with
        their configured limits; empty until the store is opened."""
        return self._storage.store().memory() if self._storage.opened else {}

    # -- connections ----------------------------------------------------------------------

    def connect(self) -> Connection:
        """MQCONN: a new connection (one per thread; see engine.connection)."""
        if self.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager has been closed")
        conn = Connection(self)
        self._connections.add(conn)
        return conn

    def _forget(self, conn: Connection) -> None:
        self._connections.discard(conn)

    def close(self) -> None:
        """Stop the sweeper, disconnect every connection (backing out its work), wake every
        waiter, write the checkpoint of live messages and the final statistics next to the
        store, and close the store.

        The data directory is released whatever fails on the way (a full disk), so that it
        can be opened again in this process. :raises MQError: RESOURCE_PROBLEM (2102) saying
        what could not be written; every change made before is in the store's log."""
        if self.closed:
            return
        if self._channels is not None:  # channels first: a batch in flight ends, in doubt or not
            self._channels.close()
        for server in list(self._servers):  # clients first: their units of work are backed out
            server.close()
        self.sweeper.stop()
        for conn in list(self._connections):
            conn.end()  # even one whose call waits: the wait ends with 2009
        self.closed = True
        for q in list(self._queues.values()):
            q.wake_all()
        for q in list(self._queues.values()):
            q.tier.run_cleanup()
        problems = []
        try:
            if self.journal is not None and self._storage.opened:
                problems.append(ledger.write(self, self.next_seq(), closed=True))
            if self._storage.path is not None and self._storage.opened:
                problems.append(_write_stats(self._storage.path, self.stats()))
        finally:
            try:
                self._storage.close()
            except StoreError as e:
                problems.append(str(e))
            finally:
                if self.recorder is not None:
                    self.recorder.close()
                if self.budget is not None:
                    give_back()  # what the queues held goes back to the system
        problems = [p for p in problems if p]
        if problems:
            raise MQError(
                Reason.RESOURCE_PROBLEM,
                f"closing queue manager {self.name!r}: {'; '.join(problems)}. The data directory is released.",  # type: ignore[arg-type]  # the Nones were dropped
            )

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queue definitions ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager has been closed; open a new one")

    def define_queue(self, name: str, **attributes: object) -> QueueInfo:
        """DEFINE QLOCAL. Keyword arguments are :class:`QueueAttributes` fields."""
        self._check_open()
        check_name(name)
        attrs = _attrs(QueueAttributes(), attributes)
        with self._defs:
            if name in self._queues or self._dynamic.is_model(name) or self.distributed.remote(name):
                raise MQError(Reason.OBJECT_ALREADY_EXISTS, f"queue {name!r} is already defined")
            self._save_definition(name, attrs)
            q = self._new_queue(name, attrs)
        return q.info()

    def _new_queue(self, name: str, attrs: QueueAttributes, durable: bool = True) -> LocalQueue:
        """Create and register a queue (definitions lock held, or at recovery). A queue that is
        not ``durable`` (a temporary dynamic queue) writes nothing for durability."""
        journal = self.journal if durable else None
        q = LocalQueue(name, attrs, self.ident, self._storage, self.backout_handling, journal, self.clock)
        q.tier.readahead_low = q.tier.readahead_messages = self.readahead_low_water
        if self.budget is not None:
            q.budget, q.sweep.page_bytes = self.budget, self.budget.page_bytes
            q.tier.readahead_bytes = self.budget.ahead_bytes
        self._queues[name] = q
        return q

    def _save_definition(self, name: str, attrs: QueueAttributes | None, drop: LocalQueue | None = None) -> None:
        """Make a definition durable before it takes effect (None: deleted, with what it held)."""
        if attrs is None:
            chains = [drop.tier.chain_name(lane) for lane in drop.lanes] if drop is not None else []
            self._save_object(name.encode(), None, f"queue {name!r}", queue_prefix(name), chains)
        else:
            self._save_object(name.encode(), encode_definition(asdict(attrs)), f"queue {name!r}")

    def _save_object(
        self,
        key: bytes,
        value: bytes | None,
        what: str,
        drop_messages: bytes | None = None,
        drop_chains: Sequence[bytes] = (),
    ) -> None:
        """Make an object's definition durable before it takes effect (``value`` None: deleted,
        with the messages and chains named). Nothing without a data directory.

        :raises MQError: RESOURCE_PROBLEM (2102): nothing changed."""
        if self.journal is None:
            return
        try:
            self._storage.store().put_object(key, value, drop_messages, drop_chains)
        except StoreError as e:
            raise MQError(
                Reason.RESOURCE_PROBLEM, f"saving the definition of {what} failed ({e}); nothing changed"
            ) from e
        self.journal.wait()

    def alter_queue(self, name: str, **attributes: object) -> QueueInfo:
        """ALTER QLOCAL. Inhibiting gets fails current waiters with 2016."""
        self._check_open()
        with self._defs:
            q = self._local(name)
            attrs = _attrs(q.attrs, attributes)
            self._save_definition(name, attrs)
            q.alter(attrs)
        return q.info()

    def delete_queue(self, name: str, purge: bool = False) -> None:
        """DELETE QLOCAL. Fails with 2042 while handles are open or work is uncommitted,
        and with 2055 while messages remain (unless ``purge``)."""
        self._check_open()
        checks.boolean(purge, "purge")
        with self._defs:
            q = self._local(name)
            chains = q.retire(purge)  # 2042, 2055; else deleted: no open, put or sweep reaches it
            try:
                if self.journal is not None:
                    self._save_definition(name, None, drop=q)
                for chain in chains:  # store I/O first, without the queue's lock
                    self._storage.store().drop_chain(chain)
            except (StoreError, MQError) as e:
                q.unretire()
                raise MQError(
                    Reason.RESOURCE_PROBLEM, f"deleting queue {name!r}: the store failed ({e}); it is still defined"
                ) from e
            del self._queues[name]

    def inquire_queue(self, name: str) -> QueueInfo:
        """MQINQ: attributes and current counters."""
        self._check_open()
        return self._local(name).info()

    def queue_names(self) -> list[str]:
        return sorted(self._queues)

    def queue_named(self, name: str) -> LocalQueue | None:
        """The queue called ``name``, or None (no checks: the engine's own look-ups)."""
        return self._queues.get(name)

    def _route(self, name: str, qmgr: str) -> tuple[LocalQueue, Route | None]:
        """The queue an open of ``name`` on queue manager ``qmgr`` ("" : this one) puts to,
        by MQ's name resolution (engine/distributed/resolve.py): a local queue (None), or a
        transmission queue and the route its messages' transmission header names."""
        if not qmgr:
            q = self._queues.get(name) if isinstance(name, str) else None
            if q is not None:
                return q, None  # the common case: a local queue
            checks.name(name)
        route = self.distributed.resolve(name, qmgr)
        return self._queue(route.queue), route if route.transmitted else None

    def _queue(self, name: str) -> LocalQueue:
        """The queue MQOPEN of ``name`` opens: a local queue, or a new temporary dynamic queue
        made from the model queue ``name`` (engine/dynamic.py)."""
        checks.name(name)
        try:
            return self._queues[name]
        except KeyError:
            if self._dynamic.is_model(name):
                with self._defs:
                    return self._dynamic.create(name)
            raise MQError(
                Reason.UNKNOWN_OBJECT_NAME, f"no queue named {name!r}; define it with define_queue()"
            ) from None

    def _local(self, name: str) -> LocalQueue:
        """A local queue by name, never a model (what alter, delete and inquire act on)."""
        if isinstance(name, str) and self._dynamic.is_model(name):
            raise MQError(
                Reason.OBJECT_TYPE_ERROR, f"{name!r} is a model queue: open it to make a temporary dynamic queue"
            )
        return self._queue(name)

    def _forget_queue(self, q: LocalQueue) -> None:
        """Unregister a deleted temporary dynamic queue (engine/dynamic.py)."""
        with self._defs:
            if self._queues.get(q.name) is q:
                del self._queues[q.name]

    # -- model queues and client connections --------------------------------------------------

    def define_model_queue(self, name: str, dynamic_q_name: str = DEFAULT_DYNAMIC_NAME, **attributes: object) -> None:
        """DEFINE QMODEL DEFTYPE(TEMPDYN): opening ``name`` makes a temporary dynamic queue
        with these attributes (:class:`QueueAttributes` fields) named ``dynamic_q_name`` with its
        ``*`` replaced (engine/dynamic.py). Models last for this queue manager's run.

        :raises MQError: 2100 when the name is taken; PARM_VALUE_ERROR (3229) for a bad
            attribute or ``dynamic_q_name``."""
        self._check_open()
        self._dynamic.define_model(name, dynamic_q_name, _attrs(QueueAttributes(), attributes))

    # -- distributed queuing (engine/distributed/, docs/channels.md) ---------------------------

    def alter_qmgr(self, **changes: Any) -> QmgrAttributes:
        """ALTER QMGR: ``default_xmit_queue`` (DEFXMITQ), ``dead_letter_queue`` (DEADQ)."""
        self._check_open()
        return self.distributed.alter_qmgr(**changes)

    def define_remote_queue(self, name: str, **attributes: Any) -> RemoteQueue:
        """DEFINE QREMOTE: puts to ``name`` go to ``remote_queue`` on ``remote_qmgr`` through
        ``xmit_queue`` (or the one name resolution finds); ``remote_queue=""`` defines a
        queue-manager alias (engine/distributed/objects.py)."""
        self._check_open()
        return self.distributed.define_remote_queue(name, **attributes)

    def delete_remote_queue(self, name: str) -> None:
        self._check_open()
        self.distributed.delete_remote_queue(name)

    def define_channel(self, name: str, **attributes: Any) -> ChannelDefinition:
        """DEFINE CHANNEL: a sender (``conname``, ``xmit_queue``, batch and retry settings) or
        a receiver (``type=ChannelType.RECEIVER``); start it with ``qm.channels.start(name)``."""
        self._check_open()
        return self.distributed.define_channel(name, **attributes)

    def alter_channel(self, name: str, **changes: Any) -> ChannelDefinition:
        self._check_open()
        return self.distributed.alter_channel(name, **changes)

    def delete_channel(self, name: str) -> None:
        self._check_open()
        self.distributed.delete_channel(name)

    @property
    def channels(self) -> Any:  # Any: a sweepq.net.channels.Channels
        """The channel agents of this queue manager (:class:`sweepq.net.channels.Channels`):
        ``start``, ``stop``, ``status``, ``reset``, ``resolve`` (docs/channels.md). Like
        :meth:`serve`, the agents come from the layer above (engine/extensions.py) and use
        this public API and ``distributed``."""
        if self._channels is None:
            self._check_open()
            self._channels = extensions.service("channels")(self)
        return self._channels

    def serve(self, path: str | os.PathLike | None = None, **options: Any) -> Any:  # Any: a sweepq.net.Server
        """Serve this queue manager to client connections from other processes (MQ's client
        mode beside this process's own in-process connections): a background listener on the
        Unix socket ``path`` (and on TCP with ``tcp="HOST:PORT"``). Returns the running
        :class:`sweepq.net.Server` (its ``urls``; ``close()`` stops it); :meth:`close` stops it
        too, backing out its clients' units of work. ``options`` are the Server's
        (docs/clients.md). The server comes from the layer above (engine/extensions.py)
        and uses only this public API."""
        self._check_open()
        server = extensions.service("server")(self, unix_path=path, **options).start()
        self.internal.attach(server)
        return server


class _Internals:
    """:class:`~sweepq.engine.internals.ManagerInternals` of one queue manager: the one
    place outside its own methods that reads its private state."""

    __slots__ = ("_qm",)

    def __init__(self, qm: QueueManager):
        self._qm = qm

    @property
    def definitions(self) -> AbstractContextManager[object]:
        return self._qm._defs

    @property
    def storage(self) -> Storage:
        return self._qm._storage

    def store(self) -> Store:
        return self._qm._storage.store()

    @property
    def dynamic(self) -> DynamicQueues:
        return self._qm._dynamic

    def queues(self) -> list[LocalQueue]:
        return list(self._qm._queues.values())

    def queue(self, name: str) -> LocalQueue:
        return self._qm._queue(name)

    def route(self, name: str, qmgr: str) -> tuple[LocalQueue, Route | None]:
        return self._qm._route(name, qmgr)

    def new_queue(self, name: str, attrs: QueueAttributes, durable: bool = True) -> LocalQueue:
        return self._qm._new_queue(name, attrs, durable)

    def forget_queue(self, q: LocalQueue) -> None:
        self._qm._forget_queue(q)

    def forget_connection(self, conn: object) -> None:
        if isinstance(conn, Connection):  # the protocol names no Connection (engine/internals.py)
            self._qm._forget(conn)

    def save_object(self, key: bytes, value: bytes | None, what: str) -> None:
        self._qm._save_object(key, value, what)

    def attach(self, service: Service) -> None:
        self._qm._servers.append(service)

    def detach(self, service: Service) -> None:
        with contextlib.suppress(ValueError):
            self._qm._servers.remove(service)


def _attrs(base: QueueAttributes, changes: dict) -> QueueAttributes:
    unknown = set(changes) - _ATTR_NAMES
    if unknown:
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"unknown queue attribute(s) {sorted(unknown)}; known: {sorted(_ATTR_NAMES)}",
        )
    return replace(base, **changes).validated()


STATS_FILE = "sweepq-stats.json"


def _write_stats(path: str, stats: dict[str, SweepStats]) -> str | None:
    """Leave the last statistics beside the store, for ``sweepq inspect``: a file private to
    its owner whatever the umask (created 0600, never through a link). Returns why it could
    not be written, or None."""
    full = os.path.join(path, STATS_FILE)
    try:
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.fchmod(fd, 0o600)  # an older file of another mode
        with os.fdopen(fd, "w") as f:
            json.dump({k: asdict(v) for k, v in stats.items()}, f, indent=1)
    except OSError as e:
        return f"writing {full} failed ({e})"
    return None


def _group(given: object, kind: type[Group], keyword: str) -> Group:
    """``given`` as the queue manager's ``keyword=`` group, or the group's defaults for None.

    :raises MQError: PARM_VALUE_ERROR (3229) for anything but a ``kind``."""
    if given is None:
        return kind()
    if not isinstance(given, kind):
        raise MQError(Reason.PARM_VALUE_ERROR, f"{keyword}= must be a {kind.__name__}, not {type(given).__name__}")
    return given
