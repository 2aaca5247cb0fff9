"""The one put path: how a message is checked, becomes a record and takes its place.

Every put goes through here: :meth:`Handle.put` (:func:`put`), :meth:`Handle.put_many`
(:func:`put_many`), the group and segment puts of engine/groups/ (which choose the
records' group fields and call :func:`place`), and the poison-message requeue
(engine/poison.py). The steps, written once:

``check``   :func:`check_options` (2046), :func:`descriptor` (the MD's fields, each with
            its MQ reason), the length limits (:func:`too_big`: 2030 / 2031), the unit of
            work's room (2024).
``build``   a record (engine/record.py) per message, under the queue lock, where its
            arrival number is drawn, so that arrival order is the lane's order.
``place``   :func:`place`: under the queue's lock, MAXDEPTH (2053), the journal's one
            write for persistent records outside a unit of work (2102: nothing put), the
            records appended to their lane (engine/core/lanes.py), waiters woken; then, without
            the lock, the unit of work's record of each put, the sync of ``sync="commit"``
            (a failed sync is the WARNING OUTCOME_PENDING, 2124: the put is made, do not
            repeat it) and the trace recorder.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cython
from cython import compiled as COMPILED

from . import checks, properties, record
from .constants import MAX_PRIORITY, MSGID_NONE, PMO, Persistence, Reason
from .core.flags import UNCOMMITTED
from .distributed.headers import transmission
from .errors import MQError, options_error
from .getpath import check_room
from .matching import _fixed
from .message import PutResult, PutResults, put_results_of
from .options import check_put
from .sizes import item_bytes

if TYPE_CHECKING:
    from .handlestate import HandleState
    from .queue import LocalQueue
    from .record import MD

_PMO_SYNC = int(PMO.SYNCPOINT)
_PMO_NEW_MSG_ID = int(PMO.NEW_MSG_ID)
_PMO_NEW_CORREL_ID = int(PMO.NEW_CORREL_ID)
_HEAD_LEN = record.HEAD_LEN
_PACK_HEAD = record.HEAD.pack  # the interpreted form's record.plain, written out in put()
_PERSISTENT = record.PERSISTENT
_OUTCOME_PENDING = int(Reason.OUTCOME_PENDING)
_TIME = time.time  # the system clock's wall (sweeper/clock.py SystemClock.wall)
_TIME_NS = time.time_ns  # the same clock in integer nanoseconds (interpreted: no float, no int() call)

if COMPILED:  # the C library's clock, read without a Python call or float
    from cython.cimports.posix.time import CLOCK_REALTIME, clock_gettime, timespec


# -- check --------------------------------------------------------------------------------------


def check_options(s: HandleState, opts: int) -> None:
    """The put options are valid (docs/semantics.md §4.2). :raises MQError: 2046."""
    if opts:
        err = check_put(opts)
        if err:
            raise options_error(err)


def check_target(s: HandleState) -> LocalQueue:
    """The handle may put and the queue takes puts; returns the queue.

    :raises MQError: the closed handle's reason, NOT_OPEN_FOR_OUTPUT (2039), PUT_INHIBITED (2051)."""
    if s.closed:
        raise s.closed_error()
    q = s.queue
    if not s.can_put:
        raise MQError(Reason.NOT_OPEN_FOR_OUTPUT, f"open {q.name!r} with OO.OUTPUT to put")
    if q.inhibit_put:
        raise MQError(Reason.PUT_INHIBITED, f"puts to {q.name!r} are inhibited (inhibit_put)")
    return q


def as_bytes(data) -> bytes:
    """Message data as ``bytes``. :raises MQError: BUFFER_LENGTH_ERROR (2005) for any other type."""
    if type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise MQError(
        Reason.BUFFER_LENGTH_ERROR,
        f"message data must be bytes, bytearray or memoryview, not {type(data).__name__}"
        + ("; encode text first, e.g. data.encode()" if isinstance(data, str) else ""),
    )


