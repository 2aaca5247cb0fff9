"""Poison messages: a get that meets a message whose backout count reached its queue's
threshold moves it to the backout requeue queue instead (BOTHRESH / BOQNAME,
docs/semantics.md §8.3; on when the queue manager's ``backout_handling`` is).

The get path (engine/getpath.py) asks :func:`due` under the source queue's lock, hides the
message there (no one else can take it while it moves) and calls :func:`requeue` after
releasing it. The move takes both queues' locks, in queue-id order as a commit does (the
lock rule, engine/queue.py), so that its one store write, the source's record deleted and
the requeue queue's written, is made under the locks of both queues it changes. Under
syncpoint the move is part of the get's unit of work (a backout puts it back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import record
from .core.flags import UNCOMMITTED
from .durable.journal import Journal, StoreChanges
from .errors import MQError

if TYPE_CHECKING:
    from .core.ref import Ref
    from .handlestate import HandleState
    from .queue import LocalQueue


def due(s: HandleState, q: LocalQueue, rec: bytes) -> bool:
    """Must ``rec``, about to be returned by a get on ``q``, move instead? Its backout count
    reached the threshold and the requeue queue can take it now (read without that queue's
    lock: a change in between is caught by :func:`requeue`)."""
    if record.backout_of(rec) < q.poison_limit:
        return False
    boq = s.qm.queue_named(q.attrs.backout_requeue_q)
    return boq is not None and boq is not q and not boq.inhibit_put and boq.depth < boq.max_depth


def requeue(s: HandleState, q: LocalQueue, ref: Ref, rec: bytes, sync: bool) -> None:
    """Move the hidden message ``ref`` of ``q`` to its requeue queue, in the get's unit of
    work when ``sync``. Without the source's lock. If the requeue queue went away or filled
    up in between, the message reappears where it was and the get's next look delivers it
    (:func:`due` then says no)."""
    qm = s.qm
    boq = qm.queue_named(q.attrs.backout_requeue_q)
    placed = _place(qm, q, boq, ref, rec, sync) if boq is not None else None
    if placed is None:
        with q.mutex:
            q.restore_locked(ref, backout=False)
        return
    if sync:
        s.uow.add_get(q, ref)
        s.uow.add_put(boq, placed)  # type: ignore[arg-type]
        return
    with q.mutex:
        q.remove_locked(ref, durable=False)  # its record moved with it in _place
    q.after_get()
    if boq.journal is not None and rec[record.OFF_FLAGS] & record.PERSISTENT:  # type: ignore[union-attr]
        boq.journal.wait()  # type: ignore[union-attr]  # a failed sync leaves the move made; a later sync hardens it


def _place(qm, q: LocalQueue, boq: LocalQueue, ref: Ref, rec: bytes, sync: bool) -> Ref | None:
    """Put the message on ``boq`` as a new instance keeping its MsgId; returns where it is
    now, or None if ``boq`` cannot take it. Outside syncpoint, one store write moves a
    persistent message's record from ``q`` to ``boq``. Takes both queues' locks, in queue-id
    order (the lock rule's one caller but a commit that holds two at once)."""
    first, second = (q, boq) if q.id < boq.id else (boq, q)
    with first.mutex, second.mutex:
        if boq.deleted or boq.depth >= boq.max_depth:
            return None
        moved = record.rehome(rec, qm.next_seq(), qm.ident)
        lane_i = boq.default_priority if boq.fifo else moved[record.OFF_PRIORITY]
        if not sync and boq.journal is not None and rec[record.OFF_FLAGS] & record.PERSISTENT:
            batch = StoreChanges()
            Journal.add_put(batch, boq, lane_i, moved)
            Journal.add_removal(batch, q, ref)
            try:
                boq.journal.write(batch, f"moving a poison message to {boq.name!r}")
            except MQError:
                return None
        refs = boq.insert_locked([moved], lane_i, (lane_i | UNCOMMITTED) if sync else lane_i, refs=True)
        return refs[0]  # type: ignore[index]  # asked for
