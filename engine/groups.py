"""Message groups and segments (seed 000; docs/semantics.md §2.2, §3, §5.1, §5.5, §6).

A *group* (GroupId) holds logical messages numbered by MsgSeqNumber from 1; a logical
message is one physical message or several *segments* told apart by Offset. The record
keeps all of it in its optional group section (engine/record.py). This module holds
everything groups add to put and get, so that connection.py only routes to it:

Put (:func:`put`)
    MsgFlags validated (2249); LAST_MSG_IN_GROUP implies MSG_IN_GROUP and LAST_SEGMENT
    implies SEGMENT in the stored copy. With PMO.LOGICAL_ORDER the queue manager assigns
    GroupId (generated, unique), MsgSeqNumber and Offset from the handle's put
    :class:`Position` (§6.2) and refuses 2242 / 2241 / 2245 / 2185 (FAILED). Without it the
    application supplies them (GroupId NONE with a group or segment flag, or with
    SEGMENTATION_ALLOWED, gets a generated one); when the previous put on the handle used
    LOGICAL_ORDER the same reasons come back as a warning on ``PutResult.reason``. Every
    group or segment put, with or without the option, moves the position, which is how the
    seed's restart works ("LOGICAL_ORDER cannot be used for the first put, but can
    thereafter"). SEGMENTATION_ALLOWED and a message longer than the queue's (or the
    manager's) max_msg_length: the message is split into segments (Offset = bytes before
    it), all put in one step; the result describes the first segment.

Get (:func:`get`)
    GMO.LOGICAL_ORDER with the handle's get :class:`Position`: no current group → only
    items with MsgSeqNumber 1 and Offset 0 are eligible (MsgId / CorrelId / GroupId may
    choose among them); a current group → only its next item. Match fields that disagree
    with the eligible item: 2247. A syncpoint mode that differs from the group's: 2245
    (FAILED with LOGICAL_ORDER, WARNING after a call that used it). A get without
    LOGICAL_ORDER after one with it, while a group or logical message is incomplete:
    WARNING 2241 / 2242. ALL_MSGS_AVAILABLE / ALL_SEGMENTS_AVAILABLE make a group /
    logical message eligible only when all its items are present and committed (ignored
    after the first item when LOGICAL_ORDER and a group is current; ALL_MSGS implies
    ALL_SEGMENTS). COMPLETE_MSG returns whole logical messages, reassembled: the
    descriptor is the first segment's, its MsgFlags say it is the only segment
    (SEGMENT | LAST_SEGMENT), ``data_length`` is the whole length; the buffer rules of
    ACCEPT_TRUNCATED_MSG (2079 / 2080) apply to the whole.

Swept messages are found in place, never unswept: the search walks front list, the
chain's blobs (through their GroupId hashes) and the rear list of every lane, and a blob
it must read is read without the lock and kept for the rest of the call.

Close (:func:`closed`)
    ``Handle.close()`` returns ``Reason.NONE``, or the WARNING reason 2242 / 2241 when the
    handle leaves a logical message / group incomplete (put side first, then get side).
    MQ's MQCLOSE reports the same reasons with CC WARNING; the handle is closed either way.

Browse (:func:`browse`, §5.5; Handle.get routes cursor calls here when they carry a group
option or the handle is in a logical-order browse pass, everything else to engine/browse.py)
    BROWSE_FIRST / BROWSE_NEXT with LOGICAL_ORDER: the pass keeps its own :class:`Position`
    (``BrowseState``, separate from the get position: seed 000) and the physical position
    of its current group's first item, beyond which the next group is looked for; the
    browse cursor itself is moved as engine/browse.py moves it, so BROWSE_MSG_UNDER_CURSOR
    and MSG_UNDER_CURSOR act on the item browsed. A BROWSE_NEXT that disagrees with its
    pass's BROWSE_FIRST on LOGICAL_ORDER: 2259. COMPLETE_MSG and ALL_*_AVAILABLE apply to
    browses in either order (an incomplete group is passed over). COMPLETE_MSG with
    [BROWSE_]MSG_UNDER_CURSOR returns (or takes) the logical message that starts under the
    cursor, 2246 when the cursor is on a later segment. Not yet: group options with LOCK.

    The pieces are public for other callers: :func:`eligible` (2247 before looking),
    :func:`locate` (``after(ref, rec) -> bool`` restricts candidates, e.g. to beyond a
    cursor; raises :class:`NeedBlob`, then ``q.load(e.need)`` and :func:`pin` without the
    lock and call again), :func:`check_match` (2247 after finding), :func:`reassembled`,
    :meth:`Position.advance_rec`, :func:`under_cursor` (2246), :func:`segments_of`.

Limits: the completeness checks of ALL_* / COMPLETE_MSG find a group's members through the
queue's GroupId index when it has one (INDXTYPE(GROUPID), engine/index.py), else by a walk
in get order that stops as soon as the members found settle it (an incomplete group is
walked to the end: O(depth)); swept blobs are skipped through their GroupId hashes.
A group a get has started to take is remembered per queue (what left is gone, not missing)
until the queue empties or a LOGICAL_ORDER get finishes it. A backout does not move a
handle's positions back (the seed's restart path uses a STATUS queue for that). Group-option
gets (and every get on a handle while a group is current) do not requeue poison messages
(BOTHRESH): that stays with the plain get path. ``get_many`` and ``put_many`` take no group
options and do not move positions.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from . import checks, record
from .constants import GMO, GROUPID_NONE, MF, PMO, IndexType, Reason
from .errors import MQError, options_error
from .lane import _SENTINELS, AVAILABLE_BELOW, UNCOMMITTED
from .matching import Match, match_for_get
from .message import Message, PutResult
from .queue import Waiter
from .swept import SweptHit
from .tiering import Need

if TYPE_CHECKING:
    from .connection import Handle
    from .queue import LocalQueue

MAX_SEQ = 999_999_999
MAX_OFFSET = 999_999_999

_GROUP = struct.Struct("<24sIII")
_IN_GROUP = int(MF.MSG_IN_GROUP | MF.LAST_MSG_IN_GROUP)
_SEGMENTS = int(MF.SEGMENT | MF.LAST_SEGMENT)
_NEEDS_GROUP_ID = _IN_GROUP | _SEGMENTS | int(MF.SEGMENTATION_ALLOWED)
_MSG_IN_GROUP = int(MF.MSG_IN_GROUP)
_LAST_MSG = int(MF.LAST_MSG_IN_GROUP)
_SEGMENT = int(MF.SEGMENT)
_LAST_SEGMENT = int(MF.LAST_SEGMENT)
_SEG_ALLOWED = int(MF.SEGMENTATION_ALLOWED)

_LOGICAL = int(GMO.LOGICAL_ORDER)
_COMPLETE = int(GMO.COMPLETE_MSG)
_ALL_MSGS = int(GMO.ALL_MSGS_AVAILABLE)
_ALL_SEGS = int(GMO.ALL_SEGMENTS_AVAILABLE)
GROUP_GMO = _LOGICAL | _COMPLETE | _ALL_MSGS | _ALL_SEGS
_SYNC = int(GMO.SYNCPOINT)
_SYNC_IF_P = int(GMO.SYNCPOINT_IF_PERSISTENT)
_WAIT = int(GMO.WAIT)
_ACCEPT = int(GMO.ACCEPT_TRUNCATED_MSG)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_PMO_LOGICAL = int(PMO.LOGICAL_ORDER)
_PMO_SYNC = int(PMO.SYNCPOINT)
_UNSET = object()


def fields(rec: bytes) -> tuple[bytes, int, int, int]:
    """(GroupId, MsgSeqNumber, Offset, MsgFlags) of a record; a record without a group
    section is (MQGI_NONE, 1, 0, 0)."""
    off = record._sections(rec)[2]
    if off < 0:
        return GROUPID_NONE, 1, 0, 0
    return _GROUP.unpack_from(rec, off)


def _length(rec: bytes) -> int:
    """The length of a record's message data."""
    return len(rec) - record.data_offset(rec)


