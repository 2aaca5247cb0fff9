"""The one get path: how every call that takes or looks at a message finds it, waits for
it, delivers it and takes it (docs/design.md, "The get path").

The calls: :meth:`Handle.get` (plain, by match, with a selector), :meth:`Handle.get_many`,
the browse calls of engine/browse.py (BROWSE_FIRST / BROWSE_NEXT with and without LOCK,
[BROWSE_]MSG_UNDER_CURSOR), the group and segment calls of engine/groups/, and a
channel's batch (:meth:`Handle.assign_batch`). Each brings a *finder* (which message) and
what to do with it; everything else is here, once:

``check``    :func:`check_call`: what every call checks before it looks (the handle may
             get, or browse; gets are not inhibited; the buffer length and the wait
             interval are valid; the unit of work can take one more get: 2062, 2024).
``obtain``   :func:`obtain_locked`, queue lock held: call the finder. A
             :class:`~sweepq.engine.core.lane.Need` (a blob must be read first) is read here
             without the lock, then the finder looks again; nothing found waits
             (:class:`Wait`, MQ's waiter rules live in engine/waiting.py) or
             raises 2033; an expired message is discarded here, the one place expiry is
             enforced (docs/semantics.md §2.3).
``deliver``  :func:`deliver`: the data the caller's buffer holds and the truncation
             warning 2079, or failure 2080 (then nothing is taken and no cursor moves).
``take``     :func:`take_locked` (lock held), then :func:`finish` (no lock): a destructive
             call hides the messages in the unit of work or removes them (the journal's
             one write first, then index, lane and counters: ``LocalQueue.remove_locked``);
             then, without the lock, the store cleanups, the unit of work's record, the
             sync of ``sync="commit"`` and the trace recorder.

A finder is any callable run with the queue lock held that returns a message (a
:class:`~sweepq.engine.core.ref.Ref`, in memory or inside a swept blob), several messages at
once (:class:`~sweepq.engine.core.found.Found`: a logical message's segments, a batch's run),
a :class:`~sweepq.engine.core.lane.Need`, or None. The lock is released only inside
:func:`obtain_locked` (reading a blob, waiting): a caller that holds it when that returns
holds it on the same queue state the finder saw.

Failed syncs (``sync="commit"``, docs/durability.md): a change is written to the store's
log under the lock and synced after it. When the sync fails the change is made all the
same; the call returns its result with the WARNING reason OUTCOME_PENDING (2124) instead of
raising, so that nobody puts twice or loses a got message: the next sync (any later call,
the sweeper's interval, or close) hardens it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cython import compiled as COMPILED

from . import checks, poison, record
from .batch import Batch
from .constants import GMO, Reason
from .core.found import Found
from .core.lane import Need
from .core.lock import CHECKS
from .core.ref import Ref
from .errors import MQError
from .message import Message, Messages, messages, messages_of, messages_taken
from .waiting import GETTER

if TYPE_CHECKING:
    from collections.abc import Callable

    from .cursor import Cursor
    from .handlestate import HandleState
    from .matching import Match
    from .queue import LocalQueue
    from .waiting import Waiter

_SYNC = int(GMO.SYNCPOINT)
_SYNC_IF_PERSISTENT = int(GMO.SYNCPOINT_IF_PERSISTENT)
SYNC_ANY = _SYNC | _SYNC_IF_PERSISTENT
_WAIT = int(GMO.WAIT)
_ACCEPT_TRUNCATED = int(GMO.ACCEPT_TRUNCATED_MSG)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_FLAGS = record.OFF_FLAGS
_HLEN = record.OFF_HLEN
_HAS_EXPIRY = record.HAS_EXPIRY
_HAS_GROUP = record.HAS_GROUP
_HAS_ITEM = record.HAS_ITEM
_EXPIRY_OR_ITEM = _HAS_EXPIRY | _HAS_ITEM
_PERSISTENT = record.PERSISTENT
_TRUNCATED_FAILED = int(Reason.TRUNCATED_MSG_FAILED)
_TRUNCATED_ACCEPTED = int(Reason.TRUNCATED_MSG_ACCEPTED)
_OUTCOME_PENDING = int(Reason.OUTCOME_PENDING)
_UNSET = object()


class Above:
    """The get path's two calls into modules above it, given by them as they load (engine/browse.py
    and engine/groups/calls.py set them; engine/handle.py imports both, so they are set before
    any handle exists), so that this module imports neither (docs/design.md, "The engine's
    modules"): ``prefer_lock_locked``, a plain get by a handle that holds a browse lock takes
    its locked message when it comes first, and ``group_moved``, a plain get of a message in a
    group moves the handle's group position."""

    __slots__ = ("group_moved", "prefer_lock_locked")

    prefer_lock_locked: Callable[[LocalQueue, Cursor, Match | None, object], object]
    group_moved: Callable[[HandleState, bytes, bool], None]


ABOVE = Above()


# -- check --------------------------------------------------------------------------------------


def check_call(s: HandleState, opts: int, buffer_length, wait_interval, browse: bool = False) -> None:
    """The checks every get-path call makes before it looks (no lock).

    :raises MQError: HOBJ_ERROR / HCONN_ERROR / CONNECTION_BROKEN (closed), NOT_OPEN_FOR_INPUT
        (2037) or, with ``browse``, NOT_OPEN_FOR_BROWSE (2036), GET_INHIBITED (2016),
        BUFFER_LENGTH_ERROR (2005), WAIT_INTERVAL_ERROR (2090), SECOND_MARK_NOT_ALLOWED
        (2062), SYNCPOINT_LIMIT_REACHED (2024)."""
    if s.closed:
        raise s.closed_error()
    q = s.queue
    if browse:
        if not s.can_browse:
            raise MQError(Reason.NOT_OPEN_FOR_BROWSE, f"open {q.name!r} with OO.BROWSE to browse or use the cursor")
    elif not s.can_get:
        raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with an OO.INPUT_* option to get")
    if q.inhibit_get:
        raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
    if buffer_length is not None:
        checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
    if not opts:
        return
    if opts & _WAIT:
        checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
    if opts & _MARK_SKIP and s.uow.skip is not None:
        raise MQError(
            Reason.SECOND_MARK_NOT_ALLOWED,
            "this unit of work already has a get marked to skip backout; commit or back out first",
        )
    if opts & SYNC_ANY:
        check_room(s, 1)


def check_room(s: HandleState, n: int) -> None:
    """:raises MQError: SYNCPOINT_LIMIT_REACHED (2024) when the unit of work cannot take
    ``n`` more operations (max_uncommitted)."""
    limit = s.qm.max_uncommitted
    if len(s.uow.ops) + n > limit:
        raise MQError(
            Reason.SYNCPOINT_LIMIT_REACHED,
            f"the unit of work holds max_uncommitted={limit} operations; commit or back out first",
        )


def in_uow(opts: int, rec: bytes) -> bool:
    """Does a get with ``opts`` of ``rec`` join the unit of work (SYNCPOINT, or
    SYNCPOINT_IF_PERSISTENT and a persistent message)?"""
    return bool(opts & _SYNC or (opts & _SYNC_IF_PERSISTENT and rec[_FLAGS] & _PERSISTENT))


# -- obtain (queue lock held) ---------------------------------------------------------------------


class Wait:
    """A call's WAIT: its deadline on the queue manager's clock (set at the first wait, so a
    call that finds a message at once never reads the clock) and how it is woken.

    ``wake`` is the waiter's predicate over new records (None: any message); ``kind`` is
    GETTER, BROWSER or LOCK_BROWSER and ``passes`` says whether a wake the call cannot use
    is passed on (engine/waiting.py :class:`~sweepq.engine.waiting.Waiter`).
    """

    __slots__ = ("deadline", "interval", "kind", "passes", "s", "waiter", "wake")

    def __init__(
        self, s: HandleState, interval: int, wake: Match | Callable | None, kind: int = GETTER, passes: bool = False
    ):
        self.s = s
        self.interval = interval
        self.wake = wake
        self.kind = kind
        self.passes = passes
        self.deadline: float | None = -1.0  # -1.0: not set yet
        self.waiter: Waiter | None = None

    def until_next_locked(self, q: LocalQueue) -> bool:
        """Wait (queue lock held) until a message that may be wanted arrives; False once the
        deadline has passed. A wake this call could not use is passed on first.

        :raises MQError: CONNECTION_BROKEN (2009) when the queue manager closed, GET_INHIBITED
            (2016), HOBJ_ERROR (2019) when the handle was closed, during the wait."""
        s = self.s
        clock = s.qm.clock
        if self.deadline == -1.0:
            self.deadline = None if self.interval < 0 else clock.now() + self.interval / 1000.0
        w = self.waiter
        if w is None:
            w = self.waiter = q.waiters.new(self.wake, self.kind, self.passes)
        elif w.rec is not None:
            q.waiters.pass_on_locked(w)
        if self.deadline is not None and clock.now() >= self.deadline:
            return False
        q.waiters.wait_locked(w, self.deadline)
        if s.qm.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager was closed during the wait")
        if q.inhibit_get:
            raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} were inhibited during the wait")
        if s.closed:
            raise MQError(Reason.HOBJ_ERROR, f"handle for {q.name!r} was closed during the wait")
        return True


