"""Distributed queuing in the engine: the objects that send messages to other queue managers,
the names that lead there, and what a channel hardens (docs/channels.md).

* ``objects.py`` — the definitions: the queue manager's own attributes (its name, default
  transmission queue, dead-letter queue), remote queues and queue-manager aliases, channels;
  each validated (an MQError naming the field) and kept in the store as queue definitions are;
* ``resolve.py`` — MQ's name resolution: which local queue a put goes to, and, through a
  transmission queue, to which queue on which queue manager;
* ``headers.py`` — the transmission header a message carries on a transmission queue
  (MQ's MQXQH) and the dead-letter header (MQDLH), both in the message data as MQ has them;
* ``sync.py`` — a channel's synchronisation state (sequence number, LUWID, the batch in
  doubt), hardened in one atomic store write with what it records;
* ``registry.py`` — :class:`Distributed`, the queue manager's collaborator that holds all of
  the above, loads it at open (restoring a batch left in doubt before the sweeper starts) and
  saves every change.

The agents that move the messages (the sender and receiver MCAs) are the net layer's
(net/channels/); they reach this package through the queue manager only.
"""

from .headers import DeadLetter, Transmission, dead_letter, transmission
from .objects import ChannelDefinition, QmgrAttributes, RemoteQueue
from .registry import Distributed
from .resolve import Route
from .sync import ReceiverSync, SenderSync

__all__ = [
    "ChannelDefinition",
    "DeadLetter",
    "Distributed",
    "QmgrAttributes",
    "ReceiverSync",
    "RemoteQueue",
    "Route",
    "SenderSync",
    "Transmission",
    "dead_letter",
    "transmission",
]