def too_big(s: HandleState, n: int) -> MQError:
    """The error for a message of ``n`` bytes over a length limit (the manager's first)."""
    qm = s.qm
    if n > qm.max_msg_length:
        return MQError(
            Reason.MSG_TOO_BIG_FOR_Q_MGR,
            f"message of {n} bytes exceeds the queue manager's max_msg_length {qm.max_msg_length}",
        )
    q = s.queue
    return MQError(
        Reason.MSG_TOO_BIG_FOR_Q, f"message of {n} bytes exceeds {q.name!r} max_msg_length {q.max_msg_length}"
    )


def descriptor(s: HandleState, md: MD, opts: int) -> tuple[dict, int, bool, int]:
    """Validate a caller's descriptor: (the record's optional fields, priority, persistent,
    warning reason). :raises MQError: MD_ERROR (2026) or the field's own reason."""
    from .record import MD

    if not isinstance(md, MD):
        raise MQError(Reason.MD_ERROR, f"the descriptor must be an MD, not {type(md).__name__}")
    q = s.queue
    priority, reason = _priority(md, q)
    persistent = _persistent(md, q)
    _check_numbers(md)
    extra: dict = {"expiry": md.expiry}
    if md.reply_to_q or md.reply_to_q_mgr:  # request/reply: engine/record.py HAS_REPLY
        extra["reply"] = record.reply_section(md)
    if md.properties:
        extra["props"] = properties.encode(md.properties)
    elif md.properties is not None and not isinstance(md.properties, dict):
        properties.encode(md.properties)  # raises the type error
    msg_id = _fixed(md.msg_id, 24, "msg_id")
    if msg_id != MSGID_NONE and not opts & _PMO_NEW_MSG_ID:
        extra["msg_id"] = msg_id
    if opts & _PMO_NEW_CORREL_ID:
        qm = s.qm
        extra["correl_id"] = b"SWQC" + qm.ident.run_id + qm.next_seq().to_bytes(8, "big")
    else:
        extra["correl_id"] = _fixed(md.correl_id, 24, "correl_id")
    group_id = _fixed(md.group_id, 24, "group_id")
    if md.msg_flags or md.msg_seq_number != 1 or md.offset or group_id != bytes(24):
        extra["group"] = (group_id, md.msg_seq_number, md.offset, md.msg_flags)
    return extra, priority, persistent, reason


def _priority(md: MD, q: LocalQueue) -> tuple[int, int]:
    priority = checks.integer(md.priority, "priority", Reason.PRIORITY_ERROR, -1)
    if priority == -1:
        return q.default_priority, 0
    if priority > MAX_PRIORITY:
        return MAX_PRIORITY, Reason.PRIORITY_EXCEEDS_MAXIMUM
    return priority, 0


def _persistent(md: MD, q: LocalQueue) -> bool:
    pers = checks.integer(md.persistence, "persistence", Reason.PERSISTENCE_ERROR, 0, 2)
    if pers == Persistence.AS_Q_DEF:
        return q.default_persistent
    return pers == Persistence.PERSISTENT


def _check_numbers(md: MD) -> None:
    expiry = checks.integer(md.expiry, "expiry (tenths of a second, -1 unlimited)", Reason.EXPIRY_ERROR, -1)
    if expiry == 0:
        raise MQError(Reason.EXPIRY_ERROR, "expiry 0: use -1 (unlimited) or 1..999999999 tenths of a second")
    flags = checks.flags(md.msg_flags, "msg_flags", Reason.MSG_FLAGS_ERROR)
    if flags & ~0x1F:
        raise MQError(Reason.MSG_FLAGS_ERROR, f"msg_flags 0x{flags:x} has unknown bits; use MF flags")
    checks.integer(md.msg_seq_number, "msg_seq_number", Reason.MSG_SEQ_NUMBER_ERROR, 1, 999_999_999)
    checks.integer(md.offset, "offset", Reason.OFFSET_ERROR, 0, 999_999_999)


# -- put ----------------------------------------------------------------------------------------


