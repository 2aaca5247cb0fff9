"""Finding group items (queue lock held): which item a group-option call may return, its
members and segments, and whether a group or logical message is complete
(docs/semantics.md §5.1, §6.3). Swept messages are found in place through the blobs'
GroupId hashes, never unswept; a blob not in memory is returned as a
:class:`~sweepq.engine.core.lane.Need` (the get path reads it and the finder looks again;
``pinned`` keeps what was read for the rest of the call).

Limits: the completeness checks of ALL_* / COMPLETE_MSG find a group's members through the
queue's GroupId index when it has one (INDXTYPE(GROUPID), engine/core/index.py), else by a walk
in get order that stops as soon as the members found settle it (an incomplete group is
walked to the end: O(depth)).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from .. import record
from ..constants import GMO, IndexType, Reason
from ..core.found import Found
from ..core.lane import Need
from ..errors import MQError
from ..matching import Match
from .position import IN_GROUP, LAST_MSG, LAST_SEGMENT, MSG_IN_GROUP, SEGMENT, SEGMENTS, Position, fields, length

if TYPE_CHECKING:
    from ..queue import LocalQueue

_GROUP = struct.Struct("<24sIII")
_LOGICAL = int(GMO.LOGICAL_ORDER)
_COMPLETE = int(GMO.COMPLETE_MSG)
_ALL_MSGS = int(GMO.ALL_MSGS_AVAILABLE)
_ALL_SEGS = int(GMO.ALL_SEGMENTS_AVAILABLE)


class Eligible(Match):
    """A :class:`Match` with the group rules on top: ``whole`` accepts only items that can
    start a logical message (not a segment, or Offset 0); ``skip_groups`` / ``skip_msgs``
    are GroupIds / (GroupId, MsgSeqNumber) found incomplete during this call."""

    __slots__ = ("skip_groups", "skip_msgs", "whole")

    def __init__(self, ident):
        super().__init__(ident)
        self.whole = False
        self.skip_groups: set[bytes] = set()
        self.skip_msgs: set[tuple[bytes, int]] = set()

    def __call__(self, rec: bytes) -> bool:
        if not Match.__call__(self, rec):
            return False
        if self.whole or self.skip_groups or self.skip_msgs:
            gid, seq, off, flags = fields(rec)
            if self.whole and flags & SEGMENT and off:
                return False
            if gid in self.skip_groups or (gid, seq) in self.skip_msgs:
                return False
        return True


def eligible(pos: Position, opts: int, um: Match | None, ident, selector=None) -> Eligible:
    """The predicate of the items a get (or browse) with ``opts`` may return, given the
    handle's ``pos``, the caller's match ``um`` (docs/semantics.md §5.1) and the handle's
    selection string (§10; it only ever narrows). Raises 2247 when a match field can never
    equal the eligible item's."""
    e = Eligible(ident)
    e.selector = selector
    nxt = pos.next_item() if opts & _LOGICAL else None
    if nxt is not None:
        gid, seq, off = nxt
        if um is not None and (
            (um.group_id is not None and um.group_id != gid)
            or (um.msg_seq_number is not None and um.msg_seq_number != seq)
            or (um.offset is not None and um.offset != off)
        ):
            raise _match_error(gid, seq, off)
        e.group_id, e.msg_seq_number, e.offset = gid, seq, off
        return e
    if um is not None:
        e.msg_id, e.correl_id, e.group_id, e.seq = um.msg_id, um.correl_id, um.group_id, um.seq
        e.msg_seq_number, e.offset = um.msg_seq_number, um.offset
    if opts & _LOGICAL:
        if (e.msg_seq_number or 1) != 1 or (e.offset or 0) != 0:
            raise MQError(
                Reason.MATCH_OPTIONS_ERROR,
                "with LOGICAL_ORDER and no current group only items with msg_seq_number 1 and offset 0 "
                "are eligible; drop MATCH_MSG_SEQ_NUMBER / MATCH_OFFSET or match 1 / 0",
            )
        e.msg_seq_number, e.offset = 1, 0
    elif opts & _COMPLETE:
        e.whole = True
    return e


