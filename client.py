"""``sweepq.client``: the thread client, ``sweepq.client.connect(url, token=...)`` (net/client.py).

This file sits at the repository root because the root *is* the ``sweepq`` package
(pyproject's package-dir maps ``sweepq`` to it): a module here is ``sweepq.client`` with no
second copy of any code, and the client itself stays in its layer, net/.
"""

from sweepq.net.client import ClientConnection, ClientHandle, RemoteQueueManager, connect

__all__ = ["ClientConnection", "ClientHandle", "RemoteQueueManager", "connect"]
