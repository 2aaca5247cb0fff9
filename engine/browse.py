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

The cursor names messages by ``seq``, never by slot, so it survives the sweep or unsweep of
the messages around it (and of its own). A slot (``hint``) and a blob (``blob``) are kept
only to start the next walk near the cursor; each is checked before use.

**Browse never unsweeps** (docs/design.md invariant 5): a swept message is read from its blob
without the queue lock (as a get's :class:`~sweepq.engine.tiering.Need`), decoded for this
cursor only and kept in a small per-cursor cache (:data:`CACHE_BLOBS` blobs); the chain and
the tier's counters are left alone.

Locks (§5.4): at most one message per handle. In memory it carries the lane flag
``LOCKED``; in a blob, the position flag ``swept.LOCKED``. Either makes the message
invisible to every other handle's gets and browses, and a locked message is never swept
(the sweep's verification aborts with reason ``locked``). The lock is released by moving
the cursor (a BROWSE_FIRST / BROWSE_NEXT that ends OK or with a warning other than 2080, or
with 2033), by BROWSE_MSG_UNDER_CURSOR without LOCK, by UNLOCK, by closing the handle and by
this handle's removal of the message.

Every function here whose name starts with an underscore runs with the queue's mutex held,
except :func:`_read`, which reads a blob without it.
"""

from __future__ import annotations

import struct
import threading
from itertools import islice
from typing import TYPE_CHECKING

from sweepq.blobstore import BlobCorruptError, StoreError

from . import checks, record
from .constants import CC, GMO, Reason
from .errors import MQError
from .lane import _SENTINELS, AVAILABLE_BELOW, GOTTEN, LANE_MASK, LOCKED, N_LANES, REMOVED
from .matching import Match, match_for_get
from .message import Message
from .queue import BROWSER, LOCK_BROWSER, LocalQueue, Waiter
from .swept import LIVE as POS_LIVE
from .swept import LOCKED as POS_LOCKED
from .swept import SweptBlob, SweptHit
from .tiering import Need

if TYPE_CHECKING:
    from .connection import Handle

BEFORE_FIRST = N_LANES  # a cursor lane that sorts before every message
CACHE_BLOBS = 2  # decoded blobs a cursor keeps for itself

_BROWSE_FIRST = int(GMO.BROWSE_FIRST)
_BROWSE_UNDER = int(GMO.BROWSE_MSG_UNDER_CURSOR)
_UNDER = int(GMO.MSG_UNDER_CURSOR)
_LOCK = int(GMO.LOCK)
_UNLOCK = int(GMO.UNLOCK)
_WAIT = int(GMO.WAIT)
_SYNC = int(GMO.SYNCPOINT)
_SYNC_IF_PERSISTENT = int(GMO.SYNCPOINT_IF_PERSISTENT)
_ACCEPT_TRUNCATED = int(GMO.ACCEPT_TRUNCATED_MSG)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_UNSET = object()
_SEQ = struct.Struct("<Q").unpack_from  # a record's seq: _SEQ(rec, OFF_SEQ)[0], no Python frame


def _seq_of(rec: bytes) -> int:
    return _SEQ(rec, _OFF_SEQ)[0]


_OFF_SEQ = record.OFF_SEQ

Found = tuple  # (ref, rec, lane index): ref is a slot or a SweptHit


class Status:
    """The outcome of a get call that returns no message (GMO.UNLOCK).

    ``reason`` is ``Reason.NONE`` or the warning ``Reason.NO_MSG_LOCKED`` (2209: nothing was
    locked); warnings come back on the result, as on a :class:`~sweepq.engine.Message`."""

    __slots__ = ("reason",)

    def __init__(self, reason: int = 0):
        self.reason = reason

    @property
    def completion_code(self) -> CC:
        return CC.WARNING if self.reason else CC.OK

    def __repr__(self) -> str:
        return f"Status(reason={Reason(self.reason).name})"


class Cursor:
    """One handle's browse cursor and browse lock (see the module docstring).

    Position: ``lane`` and ``seq`` (``BEFORE_FIRST`` and -1 before every message);
    ``on_msg`` says whether the cursor stands on a message (a browse succeeded since the
    open or the last reset), which [BROWSE_]MSG_UNDER_CURSOR need. Lock: ``lk_seq`` (-1:
    none), its lane, and where it is (``lk_slot`` in memory, or ``lk_hit`` in a blob).
    """

    __slots__ = (
        "blob",
        "blob_k",
        "blob_pos",
        "cache",
        "hint",
        "lane",
        "lk_hit",
        "lk_lane",
        "lk_seq",
        "lk_slot",
        "on_msg",
        "seq",
    )

    def __init__(self) -> None:
        self.cache: list[tuple[SweptBlob, list[bytes]]] = []
        self.lk_seq = -1
        self.lk_lane = -1
        self.lk_slot = -1
        self.lk_hit: SweptHit | None = None
        self.reset()

    def reset(self) -> None:
        """Before the first message (MQOPEN's position, and BROWSE_FIRST's 2080)."""
        self.lane = BEFORE_FIRST
        self.seq = -1
        self.on_msg = False
        self.hint = -1
        self.blob: SweptBlob | None = None
        self.blob_k = -1  # its index in the chain when it was last seen
        self.blob_pos = -1  # the position in it of the last message found there

    def _forget_lock(self) -> None:
        self.lk_seq = self.lk_lane = self.lk_slot = -1
        self.lk_hit = None

    def remember(self, blob: SweptBlob, records: list[bytes]) -> None:
        """Keep a blob's decoded records for this cursor (bounded: CACHE_BLOBS)."""
        self.cache.append((blob, records))
        if len(self.cache) > CACHE_BLOBS:
            del self.cache[0]

    def records(self, blob: SweptBlob) -> list[bytes] | None:
        recs = blob.records()  # read (or read ahead) for gets already: no I/O
        if recs is not None:
            return recs
        for b, recs in self.cache:
            if b is blob:
                return recs
        return None


# -- the walk (mutex held) -------------------------------------------------------------------


def _scan(q: LocalQueue, i: int, after: int, m: Match | None, lk_seq: int) -> tuple[int, int]:
    """Walk one list from slot ``i``: the first slot with seq > ``after`` that this handle
    sees and ``m`` accepts, and the sentinel where the walk ended (-1 if it found one)."""
    ls = q.lanes
    recs, st, nxt = ls.recs, ls.st, ls.nxt
    passed = after < 0
    seq, off = _SEQ, _OFF_SEQ
    while i >= _SENTINELS:
        if not passed:
            if seq(recs[i], off)[0] <= after:
                i = nxt[i]
                continue
            passed = True  # the list is in seq order: every later slot is after too
        s = st[i]
        visible = s < AVAILABLE_BELOW or (s & ~LANE_MASK == LOCKED and seq(recs[i], off)[0] == lk_seq)
        if visible and (m is None or m(recs[i])):
            return i, -1
        i = nxt[i]
    return -1, i


def _first_after(records: list[bytes], after: int) -> int:
    """The first position of a blob's records (in seq order) with seq > ``after``."""
    lo, hi = 0, len(records)
    while lo < hi:
        mid = (lo + hi) // 2
        if _seq_of(records[mid]) <= after:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _in_chain(q: LocalQueue, cur: Cursor, lane, after: int, m: Match | None) -> SweptHit | Need | None:
    """The first message of the lane's chain after ``after`` that this handle sees, found in
    place (nothing is unswept); a :class:`Need` when a blob must be read first."""
    chain = lane.chain
    b, k = cur.blob, cur.blob_k
    if m is None and b is not None and k < len(chain) and chain[k] is b:
        # A browse's next step inside the blob of its last one: the next position.
        bp = cur.blob_pos
        records = cur.records(b)
        if records is not None and 0 <= bp < b.count - 1 and _SEQ(records[bp], _OFF_SEQ)[0] == after:
            bp += 1
            if b.flags.item(bp) == POS_LIVE:
                cur.blob_pos = bp
                return SweptHit(lane, b, bp, b.record(records, bp) if b.bumps else records[bp])
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
    lk = cur.lk_hit
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
            return Need(lane, blob)
        if after < blob.seq_min:
            start = 0
        else:
            bp = cur.blob_pos  # the last message found here: a browse's next step starts after it
            if blob is cur.blob and 0 <= bp < len(records) and _SEQ(records[bp], _OFF_SEQ)[0] == after:
                start = bp + 1
            else:
                start = _first_after(records, after)
        flags = blob.flags
        bumps = blob.bumps
        for pos in range(start, blob.count) if cand is None else (p for p in cand if p >= start):
            f = flags.item(pos)
            if f == POS_LIVE or (f == POS_LOCKED and pos == mine):
                rec = blob.record(records, pos) if bumps else records[pos]
                if m is None or m(rec):
                    cur.blob, cur.blob_k, cur.blob_pos = blob, k, pos
                    return SweptHit(lane, blob, pos, rec)
    return None


def _in_lane(q: LocalQueue, cur: Cursor, lane, after: int, m: Match | None) -> int | SweptHit | Need | None:
    """The first message of ``lane`` with seq > ``after`` (-1: from the start) that this
    handle sees and ``m`` accepts: front list, then the chain (in place), then rear list."""
    ls = q.lanes
    recs, st, nxt, prv = ls.recs, ls.st, ls.nxt, ls.prv
    front, rear = lane.front, lane.rear
    i = -1
    if after >= 0:
        h = cur.hint  # any live slot of this lane at or before the cursor will do
        if _SENTINELS <= h < len(recs):
            rec = recs[h]
            s = st[h]
            if rec is not None and not s & REMOVED and s & LANE_MASK == lane.priority and _seq_of(rec) <= after:
                i = nxt[h]
        if i < 0:
            last = prv[front]
            i = nxt[front] if last != front and _seq_of(recs[last]) > after else front
    else:
        i = nxt[front]
    slot, end = _scan(q, i, after, m, cur.lk_seq)
    if slot >= 0:
        return slot
    if end != front:
        return None  # the walk began in the rear list: the lane is done
    if lane.chain:
        hit = _in_chain(q, cur, lane, after, m)
        if hit is not None:
            return hit
    last = prv[rear]
    if last == rear or _seq_of(recs[last]) <= after:
        return None
    slot, _ = _scan(q, nxt[rear], after, m, cur.lk_seq)
    return slot if slot >= 0 else None


def _found(q: LocalQueue, ref) -> Found:
    if type(ref) is int:
        return ref, q.lanes.recs[ref], q.lanes.st[ref] & LANE_MASK
    return ref, ref.rec, ref.lane.priority


def _next(q: LocalQueue, cur: Cursor, after_lane: int, after_seq: int, m: Match | None) -> Found | Need | None:
    """The first message strictly after (``after_lane``, ``after_seq``) in get order that
    this handle sees and ``m`` accepts."""
    ls = q.lanes
    lanes = ls.lanes
    for p in range(min(after_lane, N_LANES - 1), -1, -1):
        lane = lanes[p]
        if not lane.mem and not lane.chain:
            continue
        ref = _in_lane(q, cur, lane, after_seq if p == after_lane else -1, m)
        if ref is not None:
            if type(ref) is int:
                return ref, ls.recs[ref], p
            return ref if type(ref) is Need else (ref, ref.rec, p)
    return None


def _at(q: LocalQueue, cur: Cursor) -> Found | Need | None:
    """The message under the cursor if this handle can still see it, else None."""
    if not cur.on_msg:
        return None
    ls = q.lanes
    h = cur.hint
    if _SENTINELS <= h < len(ls.recs):
        rec = ls.recs[h]
        if rec is not None and _seq_of(rec) == cur.seq:
            s = ls.st[h]
            if s < AVAILABLE_BELOW or (s & ~LANE_MASK == LOCKED and cur.lk_seq == cur.seq):
                return h, rec, s & LANE_MASK
            return None
    ref = _in_lane(q, cur, ls.lanes[cur.lane], cur.seq - 1, None)
    if ref is None or type(ref) is Need:
        return ref
    found = _found(q, ref)
    return found if _seq_of(found[1]) == cur.seq else None


# -- locks (mutex held) ------------------------------------------------------------------------


def _resolve_lock(q: LocalQueue, cur: Cursor) -> int | SweptHit | None:
    """Where this handle's locked message is now (a slot or a hit); a lock whose message
    left the queue meanwhile (expired, purged, its blob damaged) is forgotten."""
    if cur.lk_seq < 0:
        return None
    hit = cur.lk_hit
    if hit is not None:
        blob = hit.blob
        if blob.unswept:  # its blob came back: tiering.splice_locked kept the lock there
            slot = blob.moved.pop(hit.pos, None) if blob.moved else None
            cur.lk_hit = None
            if slot is None:
                cur._forget_lock()
                return None
            cur.lk_slot = slot
        elif blob.damaged or blob.flags.item(hit.pos) != POS_LOCKED:
            cur._forget_lock()
            return None
        else:
            return hit
    slot = cur.lk_slot
    ls = q.lanes
    rec = ls.recs[slot] if 0 <= slot < len(ls.recs) else None
    if rec is None or _seq_of(rec) != cur.lk_seq or ls.st[slot] & (LOCKED | GOTTEN) != LOCKED:
        cur._forget_lock()
        return None
    return slot


def _clear_lock_flag(q: LocalQueue, ref: int | SweptHit) -> bytes:
    if type(ref) is int:
        q.lanes.clear_flags(ref, LOCKED)
        return q.lanes.recs[ref]
    q.tier.lock_hit_locked(ref, False)
    return ref.rec


def _unlock(q: LocalQueue, cur: Cursor) -> bool:
    """Release this handle's lock; say whether there was one. The message becomes
    available where it stands, so waiters are told."""
    ref = _resolve_lock(q, cur)
    if ref is None:
        return False
    rec = _clear_lock_flag(q, ref)
    cur._forget_lock()
    if q.waiters:
        q._wake_for(rec)
    return True


def _lock(q: LocalQueue, cur: Cursor, found: Found) -> None:
    """Lock a message this handle just browsed (it is available, or already ours)."""
    ref, rec, lane_i = found
    seq = _seq_of(rec)
    if cur.lk_seq == seq:
        return
    _unlock(q, cur)
    if type(ref) is int:
        q.lanes.set_flags(ref, LOCKED)
        cur.lk_slot = ref
        cur.lk_hit = None
    else:
        q.tier.lock_hit_locked(ref, True)
        cur.lk_hit = ref
    cur.lk_seq = seq
    cur.lk_lane = lane_i


def release(q: LocalQueue, cur: Cursor | None) -> None:
    """MQCLOSE: the handle's lock goes (mutex held by the caller)."""
    if cur is not None:
        _unlock(q, cur)


def prefer_lock(q: LocalQueue, cur: Cursor, m: Match | None, ref):
    """A plain get by the handle that holds a lock (mutex held): its locked message is
    invisible to :meth:`LocalQueue._find`, but not to its own handle. If it comes first in
    get order (and ``m`` accepts it), it is the one the get takes. The flag stays: a removal
    (REMOVED) or a get under syncpoint (GOTTEN) ends the lock (§5.4 e; :func:`_resolve_lock`
    forgets it, and a backout restores the message unlocked), and a 2080 keeps it."""
    lk = _resolve_lock(q, cur)
    if lk is None:
        return ref
    rec = q.lanes.recs[lk] if type(lk) is int else lk.rec
    if m is not None and not m(rec):
        return ref
    lane_i = cur.lk_lane
    if ref is not None:
        if type(ref) is Need:
            r_lane, r_seq = ref.lane.priority, ref.blob.seq_min
        else:
            _, r_rec, r_lane = _found(q, ref)
            r_seq = _seq_of(r_rec)
        if lane_i < r_lane or (lane_i == r_lane and cur.lk_seq > r_seq):
            return ref
    return lk


# -- reading a blob (no lock) --------------------------------------------------------------------


def _read(q: LocalQueue, cur: Cursor, need: Need) -> None:
    """Read a blob a browse needs, without the queue lock, into the cursor's own cache. The
    chain does not change (no unsweep); a damaged blob leaves it as for a get (2101)."""
    tier, blob, lane = q.tier, need.blob, need.lane
    try:
        records = tier.store().read(blob.blob_id, tier.chain_name(lane), blob.check)
    except BlobCorruptError as e:
        with q.mutex:
            q.depth -= tier.quarantine_locked(lane, blob)
        tier.run_cleanup()
        raise tier.damaged(blob, e) from e
    except (StoreError, OSError) as e:
        raise MQError(
            Reason.RESOURCE_PROBLEM,
            f"queue {q.name!r}: reading blob {blob.blob_id} failed ({e}); nothing was lost, try the browse again",
        ) from e
    cur.remember(blob, records)


# -- waiting (mutex held) -------------------------------------------------------------------------


def _wait(h: Handle, q: LocalQueue, cur: Cursor, after: tuple[int, int], m, deadline, lock: int):
    """Block until a message after the cursor is visible, or ``deadline`` passes (None).
    A browse waiter is woken with every other browse waiter by each new message; a LOCK
    browse waits as a getter, and passes on a wake-up it cannot use."""
    qm = h._qm
    clock = qm.clock
    if lock:  # woken as a particular-message getter, for a message beyond its cursor
        w = Waiter(threading.Condition(q.mutex), _Beyond(q, after, m), LOCK_BROWSER)
    else:
        w = Waiter(threading.Condition(q.mutex), m, BROWSER)
    while True:
        if deadline is not None and clock.now() >= deadline:
            return None
        w.rec = None
        q.waiters.append(w)
        clock.wait(w.cond, deadline)
        if w in q.waiters:
            q.waiters.remove(w)
        if qm.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager was closed during the wait")
        if q.inhibit_get:
            raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} were inhibited during the wait")
        if h._closed:
            raise MQError(Reason.HOBJ_ERROR, f"handle for {q.name!r} was closed during the wait")
        r = _next(q, cur, after[0], after[1], m)
        if r is not None:
            return r
        if w.rec is not None:
            _pass_on(q, w.rec)


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


def _pass_on(q: LocalQueue, rec: bytes) -> None:
    """Wake one plain getter for ``rec`` (never a LOCK browse: two of those that cannot use
    a message would pass it back and forth)."""
    chosen = None
    for w in q.waiters:
        if not w.browse and w.match is not None and w.match(rec):
            chosen = w
            break
    if chosen is None:
        for w in q.waiters:
            if not w.browse and w.match is None:
                chosen = w
                break
    if chosen is not None:
        q.waiters.remove(chosen)
        chosen.rec = rec
        chosen.cond.notify()


# -- the calls -----------------------------------------------------------------------------------------


def get(
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
) -> Message | Status:
    """Handle.get with a browse, cursor or lock option (the options passed check_get)."""
    q = h.queue
    cur = h._cursor
    if cur is None:
        cur = h._cursor = Cursor()
    if opts & _UNLOCK:
        with q.mutex:
            done = _unlock(q, cur)
        return Status(0 if done else Reason.NO_MSG_LOCKED)
    if not h._can_browse:
        raise MQError(Reason.NOT_OPEN_FOR_BROWSE, f"open {q.name!r} with OO.BROWSE to browse or use the cursor")
    destructive = opts & _UNDER
    if destructive and not h._can_get:
        raise MQError(
            Reason.NOT_OPEN_FOR_INPUT,
            f"open {q.name!r} with OO.BROWSE and an OO.INPUT_* option to get under the cursor",
        )
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
    under = opts & (_UNDER | _BROWSE_UNDER)
    m = None
    # The handle's selection string (issue 9 §4, when the handle has one) browses as it gets.
    selector = getattr(h, "_selector", None)
    if not under:
        args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token, selector)
        m = match_for_get(h._qm.ident, opts, *args, always=selector is not None)
    if buffer_length is not None:
        checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
    wait = 0 if under else opts & _WAIT
    if wait:
        checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
    if destructive:
        return _get_under_cursor(h, q, cur, opts, buffer_length)
    if under:
        return _browse_under_cursor(h, q, cur, opts, buffer_length)
    return _browse(h, q, cur, opts, buffer_length, m, wait, wait_interval)