def _match_error(gid: bytes, seq: int, off: int) -> MQError:
    return MQError(
        Reason.MATCH_OPTIONS_ERROR,
        f"with LOGICAL_ORDER and a current group only its next item (group {gid.hex()}, msg_seq_number "
        f"{seq}, offset {off}) is eligible; the match fields given disagree with it",
    )


def check_match(um: Match | None, rec: bytes, pos: Position, opts: int) -> None:
    """2247 after finding: with LOGICAL_ORDER the caller's other match fields (MsgId,
    CorrelId, token) must equal the eligible item's."""
    if um is None or not opts & _LOGICAL or not pos.current:
        return
    if (
        (um.msg_id is not None and um.ident.msg_id(rec) != um.msg_id)
        or (um.correl_id is not None and record.correl_id(rec) != um.correl_id)
        or (um.seq is not None and record.seq_of(rec) != um.seq)
    ):
        gid, seq, off, _ = fields(rec)
        raise _match_error(gid, seq, off)


def walk_locked(q: LocalQueue, m: Match, pinned: dict, after=None):
    """Every available record ``m`` accepts, in get order, as (ref, rec); swept ones are read
    in place. Yields a :class:`Need` (and stops) for a blob not in memory."""
    q.must_hold("walking a queue")
    ls = q.lanes
    for lane in reversed(ls.lanes):
        if not (lane.mem or lane.chain):
            continue
        for hit in ls.hits(lane, m, pinned, after):
            yield hit
            if type(hit) is Need:
                return


def pin(pinned: dict, need: Need) -> None:
    """After ``q.load(need)``: keep the records for the rest of the call, so that a search
    that spans more blobs than the queue's cache of decoded blobs still ends."""
    records = need.blob.loaded
    if records is not None:
        pinned[need.blob] = records


# ``LocalQueue.groups_started`` (lock held): {GroupId: [MsgSeqNumber of its last message
# or None, MsgSeqNumbers of the whole messages taken, {MsgSeqNumber: {Offset: (length,
# flags)}} of the segments taken]} for the groups of which a get took an item: what has
# left is gone, not missing (ALL_MSGS_AVAILABLE, ALL_SEGMENTS_AVAILABLE). Forgotten when
# the queue empties or a logical-order get finishes the group.


def members_locked(q: LocalQueue, gid: bytes, pinned: dict, enough=None):
    """The available items of group ``gid``: {seq: {offset: (ref, rec, flags)}}, or a
    :class:`Need`. With a GROUP_ID index (engine/core/index.py) the in-memory ones come from it,
    not from a walk. ``enough(out, seq, flags)`` may end the search early, once what it
    found is enough."""
    q.must_hold("finding a group's members")
    m = Match(q.ident)
    m.group_id = gid
    ls = q.lanes
    index = ls.index
    if index is not None and index.kind == IndexType.GROUP_ID:
        found: list = ls.indexed_hits(gid, m, pinned)  # (ref, rec)s, and a Need
    else:
        found = walk_locked(q, m, pinned)
    out: dict[int, dict[int, tuple]] = {}
    for item in found:
        if type(item) is Need:
            return item
        ref, rec = item
        _, seq, off, flags = fields(rec)
        out.setdefault(seq, {}).setdefault(off, (ref, rec, flags))
        if enough is not None and enough(out, seq, flags):
            break
    return out