def normalise(flags: int) -> int:
    """The stored flags: LAST_MSG_IN_GROUP implies MSG_IN_GROUP, LAST_SEGMENT SEGMENT."""
    if flags & _LAST_MSG:
        flags |= _MSG_IN_GROUP
    if flags & _LAST_SEGMENT:
        flags |= _SEGMENT
    return flags


# -- the per-handle state ---------------------------------------------------------------------


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

    def advance(self, gid: bytes, seq: int, offset: int, length: int, flags: int, in_uow: bool, persistent: bool):
        """The item (gid, seq, offset, flags) of ``length`` bytes was put or returned."""
        flags = normalise(flags)
        if not flags & (_IN_GROUP | _SEGMENTS):
            return  # not in a group, not a segment: nothing is current after it
        if not self.current:
            self.in_uow, self.persistent = in_uow, persistent
        self.group_id, self.seq = gid, seq
        self.in_msg = bool(flags & _SEGMENT) and not flags & _LAST_SEGMENT
        self.offset = offset + length if self.in_msg else 0
        self.in_group = bool(flags & _MSG_IN_GROUP) and (self.in_msg or not flags & _LAST_MSG)
        self.last_flags = flags & _IN_GROUP
        if not self.current:
            self.reset()

    def advance_rec(self, rec: bytes, in_uow: bool) -> None:
        gid, seq, off, flags = fields(rec)
        self.advance(gid, seq, off, _length(rec), flags, in_uow, record.is_persistent(rec))


class HandleGroups:
    """A handle's put and get positions (``Handle._grp``; None while both are idle)."""

    __slots__ = ("get", "put")

    def __init__(self) -> None:
        self.put = Position()
        self.get = Position()

    def idle(self) -> bool:
        return not (self.put.current or self.get.current)


def _state(h: Handle) -> HandleGroups:
    g = h._grp
    if g is None:
        g = h._grp = HandleGroups()
    return g


def _settle(h: Handle) -> None:
    """Drop the state once nothing is current: the handle's calls take the fast paths again."""
    g = h._grp
    if g is not None and g.idle():
        h._grp = None


def new_group_id(qm) -> bytes:
    """A unique GroupId: ``b"SWQG"`` + the run id + a number never used in this run."""
    return b"SWQG" + qm.ident.run_id + next(qm._seq).to_bytes(8, "big")


# -- put ----------------------------------------------------------------------------------------


def put(h: Handle, data, md, opts: int) -> PutResult:
    """MQPUT of a message in a group, a segment, with SEGMENTATION_ALLOWED or under
    PMO.LOGICAL_ORDER, or on a handle with a current group (Handle.put routes here after
    its option checks)."""
    try:
        return _put(h, data, md, opts)
    finally:
        _settle(h)


