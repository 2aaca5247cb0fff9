"""``sweepq.aio``: the asyncio client, ``await sweepq.aio.connect(url, token=...)`` (net/aio.py).

At the repository root for the reason client.py gives: the root is the ``sweepq`` package.
"""

from sweepq.net.aio import AsyncConnection, AsyncHandle, connect

__all__ = ["AsyncConnection", "AsyncHandle", "connect"]