class Enough:
    """Ends a member search as soon as the items found make the candidate eligible: a
    group's members usually sit together near its first item, so most searches stop long
    before the end of the queue (only an incomplete group is searched to the end)."""

    __slots__ = ("gid", "gone", "group", "last", "last_seg", "seg_from", "seq", "started", "taken")

    def __init__(self, started: dict, gid: bytes, seq: int, group: bool, seg_from):
        entry = started.get(gid)
        self.started, self.gid, self.seq, self.group = started, gid, seq, group
        self.last = entry[0] if entry else None
        self.taken = len(entry[1]) if entry else 0
        self.gone = _gone(started, gid, seq)
        self.seg_from = seg_from  # None: no segment rule; -1: all of them (whole); else from
        self.last_seg = False

    def __call__(self, out: dict, seq: int, flags: int) -> bool:
        if flags & LAST_MSG:
            self.last = seq if self.last is None else min(self.last, seq)
        if seq == self.seq and flags & LAST_SEGMENT:
            self.last_seg = True
        if self.seg_from is not None:
            if not self.last_seg or seq != self.seq:
                return False
            items = out[self.seq]
            if self.seg_from < 0:
                if not whole(items, self.gone):
                    return False
            elif segments(items, self.seg_from) is None:
                return False
        if self.group:
            if self.last is None or len(out) + self.taken < self.last:
                return False
            return group_complete(out, self.started, self.gid)
        return True


def segments(items: dict[int, tuple], start: int) -> list[tuple] | None:
    """The segments of one logical message from offset ``start`` to its last, contiguous,
    or None when one is missing."""
    out = []
    off = start
    while True:
        item = items.get(off)
        if item is None:
            return None
        out.append(item)
        _ref, rec, flags = item
        if not flags & SEGMENT or flags & LAST_SEGMENT:
            return out
        n = length(rec)
        if not n:
            return None  # an empty segment that is not the last: cannot go on
        off += n


def whole(items: dict[int, tuple], gone: dict[int, tuple[int, int]]) -> bool:
    """Every segment of one logical message is there, or has been taken (``gone``:
    {offset: (length, flags)}), from Offset 0 to the last one."""
    off = 0
    while True:
        item = items.get(off)
        if item is not None:
            rec, flags = item[1], item[2]
            n = length(rec)
        elif off in gone:
            n, flags = gone[off]
        else:
            return False
        if not flags & SEGMENT or flags & LAST_SEGMENT:
            return True
        if not n:
            return False
        off += n


def group_complete(members: dict, started: dict, gid: bytes) -> bool:
    """Every logical message of the group is there, whole, up to the LAST_MSG_IN_GROUP one;
    once the group has started to leave (``started``), what gets took counts as there."""
    last, taken, gone = started.get(gid) or (None, (), {})
    for seq, items in members.items():
        if any(flags & LAST_MSG for _, _, flags in items.values()):
            last = seq if last is None else min(last, seq)
    if last is None:
        return False
    for seq in range(1, last + 1):
        items = members.get(seq)
        if items is None:
            if seq in taken:
                continue
            return False
        if not whole(items, gone.get(seq, {})):  # type: ignore[call-overload]  # the {} default above
            return False
    return True


def locate_locked(q: LocalQueue, e: Eligible, opts: int, pos: Position, pinned: dict, after=None):
    """The finder of a group-option call: the first eligible item in get order as a
    :class:`Found` (several refs with COMPLETE_MSG: the segments), a :class:`Need`, or None.
    ``after(ref, rec) -> bool`` restricts candidates (e.g. to beyond a browse cursor)."""
    current = bool(opts & _LOGICAL) and pos.current
    started = q.groups_started
    e.skip_groups.clear()  # what was incomplete at the last look may be complete now
    e.skip_msgs.clear()
    while True:
        hit = next(walk_locked(q, e, pinned, after), None)
        if hit is None or type(hit) is Need:
            return hit
        ref, rec = hit
        gid, seq, off, flags = fields(rec)
        whole_group = opts & _ALL_MSGS and not current and flags & MSG_IN_GROUP
        segs = flags & SEGMENT and (opts & _COMPLETE or (not current and opts & (_ALL_MSGS | _ALL_SEGS)))
        if not (whole_group or segs):
            return Found([ref], [rec])
        seg_from = None if not segs else (off if opts & _COMPLETE else -1)
        members = members_locked(q, gid, pinned, Enough(started, gid, seq, bool(whole_group), seg_from))
        if type(members) is Need:
            return members
        if whole_group and not group_complete(members, started, gid):
            e.skip_groups.add(gid)
            continue
        if segs:
            items = members.get(seq, {})
            if opts & _COMPLETE:  # the segments from the candidate on (Offset 0, or the next one)
                parts = segments(items, off)
                if parts is not None:
                    return Found([it[0] for it in parts], [it[1] for it in parts])
            elif whole(items, _gone(started, gid, seq)):  # ALL_SEGMENTS: from the first still to leave
                return Found([ref], [rec])
            e.skip_msgs.add((gid, seq))
            continue
        return Found([ref], [rec])


