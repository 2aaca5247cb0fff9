"""Putting groups and segments (docs/semantics.md §6.2): the group fields of each record,
assigned by the queue manager under PMO.LOGICAL_ORDER or taken from the descriptor, and
segmentation of a message longer than the queue allows. The records are placed by the one
put path (engine/putpath.py :func:`~sweepq.engine.putpath.place`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import checks, putpath
from ..constants import GROUPID_NONE, MF, PMO, Reason
from ..errors import MQError
from ..getpath import check_room
from ..message import PutResult
from .position import IN_GROUP, LAST_SEGMENT, MSG_IN_GROUP, SEGMENT, SEGMENTS, Position, new_group_id, normalise
from .position import settle as _settle
from .position import state as _state

if TYPE_CHECKING:
    from ..handlestate import HandleState

MAX_SEQ = 999_999_999
MAX_OFFSET = 999_999_999
_NEEDS_GROUP_ID = IN_GROUP | SEGMENTS | int(MF.SEGMENTATION_ALLOWED)
_SEG_ALLOWED = int(MF.SEGMENTATION_ALLOWED)
_PMO_LOGICAL = int(PMO.LOGICAL_ORDER)
_PMO_SYNC = int(PMO.SYNCPOINT)


def put(s: HandleState, data, md, opts: int) -> PutResult:
    """MQPUT of a message in a group, a segment, with SEGMENTATION_ALLOWED or under
    PMO.LOGICAL_ORDER, or on a handle with a current group (Handle.put routes here after
    its option checks)."""
    try:
        return _put(s, data, md, opts)
    finally:
        _settle(s)


def _put(s: HandleState, data, md, opts: int) -> PutResult:
    q = putpath.check_target(s)
    data = putpath.as_bytes(data)
    extra: dict
    if md is None:
        extra, priority, persistent, reason = {}, q.default_priority, q.default_persistent, 0
        flags, md_gid, md_seq, md_off = 0, GROUPID_NONE, 1, 0
    else:
        extra, priority, persistent, reason = putpath.descriptor(s, md, opts)
        flags = normalise(int(md.msg_flags))
        md_gid = checks.identifier(md.group_id, 24, "group_id")
        md_seq, md_off = md.msg_seq_number, md.offset
    extra.pop("group", None)
    syncpoint = bool(opts & _PMO_SYNC)
    pos = _state(s).put
    if opts & _PMO_LOGICAL:
        _check_logical(pos, flags, syncpoint, persistent)
        gid, seq, off = _logical_item(s, pos, flags)
    else:
        gid, seq, off = md_gid, md_seq, md_off
        if gid == GROUPID_NONE and flags & _NEEDS_GROUP_ID:
            gid = new_group_id(s.qm)
        if pos.logical and pos.current:
            reason = _warning(pos, flags, gid, syncpoint, persistent) or reason
    n = len(data)
    if off + n > MAX_OFFSET + 1:
        raise MQError(
            Reason.OFFSET_ERROR, f"offset {off} + {n} bytes passes the largest logical message ({MAX_OFFSET} bytes)"
        )
    pieces = _pieces(s, data, gid, seq, off, flags)
    if syncpoint:
        check_room(s, len(pieces))
    payloads = [p[0] for p in pieces]
    recs, pending = putpath.place(s, q, payloads, extra, priority, persistent, syncpoint, [p[1] for p in pieces])
    # The position moves with every group or segment put (the seed's restart relies on it).
    last = flags if len(pieces) == 1 else (pieces[-1][1][3] if flags & SEGMENT else flags & ~SEGMENTS)
    pos.advance(gid, seq, off, n, last, syncpoint, persistent)
    pos.logical = bool(opts & _PMO_LOGICAL)
    res = PutResult()
    res._rec = recs[0]
    res._ident = s.qm.ident
    res.reason = reason or pending
    return res


def _check_logical(pos: Position, flags: int, syncpoint: bool, persistent: bool) -> None:
    """PMO.LOGICAL_ORDER: the put must continue what is current (2242, 2241, 2245, 2185)."""
    if pos.in_msg:
        if not flags & SEGMENT:
            raise MQError(
                Reason.INCOMPLETE_MSG,
                "the current logical message is incomplete: put its next segment (MF.SEGMENT or MF.LAST_SEGMENT)",
            )
        if flags & IN_GROUP != pos.last_flags:
            raise MQError(
                Reason.INCOMPLETE_MSG,
                "the segments of one logical message must keep the same MSG_IN_GROUP / LAST_MSG_IN_GROUP setting",
            )
    elif pos.in_group and not flags & MSG_IN_GROUP:
        raise MQError(
            Reason.INCOMPLETE_GROUP,
            "the current group is incomplete: put its next message (MF.MSG_IN_GROUP or MF.LAST_MSG_IN_GROUP)",
        )
    if pos.current:
        if syncpoint != pos.in_uow:
            raise MQError(
                Reason.INCONSISTENT_UOW,
                "every message of a group (segment of a logical message) needs the same PMO.SYNCPOINT setting",
            )
        if persistent != pos.persistent:
            raise MQError(
                Reason.INCONSISTENT_PERSISTENCE,
                "every message of a group (segment of a logical message) must have the same persistence",
            )


def _logical_item(s: HandleState, pos: Position, flags: int) -> tuple[bytes, int, int]:
    """(GroupId, MsgSeqNumber, Offset) the queue manager assigns under LOGICAL_ORDER."""
    nxt = pos.next_item()
    if nxt is not None:
        if nxt[1] > MAX_SEQ:
            raise MQError(Reason.MSG_SEQ_NUMBER_ERROR, f"the group already holds {MAX_SEQ} messages")
        return nxt
    return (new_group_id(s.qm) if flags & _NEEDS_GROUP_ID else GROUPID_NONE), 1, 0


def _warning(pos: Position, flags: int, gid: bytes, syncpoint: bool, persistent: bool) -> int:
    """Without LOGICAL_ORDER after a put that used it: the reasons it would have failed
    with, as a warning on the result."""
    if flags & (IN_GROUP | SEGMENTS) and gid == pos.group_id:
        if syncpoint != pos.in_uow:
            return Reason.INCONSISTENT_UOW
        if persistent != pos.persistent:
            return Reason.INCONSISTENT_PERSISTENCE
        return 0
    return pos.incomplete()


def _pieces(s: HandleState, data: bytes, gid: bytes, seq: int, off: int, flags: int) -> list[tuple]:
    """(payload, group tuple) per record: one, or the segments of a message too long for the
    queue (SEGMENTATION_ALLOWED: Offset = the bytes before each)."""
    n = len(data)
    limit = min(s.queue.max_msg_length, s.qm.max_msg_length)
    if n <= limit:
        group = (gid, seq, off, flags) if (flags or seq != 1 or off or gid != GROUPID_NONE) else None
        return [(data, group)]
    if not flags & _SEG_ALLOWED or limit == 0:
        raise putpath.too_big(s, n)
    last = flags & LAST_SEGMENT or not flags & SEGMENT  # a whole message ends with its last piece
    base = (flags & ~LAST_SEGMENT) | SEGMENT
    return [
        (data[a : a + limit], (gid, seq, off + a, base | (LAST_SEGMENT if last and a + limit >= n else 0)))
        for a in range(0, n, limit)
    ]
