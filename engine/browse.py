"""Browse cursors and browse locks (seed 001; docs/semantics.md §3, §5.2-§5.4).

One :class:`Cursor` per handle, made at the handle's first browse. The cursor is a
*position* in get order, ``(lane, seq)``: lanes from 9 down to 0, and inside a lane the
message instance number ``seq`` (arrival order, which is the lane's order: front ⧺ chain ⧺
rear, docs/design.md "One queue"). BROWSE_NEXT returns the first message visible to this handle
strictly after that position; BROWSE_FIRST starts before every message. This one rule
gives seed 001's cursor behaviour:

* FIFO: later arrivals sort after the cursor and are seen;
* priority: an arrival of higher priority sorts *before* the cursor and is seen only after
  BROWSE_FIRST; one of equal or lower priority is seen;
* an uncommitted (or gotten, or locked-by-another) message the cursor steps over is behind
  it for good, even once it becomes visible; at the end (2033) the cursor stays where it is.

The cursor names messages by ``seq``, never by where they are, so it survives the sweep or
unsweep of the messages around it (and of its own). A ref (``hint``) and a blob (``blob``) are
kept only to start the next walk near the cursor; the core checks each before use.

**Browse never unsweeps** (docs/design.md invariant 5): a swept message is read from its blob
without the queue lock (as a get's :class:`~sweepq.engine.tiering.Need`), decoded for this
cursor only and kept in a small per-cursor cache (:data:`~sweepq.engine.cursor.CACHE_BLOBS` blobs); the chain and
the tier's counters are left alone.

Locks (§5.4): at most one message per handle, held by a ref (the core keeps it naming the
message when its blob comes back) and flagged by the core (engine/core/lanes.py
:meth:`~sweepq.engine.core.lanes.LaneSet.mark`), in memory or in its blob. It makes the message
invisible to every other handle's gets and browses, and a locked message is never swept
(the sweep's verification aborts with reason ``locked``). The lock is released by moving
the cursor (a BROWSE_FIRST / BROWSE_NEXT that ends OK or with a warning other than 2080, or
with 2033), by BROWSE_MSG_UNDER_CURSOR without LOCK, by UNLOCK, by closing the handle and by
this handle's removal of the message.

A function here whose name ends in ``_locked`` runs with the queue's lock held (engine/queue.py,
the lock rule); the calls (:func:`call`) take it around each step.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from . import getpath, record
from .constants import GMO, Reason
from .core.flags import LOCKED, N_LANES
from .core.lane import Need
from .core.ref import Ref
from .core.swept import LIVE as POS_LIVE
from .core.swept import LOCKED as POS_LOCKED
from .cursor import BEFORE_FIRST, Cursor, Status
from .errors import MQError
from .matching import Match, MatchArgs, match_for_get
from .message import Message
from .queue import LocalQueue
from .waiting import BROWSER, LOCK_BROWSER

if TYPE_CHECKING:
    from .handlestate import HandleState

_BROWSE_FIRST = int(GMO.BROWSE_FIRST)
_BROWSE_UNDER = int(GMO.BROWSE_MSG_UNDER_CURSOR)
_UNDER = int(GMO.MSG_UNDER_CURSOR)
_LOCK = int(GMO.LOCK)
_UNLOCK = int(GMO.UNLOCK)
_WAIT = int(GMO.WAIT)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_TRUNCATED_FAILED = int(Reason.TRUNCATED_MSG_FAILED)
_seq_of = record.seq_of

Found = tuple  # (ref, rec, lane index)


# -- the walk (lock held) -------------------------------------------------------------------


def in_chain_locked(q: LocalQueue, cur: Cursor, lane, after: int, m: Match | None) -> Ref | Need | None:
    """The first message of the lane's chain after ``after`` that this handle sees, found in
    place (nothing is unswept); a :class:`Need` when a blob must be read first."""
    chain = lane.chain
    b, k = cur.blob, cur.blob_k
    if m is None and b is not None and k < len(chain) and chain[k] is b:
        # A browse's next step inside the blob of its last one: the next position.
        bp = cur.blob_pos
        records = cur.records(b)
        if records is not None and 0 <= bp < b.count - 1 and _seq_of(records[bp]) == after:
            bp += 1
            if b.flag(bp) == POS_LIVE:
                cur.blob_pos = bp
                return Ref(-1, lane, b, bp, b.record(records, bp) if b.bumps else records[bp])
    k0 = 0
    if after >= 0:
        if b is not None and k < len(chain) and chain[k] is b and b.seq_min <= after + 1:
            k0 = k  # every blob before it ends before the cursor
        else:
            k0 = len(chain)
            for k, blob in enumerate(chain):
                if blob.seq_max > after:
                    k0 = k
                    break
    p = cur.passed
    if p is not None and p[0] is lane and p[1] == after and p[2] is m:
        # The same walk again after a blob was read: resume at that blob. Going back over
        # the blobs it passed would need them decoded again, and with more of them than
        # the cursor's cache holds, reading one evicted another for ever (a selector that
        # matched nothing in three blobs hung the browse).
        k0 = max(k0, next((k for k, blob in enumerate(chain) if blob is p[3]), k0))
    lk = cur.lk_ref if cur.lk_ref is not None and cur.lk_ref.swept else None
    for k, blob in enumerate(islice(chain, k0, None), k0):
        if blob.seq_max <= after or not blob.live:
            continue
        mine = lk.pos if lk is not None and lk.blob is blob else -1
        cand = None
        if m is not None:
            cand = blob.candidates(m.msg_id, m.correl_id, m.group_id, m.seq)
            cand = cand.tolist() if len(cand) else []
            if mine >= 0 and mine not in cand:
                cand = sorted([*cand, mine])
            if not cand:
                continue
        records = cur.records(blob)
        if records is None:
            cur.passed = (lane, after, m, blob)
            return Need(lane, blob)
        if after < blob.seq_min:
            start = 0
        else:
            bp = cur.blob_pos  # the last message found here: a browse's next step starts after it
            if blob is cur.blob and 0 <= bp < len(records) and _seq_of(records[bp]) == after:
                start = bp + 1
            else:
                start = blob.first_after(records, after)
        bumps = blob.bumps
        for pos in range(start, blob.count) if cand is None else (p for p in cand if p >= start):
            f = blob.flag(pos)
            if f == POS_LIVE or (f == POS_LOCKED and pos == mine):
                rec = blob.record(records, pos) if bumps else records[pos]
                if m is None or m(rec):
                    cur.blob, cur.blob_k, cur.blob_pos = blob, k, pos
                    return Ref(-1, lane, blob, pos, rec)
    return None


def in_lane_locked(q: LocalQueue, cur: Cursor, lane, after: int, m: Match | None) -> Ref | Need | None:
    """The first message of ``lane`` with seq > ``after`` (-1: from the start) that this
    handle sees and ``m`` accepts: front list, then the chain (in place), then rear list."""
    return q.lanes.browse(lane, after, m, cur.lk_seq, cur.hint, lambda: in_chain_locked(q, cur, lane, after, m))


def found_locked(q: LocalQueue, ref: Ref) -> Found:
    """(ref, record, lane index) of a message a finder returned."""
    return ref, q.record_locked(ref), q.lanes.lane_of(ref).priority


def next_locked(q: LocalQueue, cur: Cursor, after_lane: int, after_seq: int, m: Match | None):
    """The first message strictly after (``after_lane``, ``after_seq``) in get order that
    this handle sees and ``m`` accepts: a slot, a hit in a blob, a :class:`Need`, or None."""
    lanes = q.lanes.lanes
    for p in range(min(after_lane, N_LANES - 1), -1, -1):
        lane = lanes[p]
        if not lane.mem and not lane.chain:
            continue
        ref = in_lane_locked(q, cur, lane, after_seq if p == after_lane else -1, m)
        if ref is not None:
            return ref
    return None


def at_locked(q: LocalQueue, cur: Cursor):
    """The message under the cursor if this handle can still see it (a slot, a hit in a
    blob), a :class:`Need` to read its blob first, or None."""
    if not cur.on_msg:
        return None
    ls = q.lanes
    here, visible = ls.at(cur.hint, cur.seq, cur.lk_seq)
    if here is not None:
        return here if visible else None
    ref = in_lane_locked(q, cur, ls.lanes[cur.lane], cur.seq - 1, None)
    if ref is None or isinstance(ref, Need):
        return ref
    return ref if _seq_of(found_locked(q, ref)[1]) == cur.seq else None


# -- locks (mutex held) ------------------------------------------------------------------------


def resolve_lock_locked(q: LocalQueue, cur: Cursor) -> Ref | None:
    """The message this handle's lock holds; a lock whose message left the queue meanwhile
    (expired, purged, got under syncpoint, its blob damaged) is forgotten."""
    ref = cur.lk_ref
    if ref is None:
        return None
    if not q.lanes.lock_is(ref, cur.lk_seq):
        cur.forget_lock()
        return None
    return ref


def clear_lock_flag_locked(q: LocalQueue, ref: Ref) -> bytes:
    return q.lanes.unmark(ref, LOCKED)


def unlock_locked(q: LocalQueue, cur: Cursor) -> bool:
    """Release this handle's lock; say whether there was one. The message becomes
    available where it stands, so waiters are told."""
    ref = resolve_lock_locked(q, cur)
    if ref is None:
        return False
    rec = clear_lock_flag_locked(q, ref)
    cur.forget_lock()
    if q.waiters.waiting:
        q.waiters.wake_for_locked(rec)
    return True


def lock_locked(q: LocalQueue, cur: Cursor, ref) -> None:
    """Lock a message this handle just browsed (it is available, or already ours)."""
    ref, rec, lane_i = found_locked(q, ref)
    seq = _seq_of(rec)
    if cur.lk_seq == seq:
        return
    unlock_locked(q, cur)
    q.lanes.mark(ref, LOCKED)
    cur.lk_ref = ref
    cur.lk_seq = seq
    cur.lk_lane = lane_i


def release_locked(q: LocalQueue, cur: Cursor | None) -> None:
    """MQCLOSE: the handle's lock goes (mutex held by the caller)."""
    if cur is not None:
        unlock_locked(q, cur)