def _put(h: Handle, data, md, opts: int) -> PutResult:
    from .connection import _as_bytes, _syncpoint_limit

    q = h.queue
    qm = h._qm
    if q.inhibit_put:
        raise MQError(Reason.PUT_INHIBITED, f"puts to {q.name!r} are inhibited (inhibit_put)")
    if type(data) is not bytes:
        data = _as_bytes(data)
    if md is None:
        extra, priority, persistent, reason = {}, q.default_priority, q.default_persistent, 0
        flags, md_gid, md_seq, md_off = 0, GROUPID_NONE, 1, 0
    else:
        extra, priority, persistent, reason = h._put_fields(md, opts, q)
        flags = normalise(int(md.msg_flags))
        md_gid = checks.identifier(md.group_id, 24, "group_id")
        md_seq, md_off = md.msg_seq_number, md.offset
    extra.pop("group", None)
    syncpoint = bool(opts & _PMO_SYNC)
    g = _state(h)
    pos = g.put
    n = len(data)
    grouped = flags & (_IN_GROUP | _SEGMENTS)
    if opts & _PMO_LOGICAL:
        if pos.in_msg:
            if not flags & _SEGMENT:
                raise _fail(
                    h,
                    Reason.INCOMPLETE_MSG,
                    "the current logical message is incomplete: put its next segment (MF.SEGMENT or MF.LAST_SEGMENT)",
                )
            if flags & _IN_GROUP != pos.last_flags:
                raise _fail(
                    h,
                    Reason.INCOMPLETE_MSG,
                    "the segments of one logical message must keep the same MSG_IN_GROUP / LAST_MSG_IN_GROUP setting",
                )
        elif pos.in_group and not flags & _MSG_IN_GROUP:
            raise _fail(
                h,
                Reason.INCOMPLETE_GROUP,
                "the current group is incomplete: put its next message (MF.MSG_IN_GROUP or MF.LAST_MSG_IN_GROUP)",
            )
        if pos.current:
            if syncpoint != pos.in_uow:
                raise _fail(
                    h,
                    Reason.INCONSISTENT_UOW,
                    "every message of a group (segment of a logical message) needs the same PMO.SYNCPOINT setting",
                )
            if persistent != pos.persistent:
                raise _fail(
                    h,
                    Reason.INCONSISTENT_PERSISTENCE,
                    "every message of a group (segment of a logical message) must have the same persistence",
                )
        nxt = pos.next_item()
        if nxt is not None:
            gid, seq, off = nxt
            if seq > MAX_SEQ:
                raise _fail(h, Reason.MSG_SEQ_NUMBER_ERROR, f"the group already holds {MAX_SEQ} messages")
        else:
            gid = new_group_id(qm) if flags & _NEEDS_GROUP_ID else GROUPID_NONE
            seq, off = 1, 0
    else:
        gid, seq, off = md_gid, md_seq, md_off
        if gid == GROUPID_NONE and flags & _NEEDS_GROUP_ID:
            gid = new_group_id(qm)
        if pos.logical and pos.current:
            if grouped and gid == pos.group_id:
                if syncpoint != pos.in_uow:
                    reason = Reason.INCONSISTENT_UOW
                elif persistent != pos.persistent:
                    reason = Reason.INCONSISTENT_PERSISTENCE
            else:
                reason = pos.incomplete()
    if off + n > MAX_OFFSET + 1:
        raise _fail(
            h, Reason.OFFSET_ERROR, f"offset {off} + {n} bytes passes the largest logical message ({MAX_OFFSET} bytes)"
        )
    # The pieces: one, or the segments of a message too long for the queue.
    limit = min(q.max_msg_length, qm.max_msg_length)
    if n > limit:
        if not flags & _SEG_ALLOWED or limit == 0:
            h._too_big(n, q)
        last = flags & _LAST_SEGMENT or not flags & _SEGMENT  # a whole message ends with its last piece
        base = (flags & ~_LAST_SEGMENT) | _SEGMENT
        cuts = range(0, n, limit)
        pieces = [
            (data[a : a + limit], (gid, seq, off + a, base | (_LAST_SEGMENT if last and a + limit >= n else 0)))
            for a in cuts
        ]
    else:
        group = (gid, seq, off, flags) if (flags or seq != 1 or off or gid != GROUPID_NONE) else None
        pieces = [(data, group)]
    uow = h._conn._uow
    if syncpoint and len(uow.ops) + len(pieces) > qm.max_uncommitted:
        raise _syncpoint_limit(qm.max_uncommitted)
    recs = _insert(h, q, pieces, extra, priority, persistent, syncpoint)
    # The position moves with every group or segment put (the seed's restart relies on it).
    last_flags = flags if len(pieces) == 1 else (pieces[-1][1][3] if flags & _SEGMENT else flags & ~_SEGMENTS)
    pos.advance(gid, seq, off, n, last_flags, syncpoint, persistent)
    pos.logical = bool(opts & _PMO_LOGICAL)
    res = PutResult()
    res._rec = recs[0]
    res._ident = qm.ident
    res.reason = reason
    return res


def _fail(h: Handle, reason: int, text: str) -> MQError:
    return MQError(reason, text)


def _insert(h: Handle, q: LocalQueue, pieces, extra: dict, priority: int, persistent: bool, syncpoint: bool):
    """Put the records of ``pieces`` (payload, group tuple) in one step (put_many's)."""
    qm = h._qm
    lane_i = q.default_priority if q.fifo else priority
    put_us = int(qm.clock.wall() * 1_000_000)
    msg_id = extra.pop("msg_id", None)
    with q.mutex:
        if q.depth >= q.max_depth:
            raise MQError(Reason.Q_FULL, f"{q.name!r} holds max_depth={q.max_depth} messages")
        recs = []
        for k, (payload, group) in enumerate(pieces):
            recs.append(
                record.encode(
                    next(qm._seq),
                    put_us,
                    priority,
                    persistent,
                    payload,
                    msg_id=msg_id if k == 0 else None,  # the other segments get their own
                    group=group,
                    **extra,
                )
            )
        durable = persistent and q.journal is not None
        if durable:
            recs = [record.pin_msg_id(r, qm.ident) for r in recs]
            if not syncpoint:
                q.journal.put(q, lane_i, recs)  # all in one write, before any joins the lane
        state = (lane_i | UNCOMMITTED) if syncpoint else lane_i
        if len(recs) == 1:  # the common case: append is much cheaper than a bulk link
            slots = [q.lanes.append(q.lane_list[lane_i], recs[0], state)]
        else:
            slots = q.lanes.extend(q.lane_list[lane_i], recs, state)
        q.depth += len(recs)
        if q.waiters and not syncpoint:
            for rec in recs:
                if not q.waiters:
                    break
                q._wake_for(rec)
    if syncpoint:
        for slot in slots:
            h._conn._uow.add_put(q, slot)
    elif durable:
        q.journal.wait()
    if qm.recorder is not None:
        for rec in recs:
            qm.recorder.put(q.name, _length(rec), priority, persistent)
    return recs


