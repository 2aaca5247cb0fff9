"""The connection API as ``typing.Protocol``\\ s: what an application codes against.

Two things satisfy them: the in-process :class:`~sweepq.engine.Connection` and
:class:`~sweepq.engine.Handle` (MQ's bindings mode), and the client connection of
``sweepq.client.connect(url)`` (``sweepq.net``, MQ's client mode), which makes the same calls
on a queue manager in another process. Code written against :class:`QueueConnection` runs
unchanged on either; the behaviour tests run over both (tests/net_client_mode.py).

:class:`QueueAdmin` is the administration a :class:`~sweepq.engine.QueueManager` offers in
process and a client offers over a connection with administration authority (``sweepq
define --server URL`` uses it).

Every call raises :class:`~sweepq.engine.MQError` with an MQ reason for anything the caller
did wrong; a client adds MQRC_CONNECTION_BROKEN (2009) when the server went away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload, runtime_checkable

from .constants import GMO, MO, OO, PMO, Reason
from .matching import MATCH_DEFAULT
from .message import Message, Messages, PutResult, PutResults
from .queue import QueueInfo
from .record import MD

if TYPE_CHECKING:
    from .cursor import Status


class GetCall(Protocol):
    """MQGET's signature, written once: the type of every handle's ``get`` (the in-process
    :class:`~sweepq.engine.Handle`, whose implementation ``Handle._get`` takes these
    parameters with these defaults, tests/test_get_signature.py holding them equal; and the
    client's, which binds its arguments by that implementation's signature).

    A get returns a Message, except ``get(GMO.UNLOCK)``, a call of its own that returns a
    :class:`~sweepq.engine.cursor.Status` (only NO_SYNCPOINT may accompany it; the literal
    is what picks the first form). The parameters are positional-or-keyword, not keyword-only,
    on purpose: CPython fills missing keyword-only defaults by dict lookups, which cost
    ~170 ns on every get."""

    @overload
    def __call__(self, options: Literal[GMO.UNLOCK]) -> Status: ...  # type: ignore[overload-overlap]

    @overload
    def __call__(
        self,
        options: GMO | int = 0,
        wait_interval: int = -1,
        buffer_length: int | None = None,
        match: MO | int = MATCH_DEFAULT,
        msg_id: bytes | None = None,
        correl_id: bytes | None = None,
        group_id: bytes | None = None,
        msg_seq_number: int | None = None,
        offset: int | None = None,
        msg_token: bytes | None = None,
    ) -> Message: ...

    def __call__(self, *args: Any, **named: Any) -> Message | Status:
        """(Stands for the overloads at run time: ``typing.get_overloads`` finds them by it.)"""
        ...


@runtime_checkable
class QueueHandle(Protocol):
    """An open queue (MQOPEN's object handle). One thread uses it at a time."""

    @property
    def name(self) -> str:
        """The queue's name (a temporary dynamic queue's generated name)."""
        ...

    def put(self, data: bytes, md: MD | None = None, options: PMO | int = 0) -> PutResult: ...

    def put_many(self, datas: Sequence[bytes], md: MD | None = None, options: PMO | int = 0) -> PutResults: ...

    @property
    def get(self) -> GetCall:
        """MQGET: a Message; ``get(GMO.UNLOCK)`` a Status (:class:`GetCall`)."""
        ...

    def get_many(self, max_messages: int, options: GMO | int = 0, wait_interval: int = -1) -> Messages: ...

    def close(self) -> Reason: ...

    def __enter__(self) -> QueueHandle: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class QueueConnection(Protocol):
    """A connection (MQCONN): opens handles and owns at most one unit of work."""

    def open(self, name: str, options: OO | int, selector: str | None = None) -> QueueHandle: ...

    def commit(self) -> Reason: ...

    def backout(self) -> None: ...

    @property
    def uncommitted(self) -> int: ...

    def disconnect(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> QueueConnection: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class QueueAdmin(Protocol):
    """Defining, altering, deleting and inquiring queues, and making connections."""

    def define_queue(self, name: str, **attributes: object) -> QueueInfo: ...

    def alter_queue(self, name: str, **attributes: object) -> QueueInfo: ...

    def delete_queue(self, name: str, purge: bool = False) -> None: ...

    def inquire_queue(self, name: str) -> QueueInfo: ...

    def queue_names(self) -> list[str]: ...

    def define_model_queue(self, name: str, dynamic_q_name: str = ..., **attributes: object) -> None: ...

    def connect(self) -> QueueConnection: ...

    def close(self) -> None: ...