def obtain_locked(
    q: LocalQueue, find: Callable, wait: Wait | None, empty: str = "", load: Callable | None = None, first=_UNSET
):
    """The first message ``find`` names, after reading blobs and waiting as needed; queue lock
    held on entry and on return (released only to read a blob, and while waiting).

    ``load(need)`` reads a blob without the lock (default: :meth:`LocalQueue.load`, into the
    tier's cache, as a get does). ``empty`` ends the text of 2033. ``first``: what ``find``
    returned already (a caller that looked once itself, to skip this call when the answer
    was a plain slot).

    :raises MQError: NO_MSG_AVAILABLE (2033) when nothing is found (after the wait); what a
        blob read raises (2101 damaged, 2102 failed); what :meth:`Wait.until_next_locked` raises."""
    q.must_hold("obtaining a message")
    while True:
        r = find() if first is _UNSET else first
        first = _UNSET
        if r is None:
            if wait is not None and wait.until_next_locked(q):
                continue
            raise MQError(Reason.NO_MSG_AVAILABLE, f"no message available on {q.name!r}{empty}")
        kind = type(r)
        if kind is Need:
            q.mutex.give()
            try:
                (load or q.load)(r)
            finally:
                q.mutex.take()
            continue
        if kind is Found:
            for x in r.recs:
                if x[_FLAGS] & _HAS_EXPIRY:
                    if discard_expired_locked(q, r.refs, r.recs):
                        break
                    return r
            else:
                return r
            continue
        rec = q.record_locked(r)
        if rec[_FLAGS] & _HAS_EXPIRY and discard_expired_locked(q, (r,), (rec,)):
            continue
        return r


