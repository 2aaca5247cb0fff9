"""sweepq.queues: the standard library's queues on a sweepq queue manager.

``Queue`` is ``queue.Queue`` and ``AsyncQueue`` is ``asyncio.Queue``, with the same
constructor, methods and exceptions, so that ``from sweepq import Queue`` is the whole
migration; keyword-only options add what the queue manager gives: persistence (``path=``),
a memory bound that sweeps the backlog to disk (``memory_budget=``), a queue shared by many
processes (``url=``), priorities and at-least-once delivery. ``SimpleQueue`` is
``queue.SimpleQueue`` on the same queues; ``LifoQueue``, ``PriorityQueue`` and their asyncio
forms keep an order the queue manager cannot, so they hold their items in this process
(queues/ordered.py). docs/queue.md tells the rest.

This layer sits above net/ (``url=`` uses its clients) and uses only the engine's public API.
"""

from .asyncqueue import AsyncQueue
from .ordered import AsyncLifoQueue, AsyncPriorityQueue, LifoQueue, PriorityQueue
from .simple import SimpleQueue
from .threadqueue import Queue

__all__ = ["AsyncLifoQueue", "AsyncPriorityQueue", "AsyncQueue", "LifoQueue", "PriorityQueue", "Queue", "SimpleQueue"]
