"""What the engine's own modules use of a queue manager beyond its public API.

A queue manager's private attributes are its own: the modules that work for it — recovery,
checkpoints and rewrites after damage (durable/), the distributed-queuing objects
(distributed/), connections and dynamic queues, and the services the layer above attaches
(net/'s server) — reach them only through ``QueueManager.internal``, an object of this
protocol. Nothing here is for applications: it changes when the engine does.

Each member keeps the queue manager's rules: ``definitions`` is the lock that serialises
definition changes (take it before a queue's lock, never under one); ``save_object`` makes a
definition durable before it takes effect; ``new_queue`` registers a queue (definitions lock
held, or at recovery, before any connection exists).

The modules below engine/manager.py type a queue manager as :class:`Manager` (what they read
of it, and ``internal``), never as ``QueueManager``: this module sits low in the engine's
layers and names nothing above the queue (docs/design.md, "The engine's modules").
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sweepq.blobstore import Store
    from sweepq.sweeper.clock import Clock

    from .distributed.resolve import Route
    from .durable.journal import Journal
    from .queue import LocalQueue, QueueAttributes
    from .record import Identity
    from .recorder import TraceRecorder
    from .sequence import Arrivals
    from .storage import Storage


class Service(Protocol):
    """A service attached to a queue manager (a server of client connections): the queue
    manager's close closes it first, so that its clients' units of work are backed out
    before the sweeper and the store stop."""

    def close(self) -> None: ...


class TemporaryQueues(Protocol):
    """What the modules below engine/dynamic.py use of a queue manager's model and temporary
    dynamic queues (``ManagerInternals.dynamic``, a :class:`~sweepq.engine.dynamic.DynamicQueues`)."""

    def is_model(self, name: str) -> bool: ...

    def handle_closed(self, q: LocalQueue) -> None:
        """A handle on ``q`` closed: a temporary dynamic queue goes with its last handle."""
        ...


class ManagerInternals(Protocol):
    """The queue manager's state as its own modules see it (module docstring)."""

    @property
    def definitions(self) -> AbstractContextManager[object]:
        """The lock of definition changes (define, alter, delete; object definitions)."""
        ...

    @property
    def storage(self) -> Storage: ...

    def store(self) -> Store:
        """The open store (raises MQError 2102 once it is closed)."""
        ...

    @property
    def dynamic(self) -> TemporaryQueues: ...

    def queues(self) -> list[LocalQueue]:
        """The queues now, a snapshot (a queue defined or deleted meanwhile may be missed)."""
        ...

    def queue(self, name: str) -> LocalQueue:
        """The queue an open of ``name`` opens (a model makes a temporary dynamic queue);
        :raises MQError: UNKNOWN_OBJECT_NAME (2085)."""
        ...

    def route(self, name: str, qmgr: str) -> tuple[LocalQueue, Route | None]:
        """The queue a put to ``name`` on ``qmgr`` goes to, and the transmission route."""
        ...

    def new_queue(self, name: str, attrs: QueueAttributes, durable: bool = True) -> LocalQueue: ...

    def forget_queue(self, q: LocalQueue) -> None:
        """Unregister a deleted temporary dynamic queue."""
        ...

    def forget_connection(self, conn: object) -> None:
        """``conn`` (a Connection) disconnected: the queue manager's close no longer closes it."""
        ...

    def save_object(self, key: bytes, value: bytes | None, what: str) -> None:
        """Make an object's definition durable before it takes effect (``value`` None:
        deleted; ``what`` names it in the error). :raises MQError: RESOURCE_PROBLEM (2102):
        nothing changed."""
        ...

    def attach(self, service: Service) -> None:
        """Close ``service`` first when the queue manager closes."""
        ...

    def detach(self, service: Service) -> None:
        """``service`` closed by itself (a no-op when it was never attached)."""
        ...


class Manager(Protocol):
    """A queue manager as the engine's own modules below engine/manager.py see it (module
    docstring): what they read of its public state, and :attr:`internal`. They type against
    this, not against :class:`~sweepq.engine.manager.QueueManager`, so that no import runs up
    to the manager (docs/design.md, "The engine's modules")."""

    @property
    def ident(self) -> Identity:
        """How its messages' ids are made (the queue manager's name, the run's random part)."""
        ...

    @property
    def closed(self) -> bool: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def sequence(self) -> Arrivals: ...

    def next_seq(self) -> int:
        """A new arrival number (``sequence.next``)."""
        ...

    @property
    def max_msg_length(self) -> int: ...

    @property
    def max_uncommitted(self) -> int: ...

    @property
    def recorder(self) -> TraceRecorder | None: ...

    @property
    def journal(self) -> Journal | None: ...

    def queue_names(self) -> list[str]: ...

    def queue_named(self, name: str) -> LocalQueue | None: ...

    @property
    def internal(self) -> ManagerInternals: ...