def discard_expired_locked(q: LocalQueue, refs, recs) -> bool:
    """Remove the expired messages among ``refs`` (lock held); say whether there was one.
    Expiry is enforced here only, when a call would return the message (docs/semantics.md
    §2.3), so an expired message is never delivered and never needs a timer."""
    q.must_hold("discarding expired messages")
    now_us = None
    gone = False
    for ref, rec in zip(refs, recs, strict=True):
        deadline = record.expiry_deadline_us(rec)
        if deadline is None:
            continue
        if now_us is None:
            now_us = int(q.clock.wall() * 1e6)
        if deadline <= now_us:
            q.remove_locked(ref)
            q.expired += 1
            gone = True
    return gone


# -- deliver ----------------------------------------------------------------------------------------


def deliver(s: HandleState, rec: bytes, buffer_length: int | None, opts: int, ref: Ref | None = None) -> Message:
    """The message a call returns for ``rec`` in a buffer of ``buffer_length`` bytes (None:
    any length): the whole data, or the prefix that fits with the warning
    TRUNCATED_MSG_ACCEPTED (2079, with ACCEPT_TRUNCATED_MSG) or TRUNCATED_MSG_FAILED (2080:
    the caller then takes nothing and moves no cursor). Its remaining expiry is measured
    from now. An item's record (HAS_ITEM) brings its item, read from ``ref``, the message's
    name (queue lock held, before a take lets go of it)."""
    h = rec[_HLEN] or record.data_offset(rec)  # 0: a header over 255 bytes (properties)
    m = Message.__new__(Message)
    m._rec = rec
    m._ident = s.ident
    if buffer_length is not None and len(rec) - h > buffer_length:
        m._data = rec[h : h + buffer_length]
        m.reason = _TRUNCATED_ACCEPTED if opts & _ACCEPT_TRUNCATED else _TRUNCATED_FAILED
    else:
        m._data = None  # the record's payload, made when read (engine/message.py Message.data)
        m.reason = 0
    flags = rec[_FLAGS]
    if flags & _EXPIRY_OR_ITEM:  # nearly never: one test for both
        if flags & _HAS_EXPIRY:
            m._now_us = int(s.wall() * 1_000_000)
        if flags & _HAS_ITEM:
            assert ref is not None, "an item is delivered from its ref"
            m.item = s.queue.item_locked(ref)
    return m


