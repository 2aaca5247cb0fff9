"""sweepq.net: client connections (MQ's client mode) for a queue manager in another process.

* :class:`Server` serves a queue manager (``sweepq serve``, ``qm.serve()``): net/server.py.
* :func:`connect` returns a connection with the engine's API (net/client.py); the asyncio
  form is :func:`sweepq.net.aio.connect`.
* The wire: one framed request/response protocol, docs/protocol.md (net/protocol.py).

``sweepq.client`` and ``sweepq.aio`` are the short import paths of the two clients.
"""

from .client import ClientConnection, ClientHandle, RemoteQueueManager, connect
from .server import Server

__all__ = ["ClientConnection", "ClientHandle", "RemoteQueueManager", "Server", "connect"]