def prefer_lock_locked(q: LocalQueue, cur: Cursor, m: Match | None, ref):
    """A plain get by the handle that holds a lock (mutex held): its locked message is
    invisible to :meth:`LocalQueue.find_locked`, but not to its own handle. If it comes first in
    get order (and ``m`` accepts it), it is the one the get takes. The flag stays: a removal
    (REMOVED) or a get under syncpoint (GOTTEN) ends the lock (§5.4 e; :func:`resolve_lock_locked`
    forgets it, and a backout restores the message unlocked), and a 2080 keeps it."""
    lk = resolve_lock_locked(q, cur)
    if lk is None:
        return ref
    rec = q.record_locked(lk)
    if m is not None and not m(rec):
        return ref
    lane_i = cur.lk_lane
    if ref is not None:
        if type(ref) is Need:
            r_lane, r_seq = ref.lane.priority, ref.blob.seq_min
        else:
            _, r_rec, r_lane = found_locked(q, ref)
            r_seq = _seq_of(r_rec)
        if lane_i < r_lane or (lane_i == r_lane and cur.lk_seq > r_seq):
            return ref
    return lk


# -- the calls (through the get path, engine/getpath.py) -----------------------------------------------


def call(s: HandleState, opts: int, wait_interval, buffer_length, match_args: MatchArgs) -> Message | Status:
    """Handle.get with a browse, cursor or lock option and no group option (the options
    passed check_get): UNLOCK, BROWSE_FIRST / BROWSE_NEXT (with LOCK, WAIT),
    BROWSE_MSG_UNDER_CURSOR, MSG_UNDER_CURSOR."""
    if s.closed:
        raise s.closed_error()
    q = s.queue
    cur = cursor_of(s)
    cur.passed = None  # each call walks anew
    if opts & _UNLOCK:
        # MQ reads no descriptor with UNLOCK, but it checks the GMO's fields: wrong match
        # arguments are refused here as on every other get, not passed over.
        match_for_get(s.qm.ident, opts, *match_args)
        with q.mutex:
            done = unlock_locked(q, cur)
        return Status(0 if done else Reason.NO_MSG_LOCKED)
    getpath.check_call(s, opts, buffer_length, wait_interval, browse=True)
    if opts & _UNDER:
        if not s.can_get:
            raise MQError(
                Reason.NOT_OPEN_FOR_INPUT,
                f"open {q.name!r} with OO.BROWSE and an OO.INPUT_* option to get under the cursor",
            )
        return _get_under_cursor(s, q, cur, opts, buffer_length)
    if opts & _BROWSE_UNDER:
        return _browse_under_cursor(s, q, cur, opts, buffer_length)
    m = match_for_get(s.qm.ident, opts, *match_args, s.selector, always=s.selector is not None)
    return _browse(s, q, cur, opts, buffer_length, m, wait_interval)


