"""A queue's transmission batches: the messages a channel has taken to send and not yet ended.

A channel's sender (engine/distributed/) assigns available in-memory messages of a
transmission queue to a batch (:meth:`QueueBatches.assign_locked`, from the get path's
:func:`~sweepq.engine.getpath.assign_batch`); they stay in place, no get sees them and no
sweep moves them (seed 003: a batch is never swept). A confirmed batch then leaves the queue
and a released one becomes available again (:meth:`QueueBatches.end`). One object per
:class:`~sweepq.engine.queue.LocalQueue` (``q.batches``), under the queue's lock
(engine/queue.py, "The lock rule").

Invariant: :attr:`QueueBatches.count` is the number of refs the batches hold, each marked
BATCHED in the queue's core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .core.flags import BATCHED
from .durable.journal import Journal, Journaled, StoreChanges
from .record import seq_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .core.lock import QueueLock
    from .core.ref import Ref
    from .waiting import Waiters


class Owner(Journaled, Protocol):
    """What the batches read and call of their queue (engine/queue.py's ``LocalQueue``, which
    sits above this module)."""

    obtained: int

    @property
    def mutex(self) -> QueueLock: ...

    @property
    def journal(self) -> Journal | None: ...

    @property
    def waiters(self) -> Waiters: ...

    def must_hold(self, what: str) -> None: ...

    def remove_locked(self, ref: Ref, durable: bool = True) -> None: ...

    def after_get(self) -> None: ...


class QueueBatches:
    """The batches of one queue (see the module docstring)."""

    __slots__ = ("_by_id", "count", "q")

    def __init__(self, q: Owner):
        self.q = q
        self._by_id: dict[int, list[Ref]] = {}  # in memory: a batch is never swept
        self.count = 0  # messages assigned to batches (the sweep's y leaves them out)

    def assign_locked(self, batch_id: int, ref: Ref) -> None:
        """Assign the available in-memory message ``ref`` to batch ``batch_id``; it counts as
        obtained (a channel servicing the queue)."""
        q = self.q
        q.must_hold("assigning a batch")
        q.lanes.mark(ref, BATCHED)
        self._by_id.setdefault(batch_id, []).append(ref)
        self.count += 1
        q.obtained += 1

    def end(self, batch_id: int, confirmed: bool, harden: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """A confirmed batch leaves the queue; a released one becomes available again. The
        records of a confirmed batch are deleted and ``harden`` (key, value) written in one
        store write, before anything changes in memory.

        :raises MQError: 2102 when that write fails; the batch is then still assigned."""
        q = self.q
        with q.mutex:
            refs = self._by_id.get(batch_id, [])
            if q.journal is not None and (harden or (confirmed and refs)):
                b = StoreChanges()
                for ref in refs if confirmed else ():
                    Journal.add_removal(b, q, ref)
                b.puts += harden
                q.journal.write(b, f"ending a batch of {q.name!r}")
            refs = self._by_id.pop(batch_id, [])
            self.count -= len(refs)
            for ref in refs:
                rec = q.lanes.unmark(ref, BATCHED)
                if confirmed:
                    q.remove_locked(ref, durable=False)
                elif q.waiters.waiting:
                    q.waiters.wake_for_locked(rec)
        q.after_get()

    def keys(self, batch_id: int) -> list[tuple[int, int]]:
        """(lane, arrival number) of each message batch ``batch_id`` holds: what a channel's
        sync record names (engine/distributed/sync.py)."""
        q = self.q
        with q.mutex:
            ls = q.lanes
            return [(ls.lane_of(r).priority, seq_of(ls.record(r))) for r in self._by_id.get(batch_id, [])]

    def assign_keys(self, batch_id: int, keys: Sequence[tuple[int, int]]) -> list[bytes]:
        """At open: assign the available messages named by ``keys`` ((lane, arrival number),
        from :meth:`keys`) to batch ``batch_id`` again; returns the records of those found, in
        the order of ``keys``."""
        q = self.q
        with q.mutex:
            ls = q.lanes
            found = ls.find_seqs(set(keys))
            recs = []
            for key in keys:
                ref = found.get(key)
                if ref is not None:
                    self.assign_locked(batch_id, ref)
                    recs.append(ls.record(ref))
            return recs

    def refs(self, batch_id: int | None = None) -> list[Ref]:
        """The messages batch ``batch_id`` holds, or every batch's (None), as refs (mutex
        held): what a channel's tests and :meth:`check_locked` look at."""
        if batch_id is not None:
            return list(self._by_id.get(batch_id, ()))
        return [ref for refs in self._by_id.values() for ref in refs]

    def check_locked(self) -> None:
        """The invariant (engine/queue.py :meth:`~sweepq.engine.queue.LocalQueue.check`)."""
        assert self.count == sum(len(v) for v in self._by_id.values()), f"{self.q.name}: batched count"