# -- finding (under the queue's lock) -------------------------------------------------------------


class NeedBlob(Exception):
    """A blob must be read (without the lock) before the search can go on: ``need``."""

    def __init__(self, need: Need):
        super().__init__("blob needed")
        self.need = need


def pin(pinned: dict, need: Need) -> None:
    """After ``q.load(need)``: keep the records for the rest of the call, so that a search
    that spans more blobs than the queue's cache of decoded blobs still ends."""
    records = need.blob.loaded
    if records is not None:
        pinned[need.blob] = records


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
            if self.whole and flags & _SEGMENT and off:
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


def _walk(q: LocalQueue, m: Match, pinned: dict, after=None):
    """Every available record ``m`` accepts, in get order, as (ref, rec); swept ones are read
    in place (SweptHit). Raises :class:`NeedBlob` for a blob not in memory."""
    ls = q.lanes
    recs, nxt, st = ls.recs, ls.nxt, ls.st
    for lane in reversed(ls.lanes):
        if not (lane.mem or lane.chain):
            continue
        for sentinel in (lane.front, lane.rear):
            i = nxt[sentinel]
            while i != sentinel:
                if st[i] < AVAILABLE_BELOW and m(recs[i]) and (after is None or after(i, recs[i])):
                    yield i, recs[i]
                i = nxt[i]
            if sentinel == lane.front:
                yield from _chain_hits(lane, m, pinned, after)


def _chain_hits(lane, m: Match, pinned: dict, after=None):
    """The records of ``lane``'s swept blobs that ``m`` accepts, in order, found through the
    blobs' hashes without unsweeping; raises :class:`NeedBlob` for a blob to read first."""
    for blob in lane.chain:
        cand = blob.candidates(m.msg_id, m.correl_id, m.group_id, m.seq)
        if not len(cand):
            continue
        records = blob.records() or pinned.get(blob)
        if records is None:
            raise NeedBlob(Need(lane, blob))
        for p in cand.tolist():
            rec = blob.record(records, p)
            if m(rec):
                hit = SweptHit(lane, blob, p, rec)
                if after is None or after(hit, rec):
                    yield hit, rec


# ``LocalQueue.groups_started`` (mutex held): {GroupId: [MsgSeqNumber of its last message
# or None, MsgSeqNumbers of the whole messages taken, {MsgSeqNumber: {Offset: (length,
# flags)}} of the segments taken]} for the groups of which a get took an item: what has
# left is gone, not missing (ALL_MSGS_AVAILABLE, ALL_SEGMENTS_AVAILABLE). Forgotten when
# the queue empties or a logical-order get finishes the group.


def _members(q: LocalQueue, gid: bytes, pinned: dict, enough=None) -> dict[int, dict[int, tuple]]:
    """The available items of group ``gid``: {seq: {offset: (ref, rec, flags)}}. With a
    GROUP_ID index (engine/index.py) the in-memory ones come from it, not from a walk.
    ``enough(out, seq, flags)`` may end the search early, once what it found is enough."""
    m = Match(q.ident)
    m.group_id = gid
    ls = q.lanes
    index = getattr(ls, "index", None)
    if index is not None and index.kind == IndexType.GROUP_ID:
        st, recs = ls.st, ls.recs
        found = [(i, recs[i]) for i in index.slots(gid) if st[i] < AVAILABLE_BELOW]
        for lane in ls.lanes:
            if lane.chain:
                found += _chain_hits(lane, m, pinned)
    else:
        found = _walk(q, m, pinned)
    out: dict[int, dict[int, tuple]] = {}
    for ref, rec in found:
        _, seq, off, flags = fields(rec)
        out.setdefault(seq, {}).setdefault(off, (ref, rec, flags))
        if enough is not None and enough(out, seq, flags):
            break
    return out


class _Enough:
    """Ends a member search as soon as the items found make the candidate eligible: a
    group's members usually sit together near its first item, so most searches stop long
    before the end of the queue (only an incomplete group is searched to the end)."""

    __slots__ = ("gid", "gone", "group", "last", "last_seg", "seg_from", "seq", "started", "taken")

    def __init__(self, started: dict, gid: bytes, seq: int, group: bool, seg_from):
        entry = started.get(gid)
        self.started, self.gid, self.seq, self.group = started, gid, seq, group
        self.last = entry[0] if entry else None
        self.taken = len(entry[1]) if entry else 0
        self.gone = entry[2].get(seq, {}) if entry else {}
        self.seg_from = seg_from  # None: no segment rule; -1: all of them (_whole); else from
        self.last_seg = False

    def __call__(self, out: dict, seq: int, flags: int) -> bool:
        if flags & _LAST_MSG:
            self.last = seq if self.last is None else min(self.last, seq)
        if seq == self.seq and flags & _LAST_SEGMENT:
            self.last_seg = True
        if self.seg_from is not None:
            if not self.last_seg or seq != self.seq:
                return False
            items = out[self.seq]
            if self.seg_from < 0:
                if not _whole(items, self.gone):
                    return False
            elif _segments(items, self.seg_from) is None:
                return False
        if self.group:
            if self.last is None or len(out) + self.taken < self.last:
                return False
            return _group_complete(out, self.started, self.gid)
        return True


def _segments(items: dict[int, tuple], start: int) -> list[tuple] | None:
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
        if not flags & _SEGMENT or flags & _LAST_SEGMENT:
            return out
        length = _length(rec)
        if not length:
            return None  # an empty segment that is not the last: cannot go on
        off += length