def cursor_of(s: HandleState) -> Cursor:
    """The handle's cursor, made at its first browse."""
    if s.cursor is None:
        s.cursor = Cursor()
    return s.cursor


def reader(q: LocalQueue, cur: Cursor):
    """The get path's ``load`` for a browse: the blob's records go to the cursor's own cache
    (browse never unsweeps, docs/design.md invariant 5)."""
    return lambda need: q.load(need, keep=cur.remember)


def move_locked(q: LocalQueue, cur: Cursor, ref, lock: int) -> None:
    """The cursor moves onto the message ``ref`` just browsed; LOCK locks it, otherwise a
    lock the handle held is released (moving the cursor ends it, §5.4)."""
    ref, rec, lane_i = found_locked(q, ref)
    if lock:
        lock_locked(q, cur, ref)
    elif cur.lk_seq >= 0:
        unlock_locked(q, cur)
    cur.lane, cur.seq, cur.on_msg = lane_i, _seq_of(rec), True
    cur.hint = None if ref.swept else ref


def _browse(s: HandleState, q: LocalQueue, cur: Cursor, opts: int, buffer_length, m, wait_interval) -> Message:
    """BROWSE_FIRST / BROWSE_NEXT, with or without LOCK and WAIT."""
    first = opts & _BROWSE_FIRST
    lock = opts & _LOCK
    after = (BEFORE_FIRST, -1) if first else (cur.lane, cur.seq)

    def find():
        r = next_locked(q, cur, after[0], after[1], m)
        if r is None:
            unlock_locked(q, cur)  # 2033 releases the lock; with WAIT, before the wait (§5.4)
            if first:
                cur.reset()  # BROWSE_FIRST resets the cursor even when nothing is there
        return r

    wait = None
    if opts & _WAIT:
        if lock:  # woken as a getter, for a message beyond its cursor; passes on what it cannot use
            wait = getpath.Wait(s, wait_interval, _Beyond(q, after, m), LOCK_BROWSER, passes=True)
        else:
            wait = getpath.Wait(s, wait_interval, m, BROWSER)
    with q.mutex:
        ref = getpath.obtain_locked(q, find, wait, " beyond the cursor", reader(q, cur))
        msg = getpath.deliver(s, q.record_locked(ref), buffer_length, opts, ref)
        if msg.reason == _TRUNCATED_FAILED:
            if first:
                cur.reset()  # before the highest-priority message; a lock stays
        else:
            move_locked(q, cur, ref, lock)
    return msg


