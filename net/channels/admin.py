"""Administration of channels and remote queues: one set of actions, in process and over a
connection (op DQ_ADMIN, docs/protocol.md).

:func:`dq_admin` runs an action on a queue manager: the server calls it for a connection
(the actions that change something need the admin token, as define and alter do), and the
command line calls it directly on a data directory's queue manager (``sweepq channel ...
--data-dir``), so both paths are one. :class:`RemoteChannels` is the client side
(``RemoteQueueManager.channels``). Results are plain values (dicts of str, int, bool), as the
wire carries them.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

from sweepq.engine import MQError, Reason

from .. import protocol as P

if TYPE_CHECKING:
    from sweepq.engine import QueueManager


def plain(obj) -> dict:
    """A definition (dataclass) as a dict of plain values."""
    return {k: v.value if isinstance(v, enum.Enum) else v for k, v in dataclasses.asdict(obj).items()}


def _objects(qm: QueueManager, name, kw) -> dict:
    dq = qm.distributed
    return {
        "qmgr": plain(dq.attrs),
        "remote_queues": {n: plain(r) for n, r in sorted(dq.remotes.items())},
        "channels": {n: plain(d) for n, d in sorted(dq.channels.items())},
    }


# action: (needs the admin token, what it does)
ACTIONS: dict[str, tuple[bool, Callable]] = {
    "define_channel": (True, lambda qm, name, kw: plain(qm.define_channel(name, **kw))),
    "alter_channel": (True, lambda qm, name, kw: plain(qm.alter_channel(name, **kw))),
    "delete_channel": (True, lambda qm, name, kw: qm.delete_channel(name)),
    "define_remote_queue": (True, lambda qm, name, kw: plain(qm.define_remote_queue(name, **kw))),
    "delete_remote_queue": (True, lambda qm, name, kw: qm.delete_remote_queue(name)),
    "alter_qmgr": (True, lambda qm, name, kw: plain(qm.alter_qmgr(**kw))),
    "start": (True, lambda qm, name, kw: qm.channels.start(name)),
    "enable": (True, lambda qm, name, kw: qm.channels.enable(name)),
    "stop": (True, lambda qm, name, kw: qm.channels.stop(name)),
    "reset": (True, lambda qm, name, kw: qm.channels.reset(name, kw.get("seq", 0))),
    "resolve": (True, lambda qm, name, kw: qm.channels.resolve(name, kw.get("action"))),
    "status": (False, lambda qm, name, kw: qm.channels.status(name)),
    "objects": (False, _objects),
}


def dq_admin(qm: QueueManager, admin: bool, action: object, name: object, kw: dict):
    """Run ``action`` on ``name`` with the keyword arguments ``kw``.

    :raises MQError: PARM_VALUE_ERROR (3229) for an unknown action; NOT_AUTHORIZED (2035)
        for a change without administration authority; the action's own reasons."""
    entry = ACTIONS.get(action) if isinstance(action, str) else None
    if entry is None:
        raise MQError(Reason.PARM_VALUE_ERROR, f"unknown channel action {action!r}; known: {', '.join(ACTIONS)}")
    needs_admin, run = entry
    if needs_admin and not admin:
        raise P.not_authorized(f"channel action {action!r}")
    return run(qm, name, kw)


class RemoteChannels:
    """A served queue manager's channels, from a client: the calls of
    :class:`sweepq.net.channels.Channels` (start, stop, status, reset, resolve) over one
    connection (changes need its admin token)."""

    def __init__(self, request: Callable):
        self._request = request

    def _do(self, action: str, name, /, **kw):
        # positional-only: ``resolve`` passes a keyword named ``action`` of its own
        return self._request(P.DQ_ADMIN, [action, name, kw])

    def start(self, name: str) -> dict:
        return self._do("start", name)

    def stop(self, name: str) -> dict:
        return self._do("stop", name)

    def status(self, name: str | None = None) -> list[dict]:
        return self._do("status", name)

    def reset(self, name: str, seq: int = 0) -> dict:
        return self._do("reset", name, seq=seq)

    def resolve(self, name: str, action: str) -> dict:
        return self._do("resolve", name, action=action)