def _whole(items: dict[int, tuple], gone: dict[int, tuple[int, int]]) -> bool:
    """Every segment of one logical message is there, or has been taken (``gone``:
    {offset: (length, flags)}), from Offset 0 to the last one."""
    off = 0
    while True:
        item = items.get(off)
        if item is not None:
            rec, flags = item[1], item[2]
            length = _length(rec)
        elif off in gone:
            length, flags = gone[off]
        else:
            return False
        if not flags & _SEGMENT or flags & _LAST_SEGMENT:
            return True
        if not length:
            return False
        off += length


def _group_complete(members: dict, started: dict, gid: bytes) -> bool:
    """Every logical message of the group is there, whole, up to the LAST_MSG_IN_GROUP one;
    once the group has started to leave (``started``), what gets took counts as there."""
    last, taken, gone = started.get(gid) or (None, (), {})
    for seq, items in members.items():
        if any(flags & _LAST_MSG for _, _, flags in items.values()):
            last = seq if last is None else min(last, seq)
    if last is None:
        return False
    for seq in range(1, last + 1):
        items = members.get(seq)
        if items is None:
            if seq in taken:
                continue
            return False
        if not _whole(items, gone.get(seq, {})):
            return False
    return True


def locate(q: LocalQueue, e: Eligible, opts: int, pos: Position, pinned: dict, after=None):
    """The first eligible item in get order and what a get of it takes (mutex held):
    ``(refs, recs)`` (several with COMPLETE_MSG), or None. Raises :class:`NeedBlob`."""
    current = bool(opts & _LOGICAL) and pos.current
    started = q.groups_started
    e.skip_groups.clear()  # what was incomplete at the last look may be complete now
    e.skip_msgs.clear()
    while True:
        hit = next(_walk(q, e, pinned, after), None)
        if hit is None:
            return None
        ref, rec = hit
        gid, seq, off, flags = fields(rec)
        whole_group = opts & _ALL_MSGS and not current and flags & _MSG_IN_GROUP
        segs = flags & _SEGMENT and (opts & _COMPLETE or (not current and opts & (_ALL_MSGS | _ALL_SEGS)))
        if not (whole_group or segs):
            return [ref], [rec]
        seg_from = None if not segs else (off if opts & _COMPLETE else -1)
        members = _members(q, gid, pinned, _Enough(started, gid, seq, bool(whole_group), seg_from))
        if whole_group and not _group_complete(members, started, gid):
            e.skip_groups.add(gid)
            continue
        if segs:
            items = members.get(seq, {})
            # COMPLETE_MSG: from the candidate (Offset 0, or the next one of a current
            # message); ALL_SEGMENTS: every segment, from the first one still to leave.
            if opts & _COMPLETE:
                whole = _segments(items, off)
            else:
                entry = started.get(gid)
                whole = _whole(items, entry[2].get(seq, {}) if entry else {}) or None
            if whole is None:
                e.skip_msgs.add((gid, seq))
                continue
            if opts & _COMPLETE:
                return [it[0] for it in whole], [it[1] for it in whole]
        return [ref], [rec]


def under_cursor(rec: bytes, opts: int) -> None:
    """COMPLETE_MSG with [BROWSE_]MSG_UNDER_CURSOR: the cursor must not be on a segment past
    the first (MQRC_INVALID_MSG_UNDER_CURSOR, 2246)."""
    if opts & _COMPLETE:
        _, _, off, flags = fields(rec)
        if flags & _SEGMENT and off:
            raise MQError(
                Reason.INVALID_MSG_UNDER_CURSOR,
                f"COMPLETE_MSG needs the cursor on the first segment of a logical message; it is on offset {off}",
            )


def segments_of(q: LocalQueue, rec: bytes, pinned: dict):
    """The segments of the logical message that starts with ``rec``, in offset order, as
    ``(refs, recs)``; None when one is missing. Mutex held; raises :class:`NeedBlob`."""
    gid, seq, off, flags = fields(rec)
    if not flags & _SEGMENT:
        return None
    items = _segments(_members(q, gid, pinned).get(seq, {}), off)
    if items is None:
        return None
    return [it[0] for it in items], [it[1] for it in items]


def reassembled(recs: list[bytes]) -> bytes:
    """One record for a logical message made of ``recs`` (segments in offset order): the
    first segment's header, MsgFlags saying it is the only segment, all the data."""
    first = recs[0]
    if len(recs) == 1:
        return first
    h = record.data_offset(first)
    off = record._sections(first)[2]
    gid, seq, offset, flags = _GROUP.unpack_from(first, off)
    head = first[:off] + _GROUP.pack(gid, seq, offset, flags | _SEGMENT | _LAST_SEGMENT) + first[off + _GROUP.size : h]
    return head + b"".join(record.data_of(r) for r in recs)


# -- get ------------------------------------------------------------------------------------------


class _Wake:
    """A waiter's predicate: the records that may make something eligible. It remembers the
    record it was woken for, so that a wake it cannot use is passed on."""

    __slots__ = ("base", "last", "loose")

    def __init__(self, base: Match, loose: bool):
        self.base = base
        self.loose = loose  # completeness rules: any item of a group may complete one
        self.last = None

    def __call__(self, rec: bytes) -> bool:
        if Match.__call__(self.base, rec) or (self.loose and rec[2] & record.HAS_GROUP):
            self.last = rec
            return True
        return False


def get(h: Handle, *args) -> Message:
    """MQGET with group options, or on a handle with a current group (Handle.get routes
    here after its option checks, with get's own arguments in order)."""
    try:
        return _get(h, *args)
    finally:
        _settle(h)