def put(s: HandleState, data, md: MD | None, opts: int) -> PutResult:
    """MQPUT of one message that is not part of a group (Handle.put checked the options)."""
    q = s.queue
    if s.closed or not s.can_put or q.inhibit_put:
        check_target(s)  # raises what is wrong
    if type(data) is not bytes:
        data = as_bytes(data)
    n = len(data)
    if n > q.max_msg_length or n > s.max_msg_length:
        raise too_big(s, n)
    syncpoint = opts & _PMO_SYNC
    if (
        md is None
        and not syncpoint
        and q.budget is None
        and s.recorder is None
        and s.xmit is None
        and not (q.default_persistent and (q.journal is not None or q.temporary))
    ):
        # The hot path, a put with nothing but its data: its record made and placed under the
        # lock with nothing else (no descriptor, journal, unit of work, budget or trace), as
        # place() would, with none of its choices on the way.
        priority = q.default_priority
        if COMPILED:
            put_us = wall_us(s)
        else:  # wall_us written out: interpreted, a call fewer
            wall = s.wall
            put_us = _TIME_NS() // 1000 if wall is _TIME else int(wall() * 1_000_000)
        mutex = q.mutex
        mutex.take()
        try:
            if q.depth >= q.max_depth:
                raise _full(q, 1)
            if COMPILED:
                rec = record.plain(s.sequence.next(), put_us, priority, q.default_persistent, data)
            else:  # record.plain written out: interpreted, a call fewer
                flags = _PERSISTENT if q.default_persistent else 0
                rec = _PACK_HEAD(_HEAD_LEN, priority, flags, 0, s.sequence.next(), put_us) + data
            q.insert_one_locked(rec, priority)
        finally:
            mutex.give()
        res = PutResult.__new__(PutResult) if COMPILED else PutResult()  # interpreted: the cheaper call
        res._rec = rec
        res._ident = s.ident
        res.reason = 0
        return res
    if syncpoint:
        check_room(s, 1)
    if md is None:
        recs, reason = place(s, q, (data,), None, q.default_priority, q.default_persistent, syncpoint)
    else:
        extra, priority, persistent, reason = descriptor(s, md, opts)
        recs, pending = place(s, q, (data,), extra, priority, persistent, syncpoint)
        reason = reason or pending
    res = PutResult.__new__(PutResult)
    res._rec = recs[0]
    res._ident = s.ident
    res.reason = reason
    return res


def put_many(s: HandleState, datas: Sequence[bytes], md: MD | None, opts: int) -> PutResults:
    """MQPUT of many messages with one descriptor, all or none (Handle.put_many)."""
    q = check_target(s)
    if isinstance(datas, (bytes, bytearray, memoryview, str)) or not hasattr(datas, "__len__"):
        raise MQError(Reason.PARM_VALUE_ERROR, "put_many takes a list (or tuple) of messages, each bytes")
    datas = [d if type(d) is bytes else as_bytes(d) for d in datas]
    if not datas:
        return put_results_of(datas, s.ident)
    longest = 0
    for d in datas:
        if len(d) > longest:
            longest = len(d)
    if longest > q.max_msg_length or longest > s.max_msg_length:
        raise too_big(s, longest)
    syncpoint = opts & _PMO_SYNC
    if syncpoint:
        check_room(s, len(datas))
    reason = 0
    if md is None:
        extra, priority, persistent = None, q.default_priority, q.default_persistent
    else:
        if opts & _PMO_NEW_CORREL_ID:
            raise options_error("put_many cannot generate a CorrelId per message; put them one by one")
        extra, priority, persistent, reason = descriptor(s, md, opts)
    recs, pending = place(s, q, datas, extra, priority, persistent, syncpoint)
    return put_results_of(recs, s.ident, reason or pending)