def _message(h: Handle, rec: bytes, buffer_length, opts: int) -> Message:
    """The browse result: data (truncated to ``buffer_length``) and its warning."""
    hl = rec[0] or record.data_offset(rec)  # 0: a header over 255 bytes (properties)
    reason = 0
    if buffer_length is not None and len(rec) - hl > buffer_length:
        data = rec[hl : hl + buffer_length]
        reason = Reason.TRUNCATED_MSG_ACCEPTED if opts & _ACCEPT_TRUNCATED else Reason.TRUNCATED_MSG_FAILED
    else:
        data = rec[hl:]
    now_us = int(h._wall() * 1_000_000) if rec[2] & record.HAS_EXPIRY else None
    return Message.make(rec, h._qm.ident, data, reason, now_us)


def _expired(h: Handle, q: LocalQueue, ref, rec: bytes) -> bool:
    """Discard an expired message that a browse would have returned (docs/semantics.md §2.3)."""
    deadline = record.expiry_deadline_us(rec)
    if deadline is None or deadline > int(h._qm.clock.wall() * 1e6):
        return False
    q._remove(ref)
    q.expired += 1
    return True


def _browse(h: Handle, q: LocalQueue, cur: Cursor, opts: int, buffer_length, m, wait: int, wait_interval) -> Message:
    """BROWSE_FIRST / BROWSE_NEXT, with or without LOCK and WAIT."""
    first = opts & _BROWSE_FIRST
    lock = opts & _LOCK
    after = (BEFORE_FIRST, -1) if first else (cur.lane, cur.seq)
    deadline = _UNSET
    while True:
        need = None
        with q.mutex:
            r = _next(q, cur, after[0], after[1], m)
            if r is None:
                _unlock(q, cur)  # 2033 releases the lock; with WAIT, before the wait (§5.4)
                if first:
                    cur.reset()  # BROWSE_FIRST resets the cursor even when nothing is there
                if wait:
                    if deadline is _UNSET:
                        clock = h._qm.clock
                        deadline = None if wait_interval < 0 else clock.now() + wait_interval / 1000.0
                    r = _wait(h, q, cur, after, m, deadline, lock)
                if r is None:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no message to browse on {q.name!r} beyond the cursor")
            if type(r) is Need:
                need = r
            else:
                ref, rec, lane_i = r
                if rec[2] & record.HAS_EXPIRY and _expired(h, q, ref, rec):
                    continue
                msg = _message(h, rec, buffer_length, opts)
                if msg.reason == Reason.TRUNCATED_MSG_FAILED:
                    if first:
                        cur.reset()  # before the highest-priority message; a lock stays
                    return msg
                if lock:
                    _lock(q, cur, r)
                elif cur.lk_seq >= 0:
                    _unlock(q, cur)
                cur.lane, cur.seq, cur.on_msg = lane_i, _seq_of(rec), True
                # In a blob: no slot hint (the walk then skips the front list at once).
                cur.hint = ref if type(ref) is int else -1
                return msg
        _read(q, cur, need)