def _get(
    h: Handle,
    opts: int,
    wait_interval,
    buffer_length,
    match,
    msg_id,
    correl_id,
    group_id,
    msg_seq_number,
    offset,
    msg_token,
) -> Message:

    q = h.queue
    qm = h._qm
    if not h._can_get:
        raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with an OO.INPUT_* option to get")
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
    if opts & _MARK_SKIP and opts & _COMPLETE:
        # MARK_SKIP_BACKOUT exists on z/OS only, where there are no segments: one marked get
        # cannot cover the several messages a reassembly takes.
        raise options_error("MARK_SKIP_BACKOUT cannot be combined with COMPLETE_MSG")
    selector = getattr(h, "_selector", None)  # the handle's selection string (engine/selector)
    args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token, selector)
    um = match_for_get(qm.ident, opts, *args)
    sync = h._get_prelude(opts, buffer_length, wait_interval)
    wait = opts & _WAIT
    uow = h._conn._uow
    g = _state(h)
    pos = g.get
    logical = opts & _LOGICAL
    current = bool(logical) and pos.current
    e = eligible(pos, opts, um, qm.ident, selector)
    reason = 0
    if not logical and pos.logical and pos.current:
        reason = pos.incomplete()  # LOGICAL_ORDER dropped midway (may become 2245 below)
    loose = bool(opts & (_ALL_MSGS | _ALL_SEGS | _COMPLETE))
    pinned: dict = {}
    deadline = _UNSET
    durable = False
    hidden = []
    while True:
        need = None
        with q.mutex:
            try:
                found = locate(q, e, opts, pos, pinned)
            except NeedBlob as nb:
                need, found = nb.need, None
            if need is None and found is None:
                if not wait:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no eligible message on {q.name!r}")
                if deadline is _UNSET:
                    deadline = None if wait_interval < 0 else qm.clock.now() + wait_interval / 1000.0
                if deadline is not None and qm.clock.now() >= deadline:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no eligible message on {q.name!r} in the wait")
                _wait_once(h, q, _Wake(e, loose), deadline)
                continue
            if need is None:
                refs, recs = found
                expired = next(
                    (i for i, r in enumerate(recs) if r[2] & record.HAS_EXPIRY and h._expired(q, refs[i], r)), None
                )
                if expired is not None:
                    continue  # discarded (docs/semantics.md §2.3): look again
                check_match(um, recs[0], pos, opts)
                persistent = record.is_persistent(recs[0])
                in_uow = bool(sync or (opts & _SYNC_IF_P and persistent))
                if pos.current and fields(recs[0])[0] == pos.group_id and in_uow != pos.in_uow:
                    if current:
                        raise MQError(
                            Reason.INCONSISTENT_UOW,
                            "every message of a group must be got with the same syncpoint setting "
                            f"({'SYNCPOINT' if pos.in_uow else 'NO_SYNCPOINT'} for this one)",
                        )
                    if pos.logical:
                        reason = Reason.INCONSISTENT_UOW
                rec = reassembled(recs)
                hdr = record.data_offset(rec)
                total = len(rec) - hdr
                if buffer_length is not None and total > buffer_length:
                    data = rec[hdr : hdr + buffer_length]
                    if not opts & _ACCEPT:
                        return Message.make(rec, qm.ident, data, Reason.TRUNCATED_MSG_FAILED, _now(h, rec))
                    reason = Reason.TRUNCATED_MSG_ACCEPTED
                else:
                    data = rec[hdr:]
                if in_uow:
                    for ref in refs:
                        q._hide(ref)
                    hidden = refs
                else:
                    if q.journal is not None and any(record.is_persistent(r) for r in recs):
                        q.journal.remove(q, refs)  # one write for every segment (2102: they stay)
                        durable = True
                    for ref in refs:
                        q._remove(ref, durable=False)
                q.obtained += len(refs)
                _note_taken(q, recs, finished=bool(logical))
                break
        q.load(need)  # without the lock; then look again
        pin(pinned, need)
    if q.tier.cleanup:
        q.after_get()
    for k, ref in enumerate(hidden):
        uow.add_get(q, ref, mark_skip=bool(opts & _MARK_SKIP) and k == 0)
    if durable:
        q.journal.wait()
    if qm.recorder is not None:
        for _ in recs:
            qm.recorder.get(q.name)
    pos.advance_rec(rec, in_uow)
    pos.logical = bool(logical)
    return Message.make(rec, qm.ident, data, reason, _now(h, rec))


def _now(h: Handle, rec: bytes) -> int | None:
    return int(h._wall() * 1_000_000) if rec[2] & record.HAS_EXPIRY else None


def _note_taken(q: LocalQueue, recs: list[bytes], finished: bool = False) -> None:
    """Remember that a group has started to leave (mutex held); ``finished``: a logical-order
    get took its last item."""
    gid, seq, _, flags = fields(recs[-1])
    if not flags & (_IN_GROUP | _SEGMENTS):
        return
    started = q.groups_started
    if q.depth == 0:
        started.clear()
        return
    done = (not flags & _SEGMENT or flags & _LAST_SEGMENT) and (not flags & _MSG_IN_GROUP or flags & _LAST_MSG)
    if finished and done:
        started.pop(gid, None)
        return
    entry = started.get(gid)
    if entry is None:
        entry = started[gid] = [None, set(), {}]
    for rec in recs:
        _, seq, off, flags = fields(rec)
        if flags & _LAST_MSG:
            entry[0] = seq
        if flags & _SEGMENT:
            entry[2].setdefault(seq, {})[off] = (_length(rec), flags)
        else:
            entry[1].add(seq)