def put_items(s: HandleState, items: Sequence, priority: int) -> None:
    """The put of ``sweepq.Queue`` in memory, all or none: each of ``items`` is kept as the
    object it is (engine/core/lanes.py, "Items"), not persistent, outside any unit of work,
    at ``priority`` (0..9; -1: the queue's default). Handle.put_item(s) checked the arguments.

    :raises MQError: what :func:`check_target` raises; Q_TYPE_ERROR (2057) when the queue
        takes no items (see :meth:`LocalQueue.keep_items`); what :func:`place` raises."""
    q = s.queue
    if s.closed or not s.can_put or q.inhibit_put:
        check_target(s)  # raises what is wrong
    if not q.keeps_items or s.xmit is not None:
        raise MQError(Reason.Q_TYPE_ERROR, f"{q.name!r} takes MQ messages (bytes), not items: put data with put()")
    if items:
        payloads = (b"",) if len(items) == 1 else (b"",) * len(items)
        place(s, q, payloads, None, q.default_priority if priority < 0 else priority, False, 0, None, items)


def put_item(s: HandleState, item: object, priority: int) -> None:
    """:func:`put_items` of one item: the put of ``sweepq.Queue`` in memory, its hot path,
    kept short (its code is run between every two of the interpreter's own steps, and a long
    one pushes the interpreter's loop out of the CPU's instruction cache): the record made
    and placed under the lock with nothing else (no payload, no descriptor, no journal, no
    unit of work). A put refused, on a queue under a memory budget, or by a handle that
    records a trace goes the whole way, :func:`_put_item_other`.

    The put time is the queue manager's clock; when that is the system's, the compiled form
    reads its coarse clock (the time at the kernel's last tick, a few milliseconds behind at
    most): an item's PutTime keeps MQ's centisecond (docs/semantics.md §6.1a), and the
    order of delivery never rests on it (the arrival number does).

    :raises MQError: what :func:`put_items` raises."""
    q = s.queue
    if (
        s.closed
        or not s.can_put
        or q.inhibit_put
        or not q.keeps_items
        or s.xmit is not None
        or q.budget is not None
        or s.recorder is not None
    ):
        _put_item_other(s, item, priority)
        return
    if priority < 0:
        priority = q.default_priority
    put_us = wall_us(s, True)
    mutex = q.mutex
    mutex.take()
    try:
        if q.depth >= q.max_depth:
            raise _full(q, 1)
        q.insert_item_locked(s.sequence.next(), put_us, priority, q.default_priority if q.fifo else priority, item)
    finally:
        mutex.give()


def _put_item_other(s: HandleState, item: object, priority: int) -> None:
    """:func:`put_item` the whole way: what is wrong with the handle or the queue raised, else
    through :func:`place` (a memory budget counts the item, a recorder writes it)."""
    q = s.queue
    if s.closed or not s.can_put or q.inhibit_put:
        check_target(s)  # raises what is wrong
    if not q.keeps_items or s.xmit is not None:
        raise MQError(Reason.Q_TYPE_ERROR, f"{q.name!r} takes MQ messages (bytes), not items: put data with put()")
    place(s, q, (b"",), None, q.default_priority if priority < 0 else priority, False, 0, None, (item,))


def wall_us(s: HandleState, coarse: bool = False) -> int:
    """The put time, in microseconds since the epoch, from the queue manager's clock (a
    record's PutDate and PutTime): read from the C library's clock when the manager's clock
    is the system's (the same clock ``time.time`` reads), else from the clock. ``coarse``:
    the compiled form may read the system's coarse clock (the time at the kernel's last tick,
    docs/semantics.md §6.1a; ``SWEEPQ_CLOCK_COARSE`` in putpath.pxd, the precise clock where
    the system has no coarse one)."""
    wall = s.wall
    if wall is _TIME:
        if COMPILED:
            ts = cython.declare(timespec)
            # SWEEPQ_CLOCK_COARSE: declared in putpath.pxd, a name of the compiled form only.
            clock = SWEEPQ_CLOCK_COARSE if coarse else CLOCK_REALTIME  # type: ignore[name-defined]  # noqa: F821
            clock_gettime(clock, cython.address(ts))
            return ts.tv_sec * 1_000_000 + ts.tv_nsec // 1000
        return _TIME_NS() // 1000
    return int(wall() * 1_000_000)


# ``extra`` of :func:`place` for records a channel received (:func:`put_record`).
RECEIVED: dict = {}