# -- take -------------------------------------------------------------------------------------------


def take_one_locked(q: LocalQueue, ref, rec: bytes, joins: bool, journaled: bool = False) -> bool:
    """Take the message ``ref`` (holding ``rec``) for a destructive call, lock held: hidden in
    the unit of work (``joins``: restored in place on backout), or removed for good, its
    durable record deleted first unless ``journaled`` (the caller wrote it with others).
    Returns whether a sync is owed (:func:`finish`).

    :raises MQError: RESOURCE_PROBLEM (2102) when the journal's write fails: nothing taken."""
    if CHECKS:  # the check only when checks are on: interpreted, a call per get costs
        q.must_hold("taking a message")
    if joins:
        q.hide_locked(ref)
        q.obtained += 1
        return False
    durable = not journaled and q.journal is not None and rec[_FLAGS] & _PERSISTENT
    q.remove_locked(ref, bool(durable))  # the journal's write first (2102: nothing changed)
    q.obtained += 1
    return bool(durable)


def take_locked(q: LocalQueue, refs, recs, joins: bool, run: bool = False) -> bool:
    """:func:`take_one_locked` of several messages as one step (a logical message's
    segments, a batch's run): one journal write for every persistent one, then each is
    taken. ``run``: the refs are a run of one lane's list, taken in bulk.

    :raises MQError: RESOURCE_PROBLEM (2102) when the journal's write fails: nothing taken."""
    q.must_hold("taking messages")
    durable = not joins and q.journal is not None and any(r[_FLAGS] & _PERSISTENT for r in recs)
    if durable:
        q.journal.remove(q, refs)  # type: ignore[union-attr]  # one write for every message; 2102: nothing changed
    if not run:
        for ref, rec in zip(refs, recs, strict=True):
            take_one_locked(q, ref, rec, joins, journaled=True)
        return durable
    if joins:
        q.hide_run_locked(refs)
    else:
        q.remove_run_locked(refs)
    q.obtained += len(refs)
    return durable


def finish(s: HandleState, q: LocalQueue, refs, joins: bool, durable: bool, mark_skip: bool = False) -> int:
    """After a take, without the lock: store cleanups owed, the unit of work's record (the
    first get may carry MARK_SKIP_BACKOUT), the sync that makes a removal durable, the trace.
    Returns OUTCOME_PENDING (2124) when that sync failed (the removal is made; a later sync
    hardens it), else 0."""
    if q.cleanup:
        q.after_get()
    reason = 0
    if joins:
        add = s.uow.add_get
        for k, ref in enumerate(refs):
            add(q, ref, mark_skip and k == 0)
    # Journal.wait only under group commit (sync="commit"): with "os" or "none" it has nothing
    # to wait for, and its call cost a durable put or get more than the test (issue 31).
    elif durable and q.journal.group is not None and not q.journal.wait():  # type: ignore[union-attr]
        reason = _OUTCOME_PENDING
    recorder = s.recorder
    if recorder is not None:
        for _ in refs:
            recorder.get(q.name)
    budget = q.budget
    if budget is not None:
        budget.after_get(q)  # counts again now and then (engine/budget.py)
    return reason


# -- the destructive get by match (Handle.get without cursor or group options) ------------------------


