"""Units of work: commit, backout, and skip backout (seed 000, seed 004, SEMANTICS.md §8).

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

from contextlib import ExitStack

from .queue import LocalQueue, Ref

PUT = 0
GET = 1


class UnitOfWork:
    """The operations of one connection since its last syncpoint.

    ``ops`` holds ``(kind, queue, ref)`` in the order they happened (a ref is a slot, or a
    hit inside a swept blob); ``skip`` is the marked get (an element of ``ops``) or None.

    Commit and backout change only memory under the locks, so they cannot fail halfway;
    store cleanups they cause (a blob emptied by a commit) run after the locks are released
    and never fail the call (engine/tiering.py).
    """

    __slots__ = ("ops", "skip")

    def __init__(self) -> None:
        self.ops: list[tuple[int, LocalQueue, Ref]] = []
        self.skip: tuple[int, LocalQueue, Ref] | None = None

    def __len__(self) -> int:
        return len(self.ops)

    def add_put(self, queue: LocalQueue, node: Ref) -> None:
        self.ops.append((PUT, queue, node))

    def add_get(self, queue: LocalQueue, node: Ref, mark_skip: bool = False) -> None:
        op = (GET, queue, node)
        self.ops.append(op)
        if mark_skip:
            self.skip = op

    def commit(self) -> None:
        """Make every put visible and every got message gone, atomically for observers."""
        ops = self.ops
        if not ops:
            return
        self.ops, self.skip = [], None
        with _locked(ops):
            for kind, q, ref in ops:
                if kind == PUT:
                    q._commit_put(ref)
                else:
                    q._remove(ref)
        _after(ops)

    def backout(self, application_requested: bool = True) -> None:
        """Undo every operation; a marked get skips an application-requested backout."""
        ops, skip = self.ops, self.skip
        if not ops:
            return
        self.ops, self.skip = [], None
        keep = skip if application_requested else None
        with _locked(ops):
            for op in ops:
                if op is keep:
                    continue
                kind, q, ref = op
                if kind == PUT:
                    q._remove(ref)
                else:
                    q._restore(ref, backout=True)
        _after(ops)
        if keep is not None:
            # Step 7: the marked get is now the whole of a new unit of work, unmarked.
            self.ops.append(keep)


def _locked(ops: list[tuple[int, LocalQueue, Ref]]):
    """Hold the locks of every queue in ``ops``, taken in queue-id order."""
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