def put_record(s: HandleState, rec, opts: int) -> PutResult:
    """MQPUT with SET_ALL_CONTEXT of a record a channel received (Handle.put_as_received):
    checked as a put of its data is, then placed as it is, with a new arrival number."""
    q = check_target(s)
    if type(rec) is not bytes:
        rec = as_bytes(rec)
    if len(rec) < record.HEAD_LEN or len(rec) < record.data_offset(rec):
        raise MQError(Reason.MD_ERROR, "a received message whose record header is cut short")
    n = len(rec) - record.data_offset(rec)
    if n > q.max_msg_length or n > s.qm.max_msg_length:
        raise too_big(s, n)
    if rec[record.OFF_FLAGS] & record.HAS_PROPS:
        try:
            record.properties_of(rec)
        except Exception as e:  # damaged properties must not reach a consumer's get
            raise MQError(Reason.MD_ERROR, f"a received message whose properties cannot be read ({e})") from None
    syncpoint = opts & _PMO_SYNC
    if syncpoint:
        check_room(s, 1)
    priority, persistent = rec[record.OFF_PRIORITY], bool(rec[record.OFF_FLAGS] & record.PERSISTENT)
    recs, reason = place(s, q, (rec,), RECEIVED, priority, persistent, syncpoint)
    res = PutResult()
    res._rec = recs[0]
    res._ident = s.qm.ident
    res.reason = reason
    return res


def place(
    s: HandleState,
    q: LocalQueue,
    payloads: Sequence[bytes],
    extra: dict | None,
    priority: int,
    persistent: bool,
    syncpoint: int,
    pieces: Sequence | None = None,
    items: Sequence | None = None,
) -> tuple[list[bytes], int]:
    """Build the records of ``payloads`` and put them on ``q`` in one step, all or none.

    ``extra`` holds the optional record fields (engine/record.encode), or is
    :data:`RECEIVED` (each payload is a whole record a channel received); ``pieces``, when
    given, a group tuple per payload (engine/groups/: segments get their own MsgIds, the
    first keeps ``extra``'s); ``items``, when given, the items a put of
    :func:`put_items` keeps (each payload is ``b""``). Returns (the records, OUTCOME_PENDING when the sync of a
    persistent put failed, else 0).

    Under a memory budget (engine/budget.py) the queue's policy applies first when the
    budget is reached, and the bytes put are counted after.

    :raises MQError: PERSISTENT_NOT_ALLOWED (2048: a temporary dynamic queue), Q_FULL (2053),
        STORAGE_NOT_AVAILABLE (2071: the memory budget is full
        and the queue's policy is BLOCK or FAIL), RESOURCE_PROBLEM (2102: the journal's write
        failed and nothing was put)."""
    qm = s.qm
    if persistent and q.temporary:
        raise MQError(
            Reason.PERSISTENT_NOT_ALLOWED,
            f"{q.name!r} is a temporary dynamic queue: it takes no persistent messages (put them not persistent)",
        )
    budget = q.budget
    held = 0
    if budget is not None:
        # What the put adds to memory: its payloads, or an item's size with its members'
        # (engine/sizes.py item_bytes; resident memory, which a budget on items counts, sees the rest).
        held = sum(map(len, payloads)) if items is None else sum(map(item_bytes, items))
        if items is not None:  # what each item a get_many takes weighs (budget.batch_limit)
            q.item_weight = held // len(items)
        if budget.paging or len(payloads) != 1 or held > budget.room:
            budget.before_put(q, held, len(payloads))  # the queue's memory policy: page, block or fail (2071)
    lane_i = q.default_priority if q.fifo else priority
    now = s.wall()
    put_us = int(now * 1_000_000)
    k = len(payloads)
    mutex = q.mutex
    mutex.take()
    try:
        if q.depth + k > q.max_depth:
            raise _full(q, k)
        durable = persistent and q.journal is not None
        xmit = s.xmit
        plain_batch = False  # the records are PlainRecords, written from their fields
        pinned = False  # the records carry their MsgIds already (record.pinned)
        if items is not None:
            sequence = s.sequence
            recs = [record.item_head(sequence.next(), put_us, priority) for _ in items]
        elif extra is None and pieces is None and k == 1:  # the put hot path: a record with no option
            if durable and xmit is None:  # its MsgId written out as it is made (record.pinned: one copy)
                recs = [record.pinned(s.sequence.next(), put_us, priority, persistent, payloads[0], qm.ident)]
                pinned = True
            else:
                recs = [record.plain(s.sequence.next(), put_us, priority, persistent, payloads[0])]
        elif not (extra is not None or pieces is not None or xmit is not None or durable or syncpoint) and (
            q.lanes.index is None
        ):
            # A batch of plain messages (put_many with no descriptor, outside a unit of work):
            # each record written straight into the queue's memory from its fields, and made
            # as bytes only when read (engine/record.py PlainRecords: a waiter's wake, the
            # caller's results).
            sequence = s.sequence
            seqs = array("Q", bytes(8 * k))
            numbers = seqs  # compiled: a typed view of the array's memory
            for j in range(k):
                numbers[j] = sequence.next()
            recs = record.PlainRecords(seqs, put_us, priority, persistent, payloads)  # type: ignore[assignment]
            plain_batch = True
        else:
            recs = _records(s, payloads, extra, priority, persistent, put_us, pieces)
        if xmit is not None:  # a remote queue: the message travels with a transmission header
            recs = [transmission(r, qm.ident, xmit.remote_queue, xmit.remote_qmgr) for r in recs]
        if durable:
            if not pinned:
                recs = [record.pin_msg_id(r, qm.ident) for r in recs]
            if not syncpoint:
                q.journal.put(q, lane_i, recs)  # type: ignore[union-attr]  # one write, before any joins the lane (2102)
        refs = q.insert_locked(recs, lane_i, (lane_i | UNCOMMITTED) if syncpoint else lane_i, bool(syncpoint), items)
    finally:
        mutex.give()
    reason = 0
    if syncpoint:
        add = s.uow.add_put
        for ref in refs:  # type: ignore[union-attr]  # asked for with syncpoint
            add(q, ref)
    # Journal.wait only under group commit (sync="commit"): with "os" or "none" it has nothing
    # to wait for, and its call cost a durable put or get more than the test (issue 31).
    elif durable and q.journal.group is not None and not q.journal.wait():  # type: ignore[union-attr]
        reason = _OUTCOME_PENDING
    recorder = s.recorder
    if recorder is not None:
        for data in payloads:
            recorder.put(q.name, len(data), priority, persistent)
    if budget is not None:
        put_bytes = k * _HEAD_LEN + held if plain_batch else sum(map(len, recs))
        budget.after_put(q, put_bytes + (0 if items is None else held))
    return recs, reason