def get(s: HandleState, opts: int, wait_interval: int, buffer_length, m: Match | None) -> Message:
    """MQGET of the first available message in get order that ``m`` accepts (None: any);
    the caller made :func:`check_call`. A message whose backout count reached the queue's
    threshold moves to the backout requeue queue instead (engine/poison.py) and the get
    looks again. A handle that holds a browse lock may get its locked message
    (:func:`~sweepq.engine.browse.prefer_lock_locked`, given as ``ABOVE.prefer_lock_locked``)."""
    q = s.queue
    cur = s.cursor
    plain = m is None and (cur is None or cur.lk_seq < 0)  # the hot path: the queue's own search
    mutex = q.mutex
    if plain and (not opts or opts == _WAIT) and buffer_length is None and not q.poison_limit:
        # The hot case, a get that takes the head outside any unit of work with nothing to
        # write or check: the head taken in one step of the core, its record returned, no Ref
        # made (LocalQueue.take_head_locked; a persistent head of a queue with a journal is
        # not taken there: its removal is written); any other head takes the whole way below.
        mutex.take()
        try:
            head = q.take_head_locked(_UNSET, True)
        finally:
            mutex.give()
        if head is not _UNSET:
            # deliver(s, head, None, 0) written out (interpreted, a call fewer): the whole
            # data, and no expiry or item to read (head() takes no message with either).
            got: bytes = head  # type: ignore[assignment]  # a record
            msg = Message.__new__(Message) if COMPILED else Message()  # interpreted, the class's call is cheaper
            msg._rec = got
            msg._ident = s.ident
            msg._data = None  # the record's payload, made when read (engine/message.py Message.data)
            msg.reason = 0
            if q.cleanup or s.recorder is not None or q.budget is not None:
                finish(s, q, (None,), False, False)
            return msg
    find = None if plain else _finder(s, q, m)
    wait = None  # made when the call must wait, not on every get that finds a message at once
    while True:
        mutex.take()
        try:
            ref = q.find_locked() if find is None else find()
            if type(ref) is not Ref or (rec := q.record_locked(ref))[_FLAGS] & _HAS_EXPIRY:  # else: found
                if wait is None and opts & _WAIT:
                    wait = Wait(s, wait_interval, m)
                ref = obtain_locked(q, find or _finder(s, q, m), wait, "", None, ref)
                rec = q.record_locked(ref)
            if not (q.poison_limit and poison.due(s, q, rec)):
                msg = deliver(s, rec, buffer_length, opts, ref)
                if msg.reason == _TRUNCATED_FAILED:
                    return msg
                joins = bool(opts) and in_uow(opts, rec)
                durable = take_one_locked(q, ref, rec, joins)
                break
            q.hide_locked(ref)  # off limits to everyone while it moves
        finally:
            mutex.give()
        poison.requeue(s, q, ref, rec, bool(opts & _SYNC))
    if joins or durable or q.cleanup or s.recorder is not None or q.budget is not None:
        pending = finish(s, q, (ref,), joins, durable, bool(opts & _MARK_SKIP))
        if pending and not msg.reason:
            msg.reason = pending
    if rec[_FLAGS] & _HAS_GROUP:
        _group_moved(s, rec, joins)
    return msg


def take_item(s: HandleState, decode: Callable[[bytes], object], empty: object, whole: object) -> object:
    """The hot case of :meth:`Handle.take_item` (which checked that the handle may get): the
    next message of an in-memory queue taken under one lock, as :func:`get` with no options
    takes it, without making a :class:`Message` for an item: the item itself (HAS_ITEM), or
    ``decode(data)`` of a message that holds data, decoded without the lock; ``empty`` when no
    message is available (:func:`get` raises NO_MSG_AVAILABLE, 2033, then).

    Only when nothing about the message needs more than a take: anything else returns
    ``whole`` at once, having changed nothing, and the caller makes the whole :func:`get` — a
    selector or a browse lock on the handle, a poison threshold, a journal, a blob to read
    back, an expiry or a group section on the message.

    Kept short, as putpath.put_item is: an item at the head, when nothing is counted after a
    take (a trace, a budget), is taken in one step of the core, no Ref nor copy of its record
    made; every other case is :func:`_take_other`'s."""
    q = s.queue
    cur = s.cursor
    if s.match is not None or (cur is not None and cur.lk_seq >= 0) or q.poison_limit or q.journal is not None:
        return whole
    if s.recorder is not None or q.budget is not None:
        return _take_other(s, q, decode, empty, whole)
    mutex = q.mutex
    mutex.take()
    try:
        out = q.take_head_locked(_UNSET)
        if out is _UNSET and not q.depth:
            return empty  # an empty queue: answered under this one lock
    finally:
        mutex.give()
    if out is _UNSET:  # no item at the head: a message of data
        return _take_other(s, q, decode, empty, whole)
    if q.cleanup:
        q.after_get()  # the store's cleanups owed, as finish() does them
    return out