def _gone(started: dict, gid: bytes, seq: int) -> dict:
    """The segments of (gid, seq) that gets have taken already: {offset: (length, flags)}."""
    entry = started.get(gid)
    return entry[2].get(seq, {}) if entry else {}


def under_cursor(rec: bytes, opts: int) -> None:
    """COMPLETE_MSG with [BROWSE_]MSG_UNDER_CURSOR: the cursor must not be on a segment past
    the first (MQRC_INVALID_MSG_UNDER_CURSOR, 2246)."""
    if opts & _COMPLETE:
        _, _, off, flags = fields(rec)
        if flags & SEGMENT and off:
            raise MQError(
                Reason.INVALID_MSG_UNDER_CURSOR,
                f"COMPLETE_MSG needs the cursor on the first segment of a logical message; it is on offset {off}",
            )


def segments_of_locked(q: LocalQueue, rec: bytes, pinned: dict):
    """The segments of the logical message that starts with ``rec``, in offset order, as a
    :class:`Found`; None when one is missing or ``rec`` is no segment; or a :class:`Need`."""
    gid, seq, off, flags = fields(rec)
    if not flags & SEGMENT:
        return None
    members = members_locked(q, gid, pinned)
    if type(members) is Need:
        return members
    items = segments(members.get(seq, {}), off)
    if items is None:
        return None
    return Found([it[0] for it in items], [it[1] for it in items])


def reassembled(recs: list[bytes]) -> bytes:
    """One record for a logical message made of ``recs`` (segments in offset order): the
    first segment's header, MsgFlags saying it is the only segment, all the data."""
    first = recs[0]
    if len(recs) == 1:
        return first
    h = record.data_offset(first)
    off = record._sections(first)[2]
    gid, seq, offset, flags = _GROUP.unpack_from(first, off)
    head = first[:off] + _GROUP.pack(gid, seq, offset, flags | SEGMENT | LAST_SEGMENT) + first[off + _GROUP.size : h]
    return head + b"".join(record.data_of(r) for r in recs)


def note_taken_locked(q: LocalQueue, recs: list[bytes], finished: bool = False) -> None:
    """Remember that a group has started to leave (lock held); ``finished``: a logical-order
    get took its last item."""
    gid, seq, _, flags = fields(recs[-1])
    if not flags & (IN_GROUP | SEGMENTS):
        return
    started = q.groups_started
    if q.depth == 0:
        started.clear()
        return
    done = (not flags & SEGMENT or flags & LAST_SEGMENT) and (not flags & MSG_IN_GROUP or flags & LAST_MSG)
    if finished and done:
        started.pop(gid, None)
        return
    entry = started.get(gid)
    if entry is None:
        entry = started[gid] = [None, set(), {}]
    for rec in recs:
        _, seq, off, flags = fields(rec)
        if flags & LAST_MSG:
            entry[0] = seq
        if flags & SEGMENT:
            entry[2].setdefault(seq, {})[off] = (length(rec), flags)
        else:
            entry[1].add(seq)