def _records(
    s: HandleState, payloads, extra: dict | None, priority: int, persistent: bool, put_us: int, pieces
) -> list[bytes]:
    """The records of one put step (queue lock held: arrival numbers are drawn here)."""
    sequence = s.sequence
    seq = s.qm.next_seq  # the same numbers, as a function for the comprehensions below
    if extra is RECEIVED:  # whole records a channel received: a new arrival number each
        return [record.rehome(record.with_backout(r, 0), seq(), s.ident) for r in payloads]
    if extra is None and pieces is None:
        return [record.plain(sequence.next(), put_us, priority, persistent, d) for d in payloads]
    extra = extra or {}
    if pieces is None:
        return [record.encode(seq(), put_us, priority, persistent, d, **extra) for d in payloads]
    msg_id = extra.get("msg_id")
    rest = {k: v for k, v in extra.items() if k not in ("msg_id", "group")}
    return [
        record.encode(seq(), put_us, priority, persistent, d, msg_id=msg_id if i == 0 else None, group=g, **rest)
        for i, (d, g) in enumerate(zip(payloads, pieces, strict=True))
    ]


def _full(q: LocalQueue, k: int) -> MQError:
    if k == 1:
        return MQError(Reason.Q_FULL, f"{q.name!r} holds max_depth={q.max_depth} messages")
    room = max(0, q.max_depth - q.depth)
    return MQError(Reason.Q_FULL, f"{q.name!r} has room for {room} of {k} messages; none put")