def _take_other(
    s: HandleState, q: LocalQueue, decode: Callable[[bytes], object], empty: object, whole: object
) -> object:
    """:func:`take_item` for what is not an item at the head taken in one step: the first
    message found and taken with a Ref (its record copied), counted by a recorder or a
    budget (:func:`finish`)."""
    ref: Ref | Need | None = None
    mutex = q.mutex
    mutex.take()
    try:
        ref = q.find_locked()
        if type(ref) is not Ref:
            return empty if ref is None else whole  # else a Need: a blob to read first
        rec = q.record_locked(ref)
        if rec[_FLAGS] & (_HAS_EXPIRY | _HAS_GROUP):
            return whole
        out = q.item_locked(ref) if rec[_FLAGS] & _HAS_ITEM else _UNSET
        take_one_locked(q, ref, rec, False)
    finally:
        mutex.give()
    if q.cleanup or s.recorder is not None or q.budget is not None:
        finish(s, q, (ref,), False, False)
    if out is _UNSET:
        return decode(record.tail(rec, rec[_HLEN] or record.data_offset(rec)))
    return out


def _finder(s: HandleState, q: LocalQueue, m: Match | None) -> Callable:
    """The finder of a destructive get by ``m``: the queue's search, and the handle's own
    locked message when it holds a browse lock."""
    cur = s.cursor
    if cur is not None and cur.lk_seq >= 0:
        prefer_lock_locked = ABOVE.prefer_lock_locked
        return lambda: prefer_lock_locked(q, cur, m, q.find_locked(m))
    if m is None:
        return q.find_locked
    return lambda: q.find_locked(m)


def _group_moved(s: HandleState, rec: bytes, joins: bool) -> None:
    """A plain get returned a record with a group section: the handle's get position moves
    (engine/groups/, the seed's get-side restart)."""
    ABOVE.group_moved(s, rec, joins)


def get_each(s: HandleState, max_messages: int, opts: int, wait_interval: int) -> Messages:
    """get_many one :func:`get` at a time, when each message needs its own decision (the
    handle's selector, its browse lock, poison handling); the WAIT is for the first only."""
    out: list[Message] = []
    m = s.match
    while len(out) < max_messages:
        if m is not None:
            m.searched.clear()
        try:
            out.append(get(s, opts if not out else opts & ~_WAIT, wait_interval, None, m))
        except MQError as e:
            if out or e.reason == Reason.NO_MSG_AVAILABLE:
                break  # what was taken is returned; the next call meets the error again
            raise
    return messages_of(out)