def _locate(q: LocalQueue, cur: Cursor) -> Found | None:
    """The message under the cursor, reading its blob first if needed (takes the lock;
    returns with it held by the caller's ``with``). Raises 2034 when there is none."""
    while True:
        r = _at(q, cur)
        if type(r) is not Need:
            if r is None:
                raise MQError(
                    Reason.NO_MSG_UNDER_CURSOR,
                    f"no message under the cursor of this handle on {q.name!r}: browse one first "
                    "(BROWSE_FIRST / BROWSE_NEXT); it may have been removed or locked by another handle",
                )
            return r
        q.mutex.release()
        try:
            _read(q, cur, r)
        finally:
            q.mutex.acquire()


def _browse_under_cursor(h: Handle, q: LocalQueue, cur: Cursor, opts: int, buffer_length) -> Message:
    """BROWSE_MSG_UNDER_CURSOR: the cursor's message again; LOCK locks it, without LOCK the
    handle's lock is released (unless the call ends with 2080)."""
    with q.mutex:
        found = _locate(q, cur)
        ref, rec, _lane = found
        if rec[2] & record.HAS_EXPIRY and _expired(h, q, ref, rec):
            raise MQError(Reason.NO_MSG_UNDER_CURSOR, f"the message under the cursor on {q.name!r} has expired")
        msg = _message(h, rec, buffer_length, opts)
        if msg.reason != Reason.TRUNCATED_MSG_FAILED:
            if opts & _LOCK:
                _lock(q, cur, found)
            else:
                _unlock(q, cur)
        return msg


