"""sweepq.queues: the standard library's queues on a sweepq queue manager.

``Queue`` is ``queue.Queue`` and ``AsyncQueue`` is ``asyncio.Queue``, with the same
constructor, methods and exceptions, so that ``from sweepq import Queue`` is the whole
migration; keyword-only options add what the queue manager gives: persistence (``path=``),
a memory bound that sweeps the backlog to disk (``memory_budget=``), a queue shared by many
processes (``url=``), priorities and at-least-once delivery. docs/queue.md tells the rest.

This layer sits above net/ (``url=`` uses its clients) and uses only the engine's public API.
"""

from .asyncqueue import AsyncQueue
from .threadqueue import Queue

__all__ = ["AsyncQueue", "Queue"]