def get_many(s: HandleState, max_messages: int, opts: int, wait_interval: int) -> Messages:
    """MQGET of up to ``max_messages`` messages in one call (Handle.get_many checked the
    arguments): a run of available messages is taken at once; the WAIT applies to the
    first message only; an empty result is empty. An error after some messages were taken
    ends the call with those (the next call meets it again).

    The hot case, a take outside any unit of work from a queue that writes nothing of it (no
    journal): the run at the head of the queue is taken in one step, its records copied
    once, back to back (LocalQueue.take_run_locked), and its messages made only when the
    caller reads them (engine/message.py ``Messages``); anything else (nothing at the head,
    an expiry, a blob to bring back) takes the whole way below."""
    q = s.queue
    hot = not opts & SYNC_ANY and q.journal is None
    wait = Wait(s, wait_interval, None) if opts & _WAIT else None
    parts: list = []
    got = 0
    while got < max_messages:
        if hot:
            q.mutex.take()
            try:
                taken = q.take_run_locked(max_messages - got)
            finally:
                q.mutex.give()
            if taken is not None:
                ends = taken[1]
                pending = finish(s, q, ends, False, False)  # ``ends``: one per message taken
                parts.append(messages_taken(taken[0], ends, taken[2], s.ident, pending))
                got += len(ends)
                continue
        try:
            with q.mutex:
                found = obtain_locked(q, _runs(q, max_messages - got), None if got else wait)
                if type(found) is Found:
                    refs, recs, run = found.refs, found.recs, found.run
                else:
                    refs, recs, run = (found,), (q.record_locked(found),), False  # type: ignore[assignment]
                joins = bool(opts) and in_uow(opts, recs[0])
                if run and opts & _SYNC_IF_PERSISTENT and any(in_uow(opts, r) != joins for r in recs):
                    refs, recs, run = refs[:1], recs[:1], False  # mixed persistence: one by one
                items = _items_locked(q, refs, recs)  # before the take lets go of them
                durable = take_locked(q, refs, recs, joins, run)
        except MQError as e:
            if got or e.reason == Reason.NO_MSG_AVAILABLE:
                break
            raise
        pending = finish(s, q, refs, joins, durable)
        batch = messages(recs, s.ident)
        if items is not None:
            for msg, item in zip(batch, items, strict=True):
                if item is not _UNSET:
                    msg.item = item
        if pending:
            for msg in batch:
                msg.reason = pending
        parts.append(batch)
        got += len(batch)
    if len(parts) == 1 and type(parts[0]) is Messages:
        return parts[0]
    return messages_of([m for part in parts for m in part])


def _items_locked(q: LocalQueue, refs, recs) -> list | None:
    """The items of the messages among ``refs`` whose records have HAS_ITEM (``_UNSET``
    for the others), or None when none has."""
    if not any(r[_FLAGS] & _HAS_ITEM for r in recs):
        return None
    return [q.item_locked(ref) if rec[_FLAGS] & _HAS_ITEM else _UNSET for ref, rec in zip(refs, recs, strict=True)]


def _runs(q: LocalQueue, limit: int) -> Callable:
    return lambda: q.find_run_locked(limit)


# -- a channel's batch ----------------------------------------------------------------------------


def assign_batch(
    s: HandleState, max_messages: int, wait_interval: int = 0, batch_interval: int = 0, fast: bool = False
) -> Batch:
    """Assign up to ``max_messages`` available messages, in get order, to a new batch of a
    transmission queue's channel (Handle.assign_batch): they stay in place, invisible to
    gets and never swept, and count as obtained, as gets do (seed 003). A batch names slots:
    a message found inside a blob is brought back first, as a get brings it back.

    ``wait_interval`` (ms; -1: unlimited) is how long to wait for the first message (an
    empty batch when none comes); ``batch_interval`` (ms, MQ's BATCHINT) how long after the
    first message the batch stays open for more, until it holds ``max_messages``. With
    ``fast``, a non-persistent message is taken off the queue for good at once (MQ's
    NPMSPEED(FAST)): it travels with the batch but the batch does not hold it."""
    q = s.queue
    batch_id = Batch.next_id()
    gone: list[Ref] = []
    recs: list[bytes] = []
    fast_at: list[int] = []
    first = Wait(s, wait_interval, None) if wait_interval else None
    more = None  # the batch interval, from the first message on
    with q.mutex:
        while len(recs) < max_messages:
            try:
                ref = obtain_locked(q, q.find_locked, more if recs else first)
            except MQError as e:
                if recs or e.reason == Reason.NO_MSG_AVAILABLE:
                    break  # an error after some messages: the batch holds those
                raise
            rec = q.record_locked(ref)
            if fast and not rec[_FLAGS] & _PERSISTENT:
                take_one_locked(q, ref, rec, False)  # not persistent: nothing is written
                fast_at.append(len(recs))
                gone.append(ref)
            else:
                q.batches.assign_locked(batch_id, ref)
            recs.append(rec)
            if batch_interval and more is None:
                more = Wait(s, batch_interval, None)
                more.deadline = s.qm.clock.now() + batch_interval / 1000.0
    if gone:
        finish(s, q, gone, False, False)
    else:
        q.after_get()
    return Batch(q, s.qm.ident, recs, batch_id, frozenset(fast_at))