def _wait_once(h: Handle, q: LocalQueue, wake: _Wake, deadline, browser: bool = False) -> None:
    """Wait (mutex held) until a record that may help arrives or ``deadline`` passes. A wake
    this get cannot use is passed on by the caller's next look (see :func:`get`). A browse
    waits as every browse does: woken by each new message, passing nothing on."""
    import threading

    from .queue import BROWSER

    clock = h._qm.clock
    w = Waiter(threading.Condition(q.mutex), wake, BROWSER if browser else 0)
    q.waiters.append(w)
    clock.wait(w.cond, deadline)
    if w in q.waiters:
        q.waiters.remove(w)
    if h._qm.closed:
        raise MQError(Reason.CONNECTION_BROKEN, "the queue manager was closed during the wait")
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} were inhibited during the wait")
    if wake.last is not None and q.waiters and not browser:
        # Another waiter may be able to use what woke this one: let the queue choose again
        # (this one has left the list; a waiter woken for nothing looks and waits again).
        rec, wake.last = wake.last, None
        q._wake_for(rec)


def after_get(h: Handle, rec: bytes, in_uow) -> None:
    """A plain get returned a record with a group section: move the handle's get position
    (the seed's get-side restart: a get by GroupId and MsgSeqNumber, then LOGICAL_ORDER)."""
    _, _, _, flags = fields(rec)
    if not flags & (_IN_GROUP | _SEGMENTS):
        return
    with h.queue.mutex:
        _note_taken(h.queue, [rec])
    g = _state(h)
    g.get.advance_rec(rec, bool(in_uow))
    g.get.logical = False
    _settle(h)


def closed(h: Handle) -> Reason:
    """MQCLOSE's warning: 2242 / 2241 when the handle leaves a logical message / group
    incomplete (put side first), else NONE."""
    g = h._grp
    h._grp = None
    if g is None:
        return Reason.NONE
    return Reason(g.put.incomplete() or g.get.incomplete())


# -- browse (docs/semantics.md §5.5) ---------------------------------------------------------------------


class BrowseState:
    """A handle's logical-order browse pass (``Handle._gbrowse``; None: a physical pass or
    none). ``pos``: the browse position in its group, separate from the get position (seed
    000). ``anchor``: (lane, seq) of the first item of the current group, or of the last
    message not in a group: the next group is searched for beyond it, so the logical order
    of groups follows the physical position of their first items."""

    __slots__ = ("anchor", "pos")

    def __init__(self) -> None:
        self.pos = Position()
        self.pos.logical = True
        self.anchor: tuple[int, int] | None = None


_BROWSE_FIRST = int(GMO.BROWSE_FIRST)
_BROWSE_NEXT = int(GMO.BROWSE_NEXT)
_CURSOR_ONLY = int(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR | GMO.LOCK | GMO.UNLOCK)
_UNDER_ANY = int(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR)
_UNDER = int(GMO.MSG_UNDER_CURSOR)
_LOCK_ANY = int(GMO.LOCK | GMO.UNLOCK)


def _beyond(q: LocalQueue, lane_i: int, seq: int):
    """The ``after`` predicate of a cursor at (lane_i, seq): strictly later in get order."""
    st = q.lanes.st

    def after(ref, rec: bytes) -> bool:
        lane = st[ref] & 0x0F if type(ref) is int else ref.lane.priority
        return lane < lane_i or (lane == lane_i and record.seq_of(rec) > seq)

    return after


def browse(h: Handle, opts: int, *args):
    """Handle.get with a cursor option, when it carries a group option or the handle has a
    logical-order browse pass (Handle.get routes here; everything else goes to
    engine/browse.py). BROWSE_FIRST / BROWSE_NEXT with LOGICAL_ORDER, COMPLETE_MSG and the
    ALL_*_AVAILABLE options; 2259 when BROWSE_NEXT and the BROWSE_FIRST of its pass disagree
    on LOGICAL_ORDER."""
    from . import browse as cursors

    wait_interval, buffer_length, match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token = args
    group_opts = opts & GROUP_GMO
    st = h._gbrowse
    if opts & _CURSOR_ONLY:
        if group_opts == _COMPLETE and opts & _UNDER_ANY and not opts & _LOCK_ANY:
            return _complete_under_cursor(h, opts, buffer_length)
        if group_opts:
            raise options_error(
                f"get options {GMO(group_opts)!r} with LOCK, UNLOCK or [BROWSE_]MSG_UNDER_CURSOR are not supported "
                "yet (COMPLETE_MSG alone is, with [BROWSE_]MSG_UNDER_CURSOR)"
            )
        return cursors.get(h, opts, *args)
    q = h.queue
    logical = opts & _LOGICAL
    cur = h._cursor
    started = cur is not None and cur.on_msg
    if opts & _BROWSE_FIRST or (opts & _BROWSE_NEXT and not started and st is None):
        # A new pass ("BROWSE_NEXT straight after MQOPEN behaves like BROWSE_FIRST"): it
        # scans as though there were no current group.
        st = h._gbrowse = BrowseState() if logical else None
    elif st is not None and not logical:
        raise MQError(
            Reason.INCONSISTENT_BROWSE,
            "this browse pass began with LOGICAL_ORDER: give it on every BROWSE_NEXT, or start again with BROWSE_FIRST",
        )
    elif st is None and logical:
        raise MQError(
            Reason.INCONSISTENT_BROWSE,
            "this browse pass began without LOGICAL_ORDER: BROWSE_NEXT cannot add it; start again with BROWSE_FIRST",
        )
    if not group_opts:
        return cursors.get(h, opts, *args)  # a physical pass without group options
    if cur is None:
        cur = h._cursor = cursors.Cursor()
    if not h._can_browse:
        raise MQError(Reason.NOT_OPEN_FOR_BROWSE, f"open {q.name!r} with OO.BROWSE to browse")
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
    qm = h._qm
    selector = getattr(h, "_selector", None)

    args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token, selector)
    um = match_for_get(qm.ident, opts, *args)
    if buffer_length is not None:
        checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
    wait = opts & _WAIT
    if wait:
        checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
    pos = st.pos if st is not None else Position()
    in_group = st is not None and pos.current
    e = eligible(pos, opts, um, qm.ident, selector)
    if st is not None:
        after = None if in_group or st.anchor is None else _beyond(q, *st.anchor)
    elif opts & _BROWSE_FIRST:
        after = None
    else:
        after = _beyond(q, cur.lane, cur.seq)
    pinned: dict = {}
    deadline = _UNSET
    while True:
        need = None
        with q.mutex:
            try:
                found = locate(q, e, opts, pos, pinned, after)
            except NeedBlob as nb:
                need, found = nb.need, None
            if need is None and found is None:
                if not wait:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no message to browse on {q.name!r} in this order")
                if deadline is _UNSET:
                    deadline = None if wait_interval < 0 else qm.clock.now() + wait_interval / 1000.0
                if deadline is not None and qm.clock.now() >= deadline:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no message to browse on {q.name!r} in the wait")
                _wait_once(h, q, _Wake(e, True), deadline, browser=True)
                continue
            if need is None:
                refs, recs = found
                check_match(um, recs[0], pos, opts)
                rec = reassembled(recs)
                hdr = record.data_offset(rec)
                reason = 0
                if buffer_length is not None and len(rec) - hdr > buffer_length:
                    data = rec[hdr : hdr + buffer_length]
                    if not opts & _ACCEPT:
                        if opts & _BROWSE_FIRST:
                            cur.reset()  # before the highest-priority message
                        return Message.make(rec, qm.ident, data, Reason.TRUNCATED_MSG_FAILED, _now(h, rec))
                    reason = Reason.TRUNCATED_MSG_ACCEPTED
                else:
                    data = rec[hdr:]
                ref = refs[0]
                lane_i = q.lanes.st[ref] & 0x0F if type(ref) is int else ref.lane.priority
                if cur.lk_seq >= 0:
                    cursors._unlock(q, cur)  # moving the cursor releases the lock (§5.4)
                cur.lane, cur.seq, cur.on_msg = lane_i, record.seq_of(recs[0]), True
                cur.hint = ref if type(ref) is int else -1
                if st is not None:
                    if not in_group:
                        st.anchor = (lane_i, record.seq_of(recs[0]))
                    pos.advance_rec(rec, False)
                return Message.make(rec, qm.ident, data, reason, _now(h, rec))
        q.load(need)
        pin(pinned, need)


