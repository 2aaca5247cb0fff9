"""A lane: one priority level of a queue, and what a call needs of a lane's chain.

:class:`Lane` holds a level's counters, its list sentinels and its chain of swept blobs
(engine/core/swept.py); :class:`Need` is the answer of a call that found the message it wants
inside a blob whose records are not at hand. The queue core (engine/core/lanes.py) owns both;
code outside the core reads them only.

The core's modules import one way: ref -> lane -> swept (typing only), lanes -> all of them;
a swept blob asks of the refs it holds only what :class:`~sweepq.engine.core.swept.Holder`
names, so that no module of the core imports one above it (tests/test_import_graph.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .swept import SweptBlob


class Lane:
    """One priority level: its counters, its chain of swept blobs and its list sentinels.

    ``front`` and ``rear`` are the sentinel slots of its two lists. ``chain`` holds the
    lane's swept blobs (engine/core/swept.py) in order; ``sweeping`` counts the reasons new
    messages go to the rear list although the chain may be empty: a sweep of the queue in
    progress (one at a time), and the queue paging under its memory budget
    (engine/budget.py). A chain, or a non-zero ``sweeping``, sends new messages to the rear.
    Everything here is read-only outside engine/core/ (``ahead``, the read-ahead's count, is
    set by :meth:`read_ahead`).
    """

    __slots__ = ("ahead", "back", "bit", "chain", "front", "mem", "priority", "ready", "rear", "sweeping", "swept")

    def __init__(self, priority: int):
        self.priority = priority
        self.bit = 1 << priority
        self.front = 2 * priority
        self.rear = 2 * priority + 1
        self.chain: deque[SweptBlob] = deque()
        self.sweeping = 0
        self.ready = 0
        self.mem = 0
        self.swept = 0  # messages in the chain not yet removed
        self.ahead = 0  # messages in the leading blobs whose read has started (read-ahead)
        self.back = 0  # messages in memory that came back from a blob (the adaptive rule's)

    def read_ahead(self, low: int, start: Callable[[SweptBlob], Future[list[bytes]]]) -> None:
        """Start reading the chain's leading blobs in the background (``start(blob)``, the
        tier's read), enough of them that ``ready`` and ``ahead`` together reach ``low``;
        ``ahead`` becomes the messages of the blobs read or being read (lock held)."""
        ahead = 0
        for blob in self.chain:
            if blob.prefetch is None and blob.loaded is None:
                blob.reading(start(blob))
            ahead += blob.live
            if self.ready + ahead >= low:
                break
        self.ahead = ahead


class Need:
    """A call needs a blob's records that are not at hand: the caller reads them without the
    queue's lock (engine/tiering.py :meth:`~sweepq.engine.tiering.QueueTier.load`, or a browse
    cursor's own cache) and looks again."""

    __slots__ = ("blob", "lane")

    def __init__(self, lane: Lane, blob: SweptBlob):
        self.lane = lane
        self.blob = blob