class _Beyond:
    """The wake-up test of a LOCK browse waiter: a message it could browse, that is one
    beyond its cursor that its match accepts. (The lane is where a put puts the message:
    a message a backout brings back after a change of delivery sequence may be misjudged;
    the next arrival wakes the waiter then.)"""

    __slots__ = ("after", "m", "q")

    def __init__(self, q: LocalQueue, after: tuple[int, int], m: Match | None):
        self.q = q
        self.after = after
        self.m = m

    def __call__(self, rec: bytes) -> bool:
        lane = self.q.default_priority if self.q.fifo else rec[record.OFF_PRIORITY]
        a_lane, a_seq = self.after
        if lane > a_lane or (lane == a_lane and _seq_of(rec) <= a_seq):
            return False
        return self.m is None or self.m(rec)


def under_cursor_locked(s: HandleState, q: LocalQueue, cur: Cursor):
    """The message under the cursor (lock held; its blob read if needed).

    :raises MQError: NO_MSG_UNDER_CURSOR (2034) when there is none: no browse yet, or it was
        removed, expired or locked by another handle since."""
    try:
        return getpath.obtain_locked(q, lambda: at_locked(q, cur), None, "", reader(q, cur))
    except MQError as e:
        if e.reason != Reason.NO_MSG_AVAILABLE:
            raise
        raise nothing_under_cursor(q) from None