def _complete_under_cursor(h: Handle, opts: int, buffer_length) -> Message:
    """[BROWSE_]MSG_UNDER_CURSOR with COMPLETE_MSG: the logical message that starts under the
    cursor, reassembled (browsed, or taken with every segment); 2246 when the cursor stands
    on a segment past the first, 2034 when there is nothing whole under it."""
    from . import browse as cursors
    from .connection import _syncpoint_limit

    q = h.queue
    qm = h._qm
    uow = h._conn._uow
    cur = h._cursor
    destructive = opts & _UNDER
    if not h._can_browse:
        raise MQError(Reason.NOT_OPEN_FOR_BROWSE, f"open {q.name!r} with OO.BROWSE to use the cursor")
    if destructive and not h._can_get:
        raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with OO.BROWSE and an OO.INPUT_* option")
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
    if buffer_length is not None:
        checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
    if opts & _MARK_SKIP:
        raise options_error("MARK_SKIP_BACKOUT cannot be combined with COMPLETE_MSG")
    sync = opts & _SYNC
    if destructive and sync and len(uow.ops) >= qm.max_uncommitted:
        raise _syncpoint_limit(qm.max_uncommitted)
    if cur is None:
        cur = h._cursor = cursors.Cursor()
    pinned: dict = {}
    in_uow = False
    durable = False
    while True:
        need = None
        with q.mutex:
            ref, rec, _lane = cursors._locate(q, cur)  # 2034 when there is none
            under_cursor(rec, opts)  # 2246
            cursors._unlock(q, cur)  # the lock goes: moved past, or taken with the message
            try:
                found = segments_of(q, rec, pinned)
            except NeedBlob as nb:
                need, found = nb.need, None
            if need is None:
                if found is None:
                    if fields(rec)[3] & _SEGMENT:
                        raise MQError(
                            Reason.NO_MSG_UNDER_CURSOR,
                            f"the logical message under the cursor on {q.name!r} is not complete (COMPLETE_MSG)",
                        )
                    refs, recs = [ref], [rec]
                else:
                    refs, recs = found
                whole = reassembled(recs)
                hdr = record.data_offset(whole)
                reason = 0
                if buffer_length is not None and len(whole) - hdr > buffer_length:
                    data = whole[hdr : hdr + buffer_length]
                    if not opts & _ACCEPT:
                        return Message.make(whole, qm.ident, data, Reason.TRUNCATED_MSG_FAILED, _now(h, whole))
                    reason = Reason.TRUNCATED_MSG_ACCEPTED
                else:
                    data = whole[hdr:]
                if destructive:
                    in_uow = bool(sync or (opts & _SYNC_IF_P and record.is_persistent(rec)))
                    if type(ref) is int:
                        p = q.lanes.prv[ref]
                        cur.hint = p if p >= _SENTINELS else -1  # still at or before the cursor
                    if in_uow:
                        for r in refs:
                            q._hide(r)
                    else:
                        if q.journal is not None and any(record.is_persistent(r) for r in recs):
                            q.journal.remove(q, refs)
                            durable = True
                        for r in refs:
                            q._remove(r, durable=False)
                    q.obtained += len(refs)
                    _note_taken(q, recs)
                break
        q.load(need)
        pin(pinned, need)
    if destructive:
        if q.tier.cleanup:
            q.after_get()
        if in_uow:
            for r in refs:
                uow.add_get(q, r)
        if durable:
            q.journal.wait()
        if qm.recorder is not None:
            for _ in recs:
                qm.recorder.get(q.name)
    return Message.make(whole, qm.ident, data, reason, _now(h, whole))
