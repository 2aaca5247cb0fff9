"""MQ's name resolution: where a message for queue Q on queue manager QM goes (docs/channels.md
"Name resolution").

An open names a queue and, optionally, a queue manager; a receiving channel meets the same
question for each message's transmission header. The answer is a :class:`Route`: the local
queue the put goes to and, when that is a transmission queue, the queue and queue manager the
transmission header names. In order:

1. **The local queue manager** (QM is "" or this queue manager's name): Q is a local (or
   model) queue: there. A remote queue definition named Q: go on at 2 with its remote queue
   and queue manager, through its transmission queue when it names one. Else 2085.
2. **Another queue manager** QM, with a transmission queue named already (a remote queue
   definition's): that one.
3. A **queue-manager alias** named QM (a remote queue definition without a remote queue):
   QM becomes the alias's queue manager, through its transmission queue when it names one;
   an alias that leads back to this queue manager resolves Q locally (1).
4. A local **transmission queue named QM**.
5. The queue manager's **default transmission queue** (``default_xmit_queue``).
6. Else MQRC_UNKNOWN_REMOTE_Q_MGR (2087).

A chain of aliases longer than :data:`MAX_HOPS` (a loop) is 2087 as well. A transmission
queue named at 2, 4 or 5 must exist and have usage TRANSMISSION (2196 / 2197, 2091 / 2199).
Pure: it reads the names through :class:`Names` and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..constants import Reason
from ..errors import MQError
from .objects import RemoteQueue

MAX_HOPS = 8


@dataclass(frozen=True)
class Route:
    """Where a put goes: the local ``queue``; with ``remote_qmgr`` set, ``queue`` is a
    transmission queue and the message carries a transmission header for ``remote_queue``
    on ``remote_qmgr``."""

    queue: str
    remote_queue: str = ""
    remote_qmgr: str = ""

    @property
    def transmitted(self) -> bool:
        return bool(self.remote_qmgr)


class Names(Protocol):
    """What resolution reads: the queue manager's names (engine/distributed/registry.py)."""

    @property
    def qmgr_name(self) -> str: ...

    @property
    def default_xmit_queue(self) -> str: ...

    def is_local(self, name: str) -> bool:
        """A local queue (or a model queue, which opens one) is called ``name``."""
        ...

    def is_xmitq(self, name: str) -> bool | None:
        """None: no local queue of that name; else whether it has usage TRANSMISSION."""
        ...

    def remote(self, name: str) -> RemoteQueue | None:
        """The remote queue definition (or queue-manager alias) called ``name``."""
        ...


def resolve(names: Names, queue: str, qmgr: str = "") -> Route:
    """The route of a message for ``queue`` on ``qmgr`` ("" : this queue manager).

    :raises MQError: UNKNOWN_OBJECT_NAME (2085), UNKNOWN_REMOTE_Q_MGR (2087),
        UNKNOWN_XMIT_Q (2196), XMIT_Q_USAGE_ERROR (2091), UNKNOWN_DEF_XMIT_Q (2197),
        DEF_XMIT_Q_USAGE_ERROR (2199)."""
    return _resolve(names, queue, qmgr, 0)


def _local(names: Names, qmgr: str) -> bool:
    return qmgr in ("", names.qmgr_name)


def _count(hops: int, queue: str) -> None:
    if hops > MAX_HOPS:
        raise MQError(
            Reason.UNKNOWN_REMOTE_Q_MGR,
            f"resolving {queue!r} went through {MAX_HOPS} remote definitions or aliases: they loop",
        )


def _resolve(names: Names, queue: str, qmgr: str, hops: int) -> Route:
    _count(hops, queue)
    if _local(names, qmgr):
        if names.is_local(queue):
            return Route(queue)
        r = names.remote(queue)
        if r is None:
            raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"no queue named {queue!r}; define it with define_queue()")
        if r.is_qmgr_alias:
            raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"{queue!r} is a queue-manager alias, not a queue")
        return _via(names, r.remote_queue, r.remote_qmgr, r.xmit_queue, hops + 1)
    return _via(names, queue, qmgr, "", hops + 1)


def _via(names: Names, queue: str, qmgr: str, xmit_queue: str, hops: int) -> Route:
    """The route of a message for ``queue`` on ``qmgr``, through ``xmit_queue`` when named."""
    _count(hops, queue)
    if xmit_queue:
        return Route(_xmitq(names, xmit_queue, default=False), queue, qmgr)
    if _local(names, qmgr):
        return _resolve(names, queue, "", hops)
    alias = names.remote(qmgr)
    if alias is not None and alias.is_qmgr_alias:
        return _via(names, queue, alias.remote_qmgr or qmgr, alias.xmit_queue, hops + 1)
    if names.is_xmitq(qmgr):
        return Route(qmgr, queue, qmgr)
    if names.default_xmit_queue:
        return Route(_xmitq(names, names.default_xmit_queue, default=True), queue, qmgr)
    raise MQError(
        Reason.UNKNOWN_REMOTE_Q_MGR,
        f"no route to queue manager {qmgr!r}: define a transmission queue named {qmgr!r}, a queue-manager "
        "alias, or a default transmission queue",
    )


def _xmitq(names: Names, name: str, default: bool) -> str:
    usage = names.is_xmitq(name)
    what = "default transmission queue" if default else "transmission queue"
    if usage is None:
        reason = Reason.UNKNOWN_DEF_XMIT_Q if default else Reason.UNKNOWN_XMIT_Q
        raise MQError(reason, f"the {what} {name!r} does not exist")
    if not usage:
        reason = Reason.DEF_XMIT_Q_USAGE_ERROR if default else Reason.XMIT_Q_USAGE_ERROR
        raise MQError(reason, f"the {what} {name!r} is not a transmission queue (usage=TRANSMISSION)")
    return name
