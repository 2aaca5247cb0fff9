"""Units of work: commit, backout, and skip backout (seed 000, seed 004, docs/semantics.md §8).

A unit of work is the list of operations a connection did under syncpoint since its last
commit or backout, in order. It never holds a lock itself: commit and backout take the
locks of every queue involved, in queue-id order (so two commits cannot deadlock), and
apply all their changes before releasing any, so no other thread sees half a commit.

Skip backout (seed 004): at most one get per unit of work is marked. When the application
asks for a backout, every other operation is undone and the marked get alone becomes the
new unit of work (step 7): its message stays off the queue until that new unit of work is
committed (step 9) or backed out (step 10). A backout for any other reason (disconnect)
restores the marked message like any other.
"""

from __future__ import annotations

from contextlib import ExitStack, suppress

from .constants import Reason
from .core.ref import Ref
from .durable.journal import Journal, StoreChanges
from .errors import MQError
from .queue import LocalQueue

PUT = 0
GET = 1


class UnitOfWork:
    """The operations of one connection since its last syncpoint.

    ``ops`` holds ``(kind, queue, ref)`` in the order they happened (a
    :class:`~sweepq.engine.core.ref.Ref`); ``skip`` is the marked get (an element of ``ops``)
    or None.

    Under the locks, a commit first makes its one journal write (persistent puts and gets)
    and then changes memory, so it is all or nothing: a failed write backs the unit of
    work out instead (2003). A backout changes memory and then writes the raised backout
    counts, at best effort (a count not written only means an older count after a
    restart). Store cleanups either causes (a blob emptied by a commit) run after the locks
    are released and never fail the call (engine/tiering.py).
    """

    __slots__ = ("ops", "skip", "staged")

    def __init__(self) -> None:
        self.ops: list[tuple[int, LocalQueue, Ref]] = []
        self.skip: tuple[int, LocalQueue, Ref] | None = None
        self.staged: tuple[Journal, bytes, bytes] | None = None

    def harden(self, journal: Journal, key: bytes, value: bytes) -> None:
        """Write (``key``, ``value``) in the next commit's one store write, with the unit of
        work's own changes (a receiving channel's record of the batch it commits,
        engine/distributed/sync.py); a backout drops it. This is the only way anything but a
        message joins a commit."""
        self.staged = (journal, key, value)

    def __len__(self) -> int:
        return len(self.ops)

    def add_put(self, queue: LocalQueue, node: Ref) -> None:
        self.ops.append((PUT, queue, node))

    def add_get(self, queue: LocalQueue, node: Ref, mark_skip: bool = False) -> None:
        op = (GET, queue, node)
        self.ops.append(op)
        if mark_skip:
            self.skip = op

    def commit(self) -> Reason:
        """Make every put visible and every got message gone, atomically for observers.

        On a durable queue manager the persistent puts and gets are first written in one
        store write (engine/durable/journal.py); only then does memory change, and with
        ``sync="commit"`` the call returns once that write is on disk.

        :raises MQError: BACKED_OUT (2003) when that write failed: the unit of work was
            backed out instead (MQ's MQCMIT reports the same), nothing of it is durable.
        Returns ``Reason.NONE``, or OUTCOME_PENDING (2124, a warning) when the commit is made
        but its sync to disk failed: the next sync hardens it (engine/getpath.py says why a
        made change is never reported as a failure)."""
        ops, staged = self.ops, self.staged
        if not ops:
            return self._commit_staged()
        journal = ops[0][1].journal if staged is None else staged[0]  # one manager, one journal
        failed = None
        batch = StoreChanges()
        self.ops, self.skip, self.staged = [], None, None
        with _locks(ops):
            if journal is not None:
                for kind, q, ref in ops:
                    if kind == PUT:
                        Journal.add_put(batch, q, q.lanes.lane_of(ref).priority, q.lanes.record(ref))
                    else:
                        Journal.add_removal(batch, q, ref)
                if staged is not None:
                    batch.puts.append(staged[1:])
                try:
                    journal.write(batch, "commit")
                except MQError as e:
                    failed = e
            if failed is None:
                for kind, q, ref in ops:
                    if kind == PUT:
                        q.commit_put_locked(ref)
                    else:
                        q.remove_locked(ref, durable=False)
            else:
                for kind, q, ref in ops:
                    if kind == PUT:
                        q.remove_locked(ref, durable=False)
                    else:
                        q.restore_locked(ref, backout=True)
        _after(ops)
        if failed is not None:
            raise MQError(
                Reason.BACKED_OUT, f"the commit could not be written ({failed}); the unit of work was backed out"
            ) from failed
        if batch and not journal.wait():  # type: ignore[union-attr]
            return Reason.OUTCOME_PENDING
        return Reason.NONE

    def _commit_staged(self) -> Reason:
        """A commit with no operation: the staged record alone, if any."""
        staged, self.staged = self.staged, None
        if staged is None:
            return Reason.NONE
        journal, key, value = staged
        b = StoreChanges()
        b.puts.append((key, value))
        try:
            journal.write(b, "commit")
        except MQError as e:
            raise MQError(Reason.BACKED_OUT, f"the commit could not be written ({e}); nothing was committed") from e
        return Reason.NONE if journal.wait() else Reason.OUTCOME_PENDING

    def backout(self, application_requested: bool = True) -> None:
        """Undo every operation; a marked get skips an application-requested backout."""
        self.staged = None
        ops, skip = self.ops, self.skip
        if not ops:
            return
        self.ops, self.skip = [], None
        keep = skip if application_requested else None
        journal = ops[0][1].journal
        batch = StoreChanges() if journal is not None else None
        with _locks(ops):
            for op in ops:
                if op is keep:
                    continue
                kind, q, ref = op
                if kind == PUT:
                    q.remove_locked(ref, durable=False)  # never written: nothing to delete
                else:
                    q.restore_locked(ref, backout=True, batch=batch)
            if batch:
                # Harden the raised backout counts. Best effort: a backout cannot fail, and a
                # count not written only means an older count after a restart.
                with suppress(MQError):
                    journal.write(batch, "backout")  # type: ignore[union-attr]
        _after(ops)
        if keep is not None:
            # Step 7: the marked get is now the whole of a new unit of work, unmarked.
            self.ops.append(keep)


def _locks(ops: list[tuple[int, LocalQueue, Ref]]):
    """Take the locks of every queue in ``ops``, in queue-id order (the lock rule's one
    caller, with the poison move, that holds several queues' locks at once)."""
    first = ops[0][1]
    if all(q is first for _, q, _ in ops):
        return first.mutex  # the common case: one queue, one lock
    stack = ExitStack()
    queues = {q.id: q for _, q, _ in ops}
    for qid in sorted(queues):
        stack.enter_context(queues[qid].mutex)
    return stack


def _after(ops: list[tuple[int, LocalQueue, Ref]]) -> None:
    """Store cleanups owed by the queues touched, without their locks."""
    for q in {id(q): q for _, q, _ in ops}.values():
        q.after_get()
