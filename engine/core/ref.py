"""A ref: one message of a queue, as the get path, a unit of work, a batch or a browse lock holds it.

A message is either *in memory* (a slot of the queue's :class:`~sweepq.engine.core.lanes.LaneSet`)
or *inside a swept blob* of its lane's chain (a position of a
:class:`~sweepq.engine.core.swept.SweptBlob`). A :class:`Ref` names either, so that the code
above the core holds one type and never asks which: every operation on a ref (its record,
take, hide, restore, lock) is a method of the core, which alone looks inside.

A ref held across a release of the queue's lock (a unit of work's get, a browse lock) stays
valid when its message moves: a blob that comes back moves every ref it holds to the
message's new slot (:meth:`LaneSet.splice_blob`), and a message that is held is never swept
(the sweep's verification refuses it) nor renumbered (:meth:`LaneSet.shrink` waits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lane import Lane
    from .swept import SweptBlob


class Ref:
    """One message (see the module docstring).

    In memory: ``slot`` >= 0, and ``blob`` is None. Inside a blob: ``slot`` is -1, ``lane``
    the lane whose chain holds ``blob``, ``pos`` the message's position in it and ``rec`` its
    record as read from the blob (with any backout count raised while swept). Only the core
    (engine/core/) writes these fields."""

    __slots__ = ("blob", "lane", "pos", "rec", "slot")

    def __init__(
        self, slot: int, lane: Lane | None = None, blob: SweptBlob | None = None, pos: int = -1, rec: bytes = b""
    ):
        self.slot = slot
        self.lane = lane
        self.blob = blob
        self.pos = pos
        self.rec = rec

    @staticmethod
    def at(slot: int) -> Ref:
        """The ref of the in-memory message at ``slot`` (the core's, without the keyword
        constructor: compiled, a ref from the free list)."""
        r = Ref.__new__(Ref)
        r.slot = slot
        r.lane = None
        r.blob = None
        r.pos = -1
        r.rec = b""
        return r

    def came_back(self, slot: int) -> None:
        """The message this ref held inside a blob is in memory again, at ``slot`` (the core's
        :meth:`~sweepq.engine.core.lanes.LaneSet.splice_blob`)."""
        self.slot = slot
        self.lane = None
        self.blob = None
        self.pos = -1
        self.rec = b""

    @property
    def swept(self) -> bool:
        """Whether the message is inside a blob (else in memory)."""
        return self.slot < 0

    def __repr__(self) -> str:
        if self.slot >= 0:
            return f"Ref(slot={self.slot})"
        blob = self.blob.blob_id if self.blob is not None else None
        return f"Ref(blob={blob}, pos={self.pos})"