def nothing_under_cursor(q: LocalQueue) -> MQError:
    """MQRC_NO_MSG_UNDER_CURSOR (2034), saying why there may be none."""
    return MQError(
        Reason.NO_MSG_UNDER_CURSOR,
        f"no message under the cursor of this handle on {q.name!r}: browse one first "
        "(BROWSE_FIRST / BROWSE_NEXT); it may have been removed, expired or locked by another handle",
    )


def _browse_under_cursor(s: HandleState, q: LocalQueue, cur: Cursor, opts: int, buffer_length) -> Message:
    """BROWSE_MSG_UNDER_CURSOR: the cursor's message again; LOCK locks it, without LOCK the
    handle's lock is released (unless the call ends with 2080)."""
    with q.mutex:
        ref = under_cursor_locked(s, q, cur)
        msg = getpath.deliver(s, q.record_locked(ref), buffer_length, opts, ref)
        if msg.reason != _TRUNCATED_FAILED:
            if opts & _LOCK:
                lock_locked(q, cur, ref)
            else:
                unlock_locked(q, cur)
    return msg


def _get_under_cursor(s: HandleState, q: LocalQueue, cur: Cursor, opts: int, buffer_length) -> Message:
    """MSG_UNDER_CURSOR: take the cursor's message (in the unit of work with SYNCPOINT). The
    cursor keeps its position; the lock goes with the message."""
    with q.mutex:
        ref = under_cursor_locked(s, q, cur)
        rec = q.record_locked(ref)
        msg = getpath.deliver(s, rec, buffer_length, opts, ref)
        if msg.reason == _TRUNCATED_FAILED:
            return msg
        joins = getpath.in_uow(opts, rec)
        keep_position_locked(q, cur, ref)
        locked = cur.lk_seq == cur.seq
        if joins and locked:  # hidden, then restored unlocked by a backout
            clear_lock_flag_locked(q, ref)
            cur.forget_lock()
        durable = getpath.take_one_locked(q, ref, rec, joins)  # 2102: the lock stays
        if locked:
            cur.forget_lock()
    msg.reason = msg.reason or getpath.finish(s, q, (ref,), joins, durable, bool(opts & _MARK_SKIP))
    return msg


def keep_position_locked(q: LocalQueue, cur: Cursor, ref) -> None:
    """The message under the cursor is about to leave: the cursor keeps its position (its
    lane and seq), and its slot hint moves to the slot before, still at or before it."""
    if not ref.swept:
        cur.hint = q.lanes.before(ref)


getpath.ABOVE.prefer_lock_locked = prefer_lock_locked  # the get path calls it without importing this module