def _get_under_cursor(h: Handle, q: LocalQueue, cur: Cursor, opts: int, buffer_length) -> Message:
    """MSG_UNDER_CURSOR: take the cursor's message (in the unit of work with SYNCPOINT). The
    cursor keeps its position; the lock goes with the message."""
    qm = h._qm
    uow = h._conn._uow
    sync = opts & _SYNC
    if opts & _MARK_SKIP and uow.skip is not None:
        raise MQError(
            Reason.SECOND_MARK_NOT_ALLOWED,
            "this unit of work already has a get marked to skip backout; commit or back out first",
        )
    if (sync or opts & _SYNC_IF_PERSISTENT) and len(uow.ops) >= qm.max_uncommitted:
        raise MQError(
            Reason.SYNCPOINT_LIMIT_REACHED,
            f"the unit of work holds max_uncommitted={qm.max_uncommitted} operations; commit or back out first",
        )
    with q.mutex:
        ref, rec, _lane = _locate(q, cur)
        if rec[2] & record.HAS_EXPIRY and _expired(h, q, ref, rec):
            raise MQError(Reason.NO_MSG_UNDER_CURSOR, f"the message under the cursor on {q.name!r} has expired")
        msg = _message(h, rec, buffer_length, opts)
        if msg.reason == Reason.TRUNCATED_MSG_FAILED:
            return msg
        locked = cur.lk_seq == cur.seq
        in_uow = sync or (opts & _SYNC_IF_PERSISTENT and rec[2] & record.PERSISTENT)
        if type(ref) is int:
            p = q.lanes.prv[ref]
            cur.hint = p if p >= _SENTINELS else -1  # still at or before the cursor
        if in_uow:
            if locked:  # hidden, then restored unlocked by a backout
                _clear_lock_flag(q, ref)
                cur._forget_lock()
            q._hide(ref)
        else:
            q._remove(ref)  # a durable queue's write may fail (2102): then the lock stays
            if locked:
                cur._forget_lock()
        q.obtained += 1
    if q.tier.cleanup:
        q.after_get()
    if in_uow:
        uow.add_get(q, ref, mark_skip=bool(opts & _MARK_SKIP))
    elif rec[2] & record.PERSISTENT and q.journal is not None:
        q.journal.wait()  # as a get: the removal is on disk before the message is returned
    if qm.recorder is not None:
        qm.recorder.get(q.name)
    return msg
