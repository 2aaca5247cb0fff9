"""The group-option calls: a destructive get (LOGICAL_ORDER, COMPLETE_MSG, ALL_*_AVAILABLE),
a browse in logical order, and COMPLETE_MSG under the cursor. Each is a finder from
engine/groups/search.py run by the one get path (engine/getpath.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import browse as cursors
from .. import getpath, record
from ..constants import GMO, Reason
from ..core.found import Found
from ..core.lane import Need
from ..errors import MQError, options_error
from ..matching import Match, MatchArgs, match_for_get
from ..message import Message
from ..waiting import BROWSER
from .position import IN_GROUP, SEGMENT, SEGMENTS, BrowseState, Position, fields, settle, state
from .search import (
    Eligible,
    check_match,
    eligible,
    locate_locked,
    note_taken_locked,
    pin,
    reassembled,
    segments_of_locked,
    under_cursor,
)

if TYPE_CHECKING:
    from ..handlestate import HandleState
    from ..queue import LocalQueue

_LOGICAL = int(GMO.LOGICAL_ORDER)
_COMPLETE = int(GMO.COMPLETE_MSG)
_ALL_MSGS = int(GMO.ALL_MSGS_AVAILABLE)
_ALL_SEGS = int(GMO.ALL_SEGMENTS_AVAILABLE)
GROUP_GMO = _LOGICAL | _COMPLETE | _ALL_MSGS | _ALL_SEGS
_WAIT = int(GMO.WAIT)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_BROWSE_FIRST = int(GMO.BROWSE_FIRST)
_BROWSE_NEXT = int(GMO.BROWSE_NEXT)
_CURSOR_ONLY = int(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR | GMO.LOCK | GMO.UNLOCK)
_UNDER_ANY = int(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR)
_UNDER = int(GMO.MSG_UNDER_CURSOR)
_LOCK_ANY = int(GMO.LOCK | GMO.UNLOCK)
_TRUNCATED_FAILED = int(Reason.TRUNCATED_MSG_FAILED)


def _wake(e: Match, loose: bool):
    """A group waiter's predicate: a record its match accepts, or (completeness rules) any
    item of a group, which may complete one."""
    if not loose:
        return lambda rec: Match.__call__(e, rec)
    return lambda rec: Match.__call__(e, rec) or bool(rec[record.OFF_FLAGS] & record.HAS_GROUP)


def _pinning(q: LocalQueue, pinned: dict):
    """The get path's ``load`` for group searches: read into the tier's cache, then keep the
    records for the rest of the call (:func:`~sweepq.engine.groups.search.pin`)."""

    def load(need: Need) -> None:
        q.load(need)
        pin(pinned, need)

    return load


# -- get ------------------------------------------------------------------------------------------


def get(s: HandleState, opts: int, wait_interval, buffer_length, match_args: MatchArgs) -> Message:
    """MQGET with group options, or on a handle with a current group (Handle.get routes
    here after its option checks)."""
    try:
        return _get(s, opts, wait_interval, buffer_length, match_args)
    finally:
        settle(s)


def _get(s: HandleState, opts: int, wait_interval, buffer_length, match_args: MatchArgs) -> Message:
    getpath.check_call(s, opts, buffer_length, wait_interval)
    if opts & _MARK_SKIP and opts & _COMPLETE:
        # MARK_SKIP_BACKOUT exists on z/OS only, where there are no segments: one marked get
        # cannot cover the several messages a reassembly takes.
        raise options_error("MARK_SKIP_BACKOUT cannot be combined with COMPLETE_MSG")
    q = s.queue
    um = match_for_get(s.qm.ident, opts, *match_args, s.selector)
    pos = state(s).get
    logical = opts & _LOGICAL
    e = eligible(pos, opts, um, s.qm.ident, s.selector)
    reason = pos.incomplete() if not logical and pos.logical and pos.current else 0
    pinned: dict = {}
    wait = None
    if opts & _WAIT:
        wait = getpath.Wait(s, wait_interval, _wake(e, bool(opts & (_ALL_MSGS | _ALL_SEGS | _COMPLETE))), passes=True)
    with q.mutex:
        find = lambda: locate_locked(q, e, opts, pos, pinned)  # noqa: E731
        cur = s.cursor
        if cur is not None and cur.lk_seq >= 0 and not opts & (_LOGICAL | _ALL_MSGS | _ALL_SEGS | _COMPLETE):
            find = _own_lock_first(q, cur, e, find)
        found = getpath.obtain_locked(q, find, wait, " that these group options allow", _pinning(q, pinned))
        refs, recs = found.refs, found.recs
        check_match(um, recs[0], pos, opts)
        joins = getpath.in_uow(opts, recs[0])
        reason = _uow_rule(pos, recs[0], joins, bool(logical)) or reason
        rec = reassembled(recs)
        msg = getpath.deliver(s, rec, buffer_length, opts, refs[0])
        if msg.reason == _TRUNCATED_FAILED:
            return msg
        durable = getpath.take_locked(q, refs, recs, joins)
        note_taken_locked(q, recs, finished=bool(logical))
    pending = getpath.finish(s, q, refs, joins, durable, bool(opts & _MARK_SKIP))
    pos.advance_rec(rec, joins)
    pos.logical = bool(logical)
    msg.reason = msg.reason or reason or pending
    return msg


def _own_lock_first(q, cur, e: Eligible, find):
    """The finder of a get without group options by a handle that is in a group and holds a
    browse lock: its locked message, invisible to the walk, is the one taken when it comes
    first in get order, as on the plain get path (browse.prefer_lock_locked)."""

    def first():
        hit = find()
        ref = hit.refs[0] if type(hit) is Found else hit
        lk = cursors.prefer_lock_locked(q, cur, e, ref)
        if lk is ref:
            return hit
        return Found([lk], [q.record_locked(lk)])

    return first


def _uow_rule(pos: Position, rec: bytes, joins: bool, logical: bool) -> int:
    """Every item of a group is got with the same syncpoint setting: 2245 (FAILED with
    LOGICAL_ORDER and a current group, a WARNING after a call that used it), else 0."""
    if not (pos.current and fields(rec)[0] == pos.group_id and joins != pos.in_uow):
        return 0
    if logical:
        raise MQError(
            Reason.INCONSISTENT_UOW,
            "every message of a group must be got with the same syncpoint setting "
            f"({'SYNCPOINT' if pos.in_uow else 'NO_SYNCPOINT'} for this one)",
        )
    return Reason.INCONSISTENT_UOW if pos.logical else 0


def after_get(s: HandleState, rec: bytes, joins) -> None:
    """A plain get returned a record with a group section: move the handle's get position
    (the seed's get-side restart: a get by GroupId and MsgSeqNumber, then LOGICAL_ORDER)."""
    if not fields(rec)[3] & (IN_GROUP | SEGMENTS):
        return
    with s.queue.mutex:
        note_taken_locked(s.queue, [rec])
    pos = state(s).get
    pos.advance_rec(rec, bool(joins))
    pos.logical = False
    settle(s)


# -- browse (docs/semantics.md §5.5) -------------------------------------------------------------------


def browse(s: HandleState, opts: int, wait_interval, buffer_length, match_args: MatchArgs):
    """Handle.get with a cursor option, when it carries a group option or the handle has a
    logical-order browse pass (Handle.get routes here; everything else goes to
    engine/browse.py). BROWSE_FIRST / BROWSE_NEXT with LOGICAL_ORDER, COMPLETE_MSG and the
    ALL_*_AVAILABLE options; 2259 when BROWSE_NEXT and the BROWSE_FIRST of its pass disagree
    on LOGICAL_ORDER."""
    group_opts = opts & GROUP_GMO
    if opts & _CURSOR_ONLY:
        if group_opts == _COMPLETE and opts & _UNDER_ANY and not opts & _LOCK_ANY:
            return _complete_under_cursor(s, opts, buffer_length)
        if group_opts:
            raise options_error(
                f"get options {GMO(group_opts)!r} with LOCK, UNLOCK or [BROWSE_]MSG_UNDER_CURSOR are not supported "
                "(COMPLETE_MSG alone is, with [BROWSE_]MSG_UNDER_CURSOR)"
            )
        return cursors.call(s, opts, wait_interval, buffer_length, match_args)
    st = _pass(s, opts)
    if not group_opts:
        return cursors.call(s, opts, wait_interval, buffer_length, match_args)  # a physical pass
    getpath.check_call(s, opts, buffer_length, wait_interval, browse=True)
    q = s.queue
    cur = cursors.cursor_of(s)
    um = match_for_get(s.qm.ident, opts, *match_args, s.selector)
    pos = st.pos if st is not None else Position()
    in_group = st is not None and pos.current
    e = eligible(pos, opts, um, s.qm.ident, s.selector)
    if st is not None:
        after = None if in_group or st.anchor is None else _beyond(q, *st.anchor)
    else:
        after = None if opts & _BROWSE_FIRST else _beyond(q, cur.lane, cur.seq)
    pinned: dict = {}
    wait = getpath.Wait(s, wait_interval, _wake(e, True), BROWSER) if opts & _WAIT else None
    with q.mutex:
        find = lambda: locate_locked(q, e, opts, pos, pinned, after)  # noqa: E731
        found = getpath.obtain_locked(q, find, wait, " in this order", _pinning(q, pinned))
        check_match(um, found.recs[0], pos, opts)
        rec = reassembled(found.recs)
        msg = getpath.deliver(s, rec, buffer_length, opts, found.refs[0])
        if msg.reason == _TRUNCATED_FAILED:
            if opts & _BROWSE_FIRST:
                cur.reset()  # before the highest-priority message
            return msg
        cursors.move_locked(q, cur, found.refs[0], 0)  # moving the cursor releases a lock (§5.4)
        if st is not None:
            if not in_group:
                st.anchor = (cur.lane, cur.seq)
            pos.advance_rec(rec, False)
    return msg


def _pass(s: HandleState, opts: int) -> BrowseState | None:
    """The handle's browse pass after this call's BROWSE_FIRST / BROWSE_NEXT: a new one
    ("BROWSE_NEXT straight after MQOPEN behaves like BROWSE_FIRST", scanning as though there
    were no current group), or the current one. :raises MQError: INCONSISTENT_BROWSE (2259)."""
    logical = opts & _LOGICAL
    st = s.gbrowse
    started = s.cursor is not None and s.cursor.on_msg
    if opts & _BROWSE_FIRST or (opts & _BROWSE_NEXT and not started and st is None):
        st = s.gbrowse = BrowseState() if logical else None
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
    return st


def _beyond(q: LocalQueue, lane_i: int, seq: int):
    """The ``after`` predicate of a cursor at (lane_i, seq): strictly later in get order."""
    lane_of = q.lanes.lane_of

    def after(ref, rec: bytes) -> bool:
        lane = lane_of(ref).priority
        return lane < lane_i or (lane == lane_i and record.seq_of(rec) > seq)

    return after


def _complete_under_cursor(s: HandleState, opts: int, buffer_length) -> Message:
    """[BROWSE_]MSG_UNDER_CURSOR with COMPLETE_MSG: the logical message that starts under the
    cursor, reassembled (browsed, or taken with every segment); 2246 when the cursor stands
    on a segment past the first, 2034 when there is nothing whole under it."""
    q = s.queue
    destructive = opts & _UNDER
    getpath.check_call(s, opts, buffer_length, -1, browse=True)
    if destructive and not s.can_get:
        raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with OO.BROWSE and an OO.INPUT_* option")
    if opts & _MARK_SKIP:
        raise options_error("MARK_SKIP_BACKOUT cannot be combined with COMPLETE_MSG")
    cur = cursors.cursor_of(s)
    pinned: dict = {}
    joins = durable = False
    with q.mutex:
        found = _whole_under_cursor_locked(s, q, cur, opts, pinned)
        refs, recs = found.refs, found.recs
        msg = getpath.deliver(s, reassembled(recs), buffer_length, opts, refs[0])
        if msg.reason == _TRUNCATED_FAILED:
            return msg
        if destructive:
            joins = getpath.in_uow(opts, recs[0])
            cursors.keep_position_locked(q, cur, refs[0])
            durable = getpath.take_locked(q, refs, recs, joins)
            note_taken_locked(q, recs)
    if destructive:
        msg.reason = msg.reason or getpath.finish(s, q, refs, joins, durable)
    return msg


def _whole_under_cursor_locked(s: HandleState, q: LocalQueue, cur, opts: int, pinned: dict) -> Found:
    """The logical message that starts under the cursor, every segment of it (lock held).

    :raises MQError: NO_MSG_UNDER_CURSOR (2034), INVALID_MSG_UNDER_CURSOR (2246)."""

    def find():
        ref = cursors.at_locked(q, cur)
        if ref is None or type(ref) is Need:
            return ref
        rec = q.record_locked(ref)
        under_cursor(rec, opts)  # 2246
        cursors.unlock_locked(q, cur)  # the lock goes: moved past, or taken with the message
        segs = segments_of_locked(q, rec, pinned)
        if segs is None:
            if fields(rec)[3] & SEGMENT:
                raise MQError(
                    Reason.NO_MSG_UNDER_CURSOR,
                    f"the logical message under the cursor on {q.name!r} is not complete (COMPLETE_MSG)",
                )
            return Found([ref], [rec])
        return segs

    try:
        return getpath.obtain_locked(q, find, None, "", _pinning(q, pinned))
    except MQError as e:
        if e.reason != Reason.NO_MSG_AVAILABLE:
            raise
        raise cursors.nothing_under_cursor(q) from None


getpath.ABOVE.group_moved = after_get  # the get path calls it without importing this module
