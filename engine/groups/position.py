"""Where a handle stands in logical order: the group fields of a record, and the put, get
and browse positions of a handle (docs/semantics.md §6.2, §6.3, §5.5)."""

from __future__ import annotations

import struct
from typing import Protocol

from .. import record
from ..constants import GROUPID_NONE, MF, Reason

_GROUP = struct.Struct("<24sIII")
IN_GROUP = int(MF.MSG_IN_GROUP | MF.LAST_MSG_IN_GROUP)
SEGMENTS = int(MF.SEGMENT | MF.LAST_SEGMENT)
MSG_IN_GROUP = int(MF.MSG_IN_GROUP)
LAST_MSG = int(MF.LAST_MSG_IN_GROUP)
SEGMENT = int(MF.SEGMENT)
LAST_SEGMENT = int(MF.LAST_SEGMENT)


def fields(rec: bytes) -> tuple[bytes, int, int, int]:
    """(GroupId, MsgSeqNumber, Offset, MsgFlags) of a record; a record without a group
    section is (MQGI_NONE, 1, 0, 0)."""
    off = record._sections(rec)[2]
    if off < 0:
        return GROUPID_NONE, 1, 0, 0
    return _GROUP.unpack_from(rec, off)


def length(rec: bytes) -> int:
    """The length of a record's message data."""
    return len(rec) - record.data_offset(rec)


def normalise(flags: int) -> int:
    """The stored flags: LAST_MSG_IN_GROUP implies MSG_IN_GROUP, LAST_SEGMENT SEGMENT."""
    if flags & LAST_MSG:
        flags |= MSG_IN_GROUP
    if flags & LAST_SEGMENT:
        flags |= SEGMENT
    return flags


class Position:
    """Where one handle stands in logical order, for one direction (put, get or browse).

    ``in_msg``: a logical message is incomplete (the last item was a segment, not the last
    one; the next is ``offset`` of ``seq``). ``in_group``: a group is incomplete (the next
    logical message is ``seq + 1``). ``in_uow`` / ``persistent`` are the group's, fixed by
    its first item. ``logical``: the previous call used LOGICAL_ORDER.
    """

    __slots__ = ("group_id", "in_group", "in_msg", "in_uow", "last_flags", "logical", "offset", "persistent", "seq")

    def __init__(self) -> None:
        self.reset()
        self.logical = False

    def reset(self) -> None:
        self.group_id = GROUPID_NONE
        self.seq = 0
        self.offset = 0
        self.in_group = False
        self.in_msg = False
        self.last_flags = 0
        self.in_uow = False
        self.persistent = False

    @property
    def current(self) -> bool:
        return self.in_group or self.in_msg

    def incomplete(self) -> int:
        """2242 for an incomplete logical message (it takes precedence), 2241 for an
        incomplete group, else 0."""
        if self.in_msg:
            return Reason.INCOMPLETE_MSG
        if self.in_group:
            return Reason.INCOMPLETE_GROUP
        return 0

    def next_item(self) -> tuple[bytes, int, int] | None:
        """(GroupId, MsgSeqNumber, Offset) of the item that must come next, or None."""
        if self.in_msg:
            return self.group_id, self.seq, self.offset
        if self.in_group:
            return self.group_id, self.seq + 1, 0
        return None

    def advance(self, gid: bytes, seq: int, offset: int, n: int, flags: int, in_uow: bool, persistent: bool) -> None:
        """The item (gid, seq, offset, flags) of ``n`` bytes was put or returned."""
        flags = normalise(flags)
        if not flags & (IN_GROUP | SEGMENTS):
            return  # not in a group, not a segment: nothing is current after it
        if not self.current:
            self.in_uow, self.persistent = in_uow, persistent
        self.group_id, self.seq = gid, seq
        self.in_msg = bool(flags & SEGMENT) and not flags & LAST_SEGMENT
        self.offset = offset + n if self.in_msg else 0
        self.in_group = bool(flags & MSG_IN_GROUP) and (self.in_msg or not flags & LAST_MSG)
        self.last_flags = flags & IN_GROUP
        if not self.current:
            self.reset()

    def advance_rec(self, rec: bytes, in_uow: bool) -> None:
        gid, seq, off, flags = fields(rec)
        self.advance(gid, seq, off, length(rec), flags, in_uow, record.is_persistent(rec))


class HandleGroups:
    """A handle's put and get positions (``HandleState.groups``; None while both are idle)."""

    __slots__ = ("get", "put")

    def __init__(self) -> None:
        self.put = Position()
        self.get = Position()

    def idle(self) -> bool:
        return not (self.put.current or self.get.current)


class BrowseState:
    """A handle's logical-order browse pass (``HandleState.gbrowse``; None: a physical pass
    or none). ``pos``: the browse position in its group, separate from the get position
    (seed 000). ``anchor``: (lane, seq) of the first item of the current group, or of the
    last message not in a group: the next group is searched for beyond it, so the logical
    order of groups follows the physical position of their first items."""

    __slots__ = ("anchor", "pos")

    def __init__(self) -> None:
        self.pos = Position()
        self.pos.logical = True
        self.anchor: tuple[int, int] | None = None


class Holder(Protocol):
    """What the functions below use of a handle's state (engine/handlestate.py's
    ``HandleState``, which holds a ``HandleGroups`` and so sits above this module)."""

    groups: HandleGroups | None


def state(s: Holder) -> HandleGroups:
    """The handle's group positions, made on first use."""
    g = s.groups
    if g is None:
        g = s.groups = HandleGroups()
    return g


def settle(s: Holder) -> None:
    """Drop the state once nothing is current: the handle's calls take the fast paths again."""
    g = s.groups
    if g is not None and g.idle():
        s.groups = None


def new_group_id(qm) -> bytes:
    """A unique GroupId: ``b"SWQG"`` + the run id + a number never used in this run."""
    return b"SWQG" + qm.ident.run_id + qm.next_seq().to_bytes(8, "big")


def closed(s: Holder) -> Reason:
    """MQCLOSE's warning: 2242 / 2241 when the handle leaves a logical message / group
    incomplete (put side first), else NONE."""
    g = s.groups
    s.groups = None
    if g is None:
        return Reason.NONE
    return Reason(g.put.incomplete() or g.get.incomplete())
