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
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sweepq.blobstore import Store

    from .connection import Connection
    from .distributed import Route
    from .dynamic import DynamicQueues
    from .queue import LocalQueue, QueueAttributes
    from .storage import Storage


class Service(Protocol):
    """A service attached to a queue manager (a server of client connections): the queue
    manager's close closes it first, so that its clients' units of work are backed out
    before the sweeper and the store stop."""

    def close(self) -> None: ...


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
    def dynamic(self) -> DynamicQueues: ...

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

    def forget_connection(self, conn: Connection) -> None: ...

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
