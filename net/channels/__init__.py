"""Channels between queue managers: MQ's message channel agents over sweepq's client protocol
(docs/channels.md).

* ``agents.py`` — :class:`Channels`, a queue manager's agents (``qm.channels``): start,
  stop, status, reset, resolve;
* ``sender.py`` — a sender channel's agent, a thread: batches from its transmission queue,
  in doubt until the receiver confirms, retries, heartbeats, the disconnect interval;
* ``receiver.py`` — the receiving end, in a session of the partner's server: puts each
  message where its transmission header says, dead-letters what it cannot, commits each
  batch with its sync record;
* ``admin.py`` — the administration actions (op DQ_ADMIN), in process and over a connection.

The objects, name resolution and what a channel hardens are the engine's
(engine/distributed/); the transport, frames and tokens are the client protocol's
(net/protocol.py, net/auth.py).
"""

from .admin import RemoteChannels, dq_admin
from .agents import Channels

__all__ = ["Channels", "RemoteChannels", "dq_admin"]
