"""Connections (MQCONN) and object handles (MQOPEN): where put and get live.

Thread safety: a :class:`QueueManager` may be shared by any number of threads. A
:class:`Connection` and its :class:`Handle` objects belong to one thread at a time, like an
MQ connection handle; give each thread its own connection. Queues are protected by their
own locks, so connections on different threads never need any lock of their own.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

from . import browse, checks, groups, properties, record
from .constants import (
    GMO,
    MAX_PRIORITY,
    MO,
    MSGID_NONE,
    OO,
    PMO,
    Persistence,
    Reason,
    Usage,
)
from .durable.journal import Batch as DurableBatch
from .durable.journal import Journal
from .errors import MQError, options_error
from .lane import _SENTINELS, AVAILABLE_BELOW, UNCOMMITTED
from .matching import MATCH_DEFAULT, _fixed, build_match, match_for_get
from .message import Message, PutResult
from .options import INPUT_OPTS, check_get, check_open, check_put
from .queue import LocalQueue, Ref, Waiter
from .record import MD
from .selector import Selector, compile_selector
from .tiering import Need
from .uow import UnitOfWork

if TYPE_CHECKING:
    from .manager import QueueManager

_SYNC = int(GMO.SYNCPOINT)
_SYNC_IF_PERSISTENT = int(GMO.SYNCPOINT_IF_PERSISTENT)
_WAIT = int(GMO.WAIT)
_ACCEPT_TRUNCATED = int(GMO.ACCEPT_TRUNCATED_MSG)
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_BROWSE_ANY = int(GMO.BROWSE_FIRST | GMO.BROWSE_NEXT | GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR)
_CURSOR_ANY = _BROWSE_ANY | int(GMO.LOCK | GMO.UNLOCK)  # engine/browse.py takes these calls
_GROUP_GMO = groups.GROUP_GMO  # LOGICAL_ORDER, COMPLETE_MSG, ALL_*_AVAILABLE: engine/groups.py
_PMO_SYNC = int(PMO.SYNCPOINT)
_PMO_NEW_MSG_ID = int(PMO.NEW_MSG_ID)
_PMO_NEW_CORREL_ID = int(PMO.NEW_CORREL_ID)
_PMO_LOGICAL_ORDER = int(PMO.LOGICAL_ORDER)
_HAS_EXPIRY = record.HAS_EXPIRY
_EXPIRY_OR_GROUP = record.HAS_EXPIRY | record.HAS_GROUP  # the get's slow tail
_PERSISTENT = record.PERSISTENT
_MATCH_MSG_TOKEN = int(MO.MATCH_MSG_TOKEN)
_pack_head = record.HEAD.pack  # a put with no optional fields: record.encode(), written out
_HEAD_LEN = record.HEAD_LEN
_UNSET = object()
_FLAGS_MAX = checks.FLAGS_MAX
_AVAILABLE_BELOW = AVAILABLE_BELOW


def _as_bytes(data) -> bytes:
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise MQError(
        Reason.BUFFER_LENGTH_ERROR,
        f"message data must be bytes, bytearray or memoryview, not {type(data).__name__}"
        + ("; encode text first, e.g. data.encode()" if isinstance(data, str) else ""),
    )


class Connection:
    """A connection to a queue manager. It owns at most one unit of work.

    Use it as a context manager: leaving the block disconnects, which backs out any
    uncommitted work (MQ's implicit backout) and closes every handle.
    """

    def __init__(self, qm: QueueManager):
        self._qm = qm
        self._uow = UnitOfWork()
        self._handles: set[Handle] = set()
        self._closed = False

    # -- objects ------------------------------------------------------------------------

    def open(self, name: str, options: OO | int, selector: str | None = None) -> Handle:
        """Open a queue (MQOPEN). The handle can do only what ``options`` allow (§4.3, §7).

        ``selector`` is a selection string (docs/semantics.md §10): the handle's gets and browses
        then return only messages it selects. It is compiled here, once: a syntax error is
        MQError 2459, a selector that can never be TRUE 2504.
        """
        self._check()
        checks.name(name)
        opts = checks.flags(options, "open options")
        err = check_open(opts)
        if err:
            raise options_error(err)
        sel = compile_selector(selector)
        q = self._qm._queue(name)
        inp = opts & INPUT_OPTS
        if inp == OO.INPUT_AS_Q_DEF:
            inp = int(q.attrs.default_input)
        if inp == OO.INPUT_SHARED and not q.attrs.shareable:
            inp = int(OO.INPUT_EXCLUSIVE)
        with q.mutex:
            if q.deleted:
                raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"queue {name!r} has been deleted")
            if inp and (q.open_exclusive or (inp == OO.INPUT_EXCLUSIVE and q.open_input)):
                raise MQError(
                    Reason.OBJECT_IN_USE,
                    f"queue {name!r} is open for input "
                    + ("exclusively by another handle" if q.open_exclusive else "by another handle")
                    + "; open it INPUT_SHARED, or close the other handle",
                )
            if inp:
                q.open_input += 1
                q.open_exclusive = inp == OO.INPUT_EXCLUSIVE
            if opts & OO.OUTPUT:
                q.open_output += 1
            q.open_handles += 1
        h = Handle(self, q, opts, inp, sel)
        self._handles.add(h)
        return h

    # -- unit of work --------------------------------------------------------------------

    def commit(self) -> None:
        """MQCMIT: puts become visible, got messages are deleted."""
        self._check()
        self._uow.commit()

    def backout(self) -> None:
        """MQBACK: puts are deleted, got messages reappear in place with BackoutCount + 1.

        A get marked with MARK_SKIP_BACKOUT stays got and forms a new unit of work.
        """
        self._check()
        self._uow.backout(application_requested=True)

    @property
    def uncommitted(self) -> int:
        """Operations in the current unit of work (counted against max_uncommitted)."""
        return len(self._uow)

    def disconnect(self) -> None:
        """MQDISC: back out uncommitted work (a marked get is restored too) and close handles."""
        if self._closed:
            return
        for h in list(self._handles):
            h.close()
        self._uow.backout(application_requested=False)
        self._closed = True
        self._qm._forget(self)

    close = disconnect

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()

    def _check(self) -> None:
        if self._closed:
            raise MQError(Reason.HCONN_ERROR, "this connection is disconnected; connect again")
        if self._qm.closed:
            raise MQError(Reason.CONNECTION_BROKEN, "the queue manager has been closed")


class Handle:
    """An open queue (MQOPEN's object handle): put, get, close."""

    __slots__ = (
        "_can_browse",
        "_can_get",
        "_can_put",
        "_closed",
        "_conn",
        "_cursor",
        "_gbrowse",
        "_grp",
        "_match",
        "_qm",
        "_selector",
        "_wall",
        "options",
        "queue",
    )

    def __init__(
        self, conn: Connection, queue: LocalQueue, options: int, input_mode: int, selector: Selector | None = None
    ):
        self._conn = conn
        # The selection string compiled at open, and the Match every get uses without other
        # match fields (None: no selection, so plain gets keep their fast path).
        self._selector = selector
        self._match = build_match(conn._qm.ident, 0, None, None, None, None, None, None, selector)
        self._qm = conn._qm
        self._wall = conn._qm.clock.wall
        self.queue = queue
        self.options = OO(options | input_mode)
        self._can_get = bool(input_mode)
        self._can_browse = bool(options & OO.BROWSE)
        self._can_put = bool(options & OO.OUTPUT)
        self._closed = False
        self._cursor: browse.Cursor | None = None  # made by the first browse (engine/browse.py)
        self._grp = None  # groups.HandleGroups while a group is current (put or get side)
        self._gbrowse = None  # groups.BrowseState during a LOGICAL_ORDER browse pass

    @property
    def name(self) -> str:
        return self.queue.name

    def close(self) -> Reason:
        """MQCLOSE. Uncommitted work stays with the connection's unit of work.

        Returns ``Reason.NONE``, or the WARNING reason INCOMPLETE_MSG (2242) /
        INCOMPLETE_GROUP (2241) when a logical message / group put or got through this
        handle is left incomplete (engine/groups.py); the handle is closed either way."""
        if self._closed:
            return Reason.NONE
        self._closed = True
        q = self.queue
        with q.mutex:
            if self._can_get:
                q.open_input -= 1
                if self.options & OO.INPUT_EXCLUSIVE:
                    q.open_exclusive = False
            if self._can_put:
                q.open_output -= 1
            q.open_handles -= 1
            browse.release(q, self._cursor)  # a browse lock ends with the handle (§5.4)
        self._conn._handles.discard(self)
        self._qm._dynamic.handle_closed(q)  # a temporary dynamic queue goes with its last handle
        return Reason.NONE if self._grp is None else groups.closed(self)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _closed_error(self) -> MQError:
        if self._conn._closed or self._qm.closed:
            self._conn._check()
        return MQError(Reason.HOBJ_ERROR, f"handle for {self.queue.name!r} is closed; open it again")

    # -- put -----------------------------------------------------------------------------

    def put(self, data: bytes, md: MD | None = None, options: PMO | int = 0) -> PutResult:
        """MQPUT. Returns the stored descriptor (with generated ids) and the MsgToken.

        Without SYNCPOINT the message is visible at once; with it, the message takes its
        place in the queue now and becomes visible at commit (seed 000).
        """
        # The checks of _put_prelude, written out: this is the put hot path.
        if self._closed:
            raise self._closed_error()
        if not self._can_put:
            raise MQError(Reason.NOT_OPEN_FOR_OUTPUT, f"open {self.queue.name!r} with OO.OUTPUT to put")
        opts = options if type(options) is int and 0 <= options <= _FLAGS_MAX else checks.flags(options, "put options")
        if opts:
            err = check_put(opts)
            if err:
                raise options_error(err)
            if opts & _PMO_LOGICAL_ORDER:
                return groups.put(self, data, md, opts)
        if self._grp is not None or (md is not None and getattr(md, "msg_flags", 0)):
            return groups.put(self, data, md, opts)  # a group or segment (engine/groups.py)
        q = self.queue
        if q.inhibit_put:
            raise MQError(Reason.PUT_INHIBITED, f"puts to {q.name!r} are inhibited (inhibit_put)")
        if type(data) is not bytes:
            data = _as_bytes(data)
        n = len(data)
        qm = self._qm
        if n > q.max_msg_length or n > qm.max_msg_length:
            self._too_big(n, q)
        syncpoint = opts & _PMO_SYNC
        if syncpoint and len(self._conn._uow.ops) >= qm.max_uncommitted:
            raise _syncpoint_limit(qm.max_uncommitted)
        reason = 0
        if md is None:
            extra = None
            priority = q.default_priority
            persistent = q.default_persistent
        else:
            extra, priority, persistent, reason = self._put_fields(md, opts, q)
        lane_i = q.default_priority if q.fifo else priority
        put_us = int(self._wall() * 1_000_000)
        with q.mutex:
            if q.depth >= q.max_depth:
                raise MQError(Reason.Q_FULL, f"{q.name!r} holds max_depth={q.max_depth} messages")
            seq = next(qm._seq)
            if extra is None:
                rec = _pack_head(_HEAD_LEN, priority, persistent, 0, seq, put_us) + data
            else:
                rec = record.encode(seq, put_us, priority, persistent, data, **extra)
            durable = persistent and q.journal is not None
            if durable:
                rec = record.pin_msg_id(rec, qm.ident)
                if not syncpoint:
                    q.journal.put(q, lane_i, [rec])  # before it joins the lane (2102: nothing put)
            # q._insert written out: this is the put hot path.
            if syncpoint:
                slot = q.lanes.append(q.lane_list[lane_i], rec, lane_i | UNCOMMITTED)
            else:
                slot = q.lanes.append(q.lane_list[lane_i], rec, lane_i)
                if q.waiters:
                    q._wake_for(rec)
            q.depth += 1
        if syncpoint:
            self._conn._uow.add_put(q, slot)
        elif durable:
            q.journal.wait()  # sync="commit": on disk before put returns
        if qm.recorder is not None:
            qm.recorder.put(q.name, n, priority, persistent)
        res = PutResult()
        res._rec = rec
        res._ident = qm.ident
        res.reason = reason
        return res

    def put_many(self, datas: Sequence[bytes], md: MD | None = None, options: PMO | int = 0) -> list[PutResult]:
        """MQPUT of many messages in one call: one lock, one validation of ``md`` and ``options``.

        Every message gets the same descriptor fields (``md``), its own MsgId (generated unless
        ``md.msg_id`` is set) and its own MsgToken, in the order given. The batch is all or
        nothing: if the queue cannot take every message (MAXDEPTH, 2053) or the unit of work
        every put (2024), none is put. Under PMO.SYNCPOINT every message joins the unit of work.
        Returns one PutResult per message, in order.
        """
        opts, q = self._put_prelude(options)
        qm = self._qm
        if isinstance(datas, bytes | bytearray | memoryview | str) or not hasattr(datas, "__len__"):
            raise MQError(Reason.PARM_VALUE_ERROR, "put_many takes a list (or tuple) of messages, each bytes")
        datas = [d if type(d) is bytes else _as_bytes(d) for d in datas]
        n = len(datas)
        if not n:
            return []
        longest = max(map(len, datas))
        if longest > q.max_msg_length or longest > qm.max_msg_length:
            self._too_big(longest, q)
        syncpoint = opts & _PMO_SYNC
        if syncpoint and len(self._conn._uow.ops) + n > qm.max_uncommitted:
            raise _syncpoint_limit(qm.max_uncommitted)
        reason = 0
        if md is None:
            extra = None
            priority = q.default_priority
            persistent = q.default_persistent
        else:
            extra, priority, persistent, reason = self._put_fields(md, opts, q)
            if opts & _PMO_NEW_CORREL_ID:
                raise options_error("put_many cannot generate a CorrelId per message; put them one by one")
        lane_i = q.default_priority if q.fifo else priority
        put_us = int(self._wall() * 1_000_000)
        pack = _pack_head
        with q.mutex:
            if q.depth + n > q.max_depth:
                raise MQError(
                    Reason.Q_FULL, f"{q.name!r} has room for {max(0, q.max_depth - q.depth)} of {n} messages; none put"
                )
            seq = qm._seq.__next__  # atomic per call: other queues' puts may interleave
            if extra is None:
                recs = [pack(_HEAD_LEN, priority, persistent, 0, seq(), put_us) + d for d in datas]
            else:
                recs = [record.encode(seq(), put_us, priority, persistent, d, **extra) for d in datas]
            durable = persistent and q.journal is not None
            if durable:
                recs = [record.pin_msg_id(r, qm.ident) for r in recs]
                if not syncpoint:
                    q.journal.put(q, lane_i, recs)  # all in one write, before any joins the lane
            state = (lane_i | UNCOMMITTED) if syncpoint else lane_i
            slots = q.lanes.extend(q.lane_list[lane_i], recs, state)
            q.depth += n
            if q.waiters and not syncpoint:
                for rec in recs:
                    if not q.waiters:
                        break
                    q._wake_for(rec)
        if syncpoint:
            add = self._conn._uow.add_put
            for slot in slots:
                add(q, slot)
        elif durable:
            q.journal.wait()
        if qm.recorder is not None:
            for d in datas:
                qm.recorder.put(q.name, len(d), priority, persistent)
        return PutResult.many(recs, qm.ident, reason)

    def _put_prelude(self, options) -> tuple[int, LocalQueue]:
        """The checks every put makes before looking at the data (written out again in
        :meth:`put`, the hot path): handle open for output, options valid, puts allowed."""
        if self._closed:
            raise self._closed_error()
        if not self._can_put:
            raise MQError(Reason.NOT_OPEN_FOR_OUTPUT, f"open {self.queue.name!r} with OO.OUTPUT to put")
        opts = options if type(options) is int and 0 <= options <= _FLAGS_MAX else checks.flags(options, "put options")
        if opts:
            err = check_put(opts)
            if err:
                raise options_error(err)
            if opts & _PMO_LOGICAL_ORDER:
                raise options_error("put_many does not put groups: put each message with put() and PMO.LOGICAL_ORDER")
        q = self.queue
        if q.inhibit_put:
            raise MQError(Reason.PUT_INHIBITED, f"puts to {q.name!r} are inhibited (inhibit_put)")
        return opts, q

    def _too_big(self, n: int, q: LocalQueue) -> None:
        qm = self._qm
        if n > qm.max_msg_length:
            raise MQError(
                Reason.MSG_TOO_BIG_FOR_Q_MGR,
                f"message of {n} bytes exceeds the queue manager's max_msg_length {qm.max_msg_length}",
            )
        raise MQError(
            Reason.MSG_TOO_BIG_FOR_Q,
            f"message of {n} bytes exceeds {q.name!r} max_msg_length {q.max_msg_length}",
        )

    def _put_fields(self, md: MD, opts: int, q: LocalQueue) -> tuple[dict, int, bool, int]:
        """Validate a caller's descriptor; return the record's optional fields and flags."""
        if not isinstance(md, MD):
            raise MQError(Reason.MD_ERROR, f"the descriptor must be an MD, not {type(md).__name__}")
        reason = 0
        priority = checks.integer(md.priority, "priority", Reason.PRIORITY_ERROR, -1)
        checks.integer(md.persistence, "persistence", Reason.PERSISTENCE_ERROR, 0, 2)
        checks.integer(md.expiry, "expiry (tenths of a second, -1 unlimited)", Reason.EXPIRY_ERROR, -1)
        checks.flags(md.msg_flags, "msg_flags", Reason.MSG_FLAGS_ERROR)
        checks.integer(md.msg_seq_number, "msg_seq_number", Reason.MSG_SEQ_NUMBER_ERROR, 1, 999_999_999)
        checks.integer(md.offset, "offset", Reason.OFFSET_ERROR, 0, 999_999_999)
        if priority == -1:
            priority = q.default_priority
        elif priority < -1:
            raise MQError(Reason.PRIORITY_ERROR, f"priority {priority}: use 0..9, or -1 for the queue default")
        elif priority > MAX_PRIORITY:
            priority, reason = MAX_PRIORITY, Reason.PRIORITY_EXCEEDS_MAXIMUM
        pers = md.persistence
        if pers == Persistence.AS_Q_DEF:
            persistent = q.default_persistent
        elif pers in (Persistence.PERSISTENT, Persistence.NOT_PERSISTENT):
            persistent = pers == Persistence.PERSISTENT
        else:
            raise MQError(Reason.PERSISTENCE_ERROR, f"persistence {pers}: use 0, 1 or 2 (as queue default)")
        if md.expiry != -1 and not 0 < md.expiry <= 999_999_999:
            raise MQError(
                Reason.EXPIRY_ERROR, f"expiry {md.expiry}: use -1 (unlimited) or 1..999999999 tenths of a second"
            )
        if md.msg_flags & ~0x1F:
            raise MQError(Reason.MSG_FLAGS_ERROR, f"msg_flags 0x{md.msg_flags:x} has unknown bits; use MF flags")
        if not 1 <= md.msg_seq_number <= 999_999_999:
            raise MQError(Reason.MSG_SEQ_NUMBER_ERROR, f"msg_seq_number {md.msg_seq_number} is outside 1..999999999")
        if not 0 <= md.offset <= 999_999_999:
            raise MQError(Reason.OFFSET_ERROR, f"offset {md.offset} is outside 0..999999999")
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
            extra["correl_id"] = b"SWQC" + self._qm.ident.run_id + next(self._qm._seq).to_bytes(8, "big")
        else:
            extra["correl_id"] = _fixed(md.correl_id, 24, "correl_id")
        group_id = _fixed(md.group_id, 24, "group_id")
        if md.msg_flags or md.msg_seq_number != 1 or md.offset or group_id != bytes(24):
            extra["group"] = (group_id, md.msg_seq_number, md.offset, md.msg_flags)
        return extra, priority, persistent, reason

    # -- get -----------------------------------------------------------------------------

    # Parameters are positional-or-keyword, not keyword-only, on purpose: CPython fills
    # missing keyword-only defaults by dict lookups, which cost ~170 ns on every get.
    def get(
        self,
        options: GMO | int = 0,
        wait_interval: int = -1,
        buffer_length: int | None = None,
        match: MO | int = MATCH_DEFAULT,
        msg_id: bytes | None = None,
        correl_id: bytes | None = None,
        group_id: bytes | None = None,
        msg_seq_number: int | None = None,
        offset: int | None = None,
        msg_token: bytes | None = None,
    ) -> Message:
        """MQGET: the first available message in delivery order that matches.

        ``options`` are GMO flags; ``wait_interval`` (ms, -1 = unlimited) applies with
        GMO.WAIT. ``match`` selects which of ``msg_id``, ``correl_id``, ``group_id``,
        ``msg_seq_number``, ``offset``, ``msg_token`` must equal the message's (MsgId and
        CorrelId by default, and NONE values match anything). ``buffer_length`` None means
        "any length"; a smaller message gives the 2079 / 2080 warnings on the result.
        Raises MQError 2033 when nothing matches (after the wait, with WAIT).

        Browse, cursor and lock options (BROWSE_FIRST / BROWSE_NEXT, [BROWSE_]MSG_UNDER_CURSOR,
        LOCK, UNLOCK) are served by engine/browse.py. ``GMO.UNLOCK`` returns a
        :class:`~sweepq.engine.browse.Status` (no message): its ``reason`` is NONE, or the
        warning NO_MSG_LOCKED (2209) when nothing was locked.
        """
        if self._closed:
            raise self._closed_error()
        opts = options if type(options) is int and 0 <= options <= _FLAGS_MAX else checks.flags(options, "get options")
        q = self.queue
        if opts:
            err = check_get(opts)
            if err:
                raise options_error(err)
            if opts & _CURSOR_ANY:
                if opts & _GROUP_GMO or self._gbrowse is not None:  # groups: engine/groups.py
                    args = (wait_interval, buffer_length, match, msg_id, correl_id, group_id, msg_seq_number, offset)
                    return groups.browse(self, opts, *args, msg_token)
                args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token)
                return browse.get(self, opts, wait_interval, buffer_length, *args)  # type: ignore[return-value]
        # Groups and segments (engine/groups.py): group options, or a group current on the get
        # side. A group being put on this handle does not change how it gets.
        if opts & _GROUP_GMO or (self._grp is not None and self._grp.get.current):
            args = (wait_interval, buffer_length, match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token)
            return groups.get(self, opts, *args)
        if not self._can_get:
            raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with an OO.INPUT_* option to get")
        if q.inhibit_get:
            raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
        qm = self._qm
        m = self._match
        if m is not None:
            m.searched.clear()  # a new get searches every blob again
        if (
            match != MATCH_DEFAULT
            or msg_id is not None
            or correl_id is not None
            or msg_token is not None
            or group_id is not None
        ):
            # (the same test as match_for_get's, written out: a plain get makes no call here)
            args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token, self._selector)
            m = match_for_get(qm.ident, opts, *args)
        # The checks of _get_prelude, written out: this is the get hot path.
        if buffer_length is not None:
            checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
        sync = wait = 0
        if opts:
            wait = opts & _WAIT
            if wait:
                checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
            uow = self._conn._uow
            if opts & _MARK_SKIP and uow.skip is not None:
                raise MQError(
                    Reason.SECOND_MARK_NOT_ALLOWED,
                    "this unit of work already has a get marked to skip backout; commit or back out first",
                )
            sync = opts & _SYNC
            if (sync or opts & _SYNC_IF_PERSISTENT) and len(uow.ops) >= qm.max_uncommitted:
                raise _syncpoint_limit(qm.max_uncommitted)
        poison_limit = q.poison_limit
        deadline = _UNSET
        while True:
            with q.mutex:
                # The first available message of the highest lane's front list, read here
                # without a call when it is there (the get hot path); q._find otherwise.
                ls = q.lanes
                ref = -1
                if m is None and ls.mask:
                    ref = ls.nxt[q.lane_list[ls.mask.bit_length() - 1].front]
                    if ref < _SENTINELS or ls.st[ref] >= _AVAILABLE_BELOW:
                        ref = -1
                if ref < 0:
                    ref = q._find(m)
                    if self._cursor is not None and self._cursor.lk_seq >= 0:
                        ref = browse.prefer_lock(q, self._cursor, m, ref)  # its own locked message
                if ref is None and wait:
                    if deadline is _UNSET:
                        deadline = None if wait_interval < 0 else qm.clock.now() + wait_interval / 1000.0
                    ref = self._wait(q, m, deadline)
                if ref is None:
                    raise MQError(Reason.NO_MSG_AVAILABLE, f"no message available on {q.name!r}")
                if type(ref) is Need:
                    need = ref
                else:
                    need = None
                    rec = q.lanes.recs[ref] if type(ref) is int else ref.rec
                    if rec[2] & _HAS_EXPIRY and self._expired(q, ref, rec):
                        continue  # discarded (docs/semantics.md §2.3): look again
                    if poison_limit and record.backout_of(rec) >= poison_limit and self._poison_ok(q):
                        q._hide(ref)  # off limits to everyone while it moves
                    else:
                        h = rec[0] or record.data_offset(rec)
                        reason = 0
                        if buffer_length is not None and len(rec) - h > buffer_length:
                            data = rec[h : h + buffer_length]
                            if not opts & _ACCEPT_TRUNCATED:
                                return Message.make(rec, qm.ident, data, Reason.TRUNCATED_MSG_FAILED)
                            reason = Reason.TRUNCATED_MSG_ACCEPTED
                        else:
                            data = rec[h:]
                        in_uow = opts and (sync or (opts & _SYNC_IF_PERSISTENT and rec[2] & record.PERSISTENT))
                        durable = rec[2] & _PERSISTENT and q.journal is not None and not in_uow
                        if in_uow:
                            q._hide(ref)
                        elif type(ref) is int:  # q._remove written out: the get hot path
                            if durable:
                                q.journal.remove(q, [ref])  # 2102: the message stays
                            lane = q.lanes.remove(ref)
                            q.depth -= 1
                            if lane.chain and lane.ready + lane.ahead < q.tier.readahead_low:
                                q.tier.readahead_locked(lane)
                        else:
                            q._remove(ref)
                        q.obtained += 1
                        break
            if need is not None:
                q.load(need)  # without the lock; then look again
            else:
                self._requeue_poison(q, ref, sync)
        if q.tier.cleanup:
            q.after_get()
        if in_uow:
            self._conn._uow.add_get(q, ref, mark_skip=bool(opts & _MARK_SKIP))
        elif durable:
            q.journal.wait()  # sync="commit": the removal is on disk before the message is returned
        if qm.recorder is not None:
            qm.recorder.get(q.name)
        msg = Message()
        msg._rec = rec
        msg._ident = qm.ident
        msg.reason = reason
        msg.data = data
        if rec[2] & _EXPIRY_OR_GROUP:
            if rec[2] & _HAS_EXPIRY:
                msg._now_us = int(self._wall() * 1_000_000)
            if rec[2] & record.HAS_GROUP:
                groups.after_get(self, rec, in_uow)  # the handle's logical position moves
        return msg

    def _get_prelude(self, opts: int, buffer_length, wait_interval) -> int:
        """The argument and unit-of-work checks every get makes (written out again in
        :meth:`get`, the hot path): buffer length, wait interval, one marked get per unit of
        work (2062), the syncpoint limit (2024). Returns the SYNCPOINT bit of ``opts``."""
        if buffer_length is not None:
            checks.integer(buffer_length, "buffer_length", Reason.BUFFER_LENGTH_ERROR, 0)
        if opts & _WAIT:
            checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
        uow = self._conn._uow
        if opts & _MARK_SKIP and uow.skip is not None:
            raise MQError(
                Reason.SECOND_MARK_NOT_ALLOWED,
                "this unit of work already has a get marked to skip backout; commit or back out first",
            )
        sync = opts & _SYNC
        if (sync or opts & _SYNC_IF_PERSISTENT) and len(uow.ops) >= self._qm.max_uncommitted:
            raise _syncpoint_limit(self._qm.max_uncommitted)
        return sync

    def get_many(self, max_messages: int, options: GMO | int = 0, wait_interval: int = -1) -> list[Message]:
        """MQGET of up to ``max_messages`` messages in one call: one lock, one validation.

        The messages come in delivery order, exactly as that many gets would return them
        (priority, FIFO, blobs brought back as needed); whole messages, so there is no
        truncation. Under GMO.SYNCPOINT (or SYNCPOINT_IF_PERSISTENT, per message) they join
        the unit of work. With GMO.WAIT the call waits up to ``wait_interval`` ms for the first
        message only. Unlike get, an empty result is not an error: it returns ``[]`` when
        nothing is available. Browse, match and group options belong to get; they are
        refused here with 2046, as is MARK_SKIP_BACKOUT (one marked get per unit of work).
        """
        if self._closed:
            raise self._closed_error()
        q = self.queue
        if not self._can_get:
            raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with an OO.INPUT_* option to get")
        checks.integer(max_messages, "max_messages", Reason.PARM_VALUE_ERROR, 1)
        opts = options if type(options) is int and 0 <= options <= _FLAGS_MAX else checks.flags(options, "get options")
        if opts:
            err = check_get(opts)
            if err:
                raise options_error(err)
            if opts & (_CURSOR_ANY | _MARK_SKIP | _GROUP_GMO):
                raise options_error("get_many takes plain destructive gets; use get() to browse, lock or mark")
        if q.inhibit_get:
            raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} are inhibited (inhibit_get)")
        wait = opts & _WAIT
        if wait:
            checks.integer(wait_interval, "wait_interval (ms; -1 waits for ever)", Reason.WAIT_INTERVAL_ERROR, -1)
        qm = self._qm
        sync = opts & _SYNC
        sync_if_persistent = opts & _SYNC_IF_PERSISTENT
        uow = self._conn._uow
        if (sync or sync_if_persistent) and len(uow.ops) + max_messages > qm.max_uncommitted:
            max_messages = qm.max_uncommitted - len(uow.ops)
            if max_messages < 1:
                raise _syncpoint_limit(qm.max_uncommitted)
        if q.poison_limit or self._match is not None or (self._cursor is not None and self._cursor.lk_seq >= 0):
            # get by get: each checked against the threshold or the selector, or this handle's lock seen
            return self._get_many_one_by_one(max_messages, opts, wait_interval)
        recs: list[bytes] = []
        held: list[int] = []  # slots hidden in the unit of work
        durable = False  # persistent messages removed: wait for their sync before returning
        deadline = _UNSET
        lanes = q.lanes
        while len(recs) < max_messages:
            need = None
            with q.mutex:
                ref = q._find(None)
                if ref is None and wait and not recs:
                    if deadline is _UNSET:
                        deadline = None if wait_interval < 0 else qm.clock.now() + wait_interval / 1000.0
                    ref = self._wait(q, None, deadline)
                if ref is None:
                    break
                if type(ref) is Need:
                    need = ref
                else:
                    run = lanes.available_run(ref, max_messages - len(recs))
                    got = list(map(lanes.recs.__getitem__, run))
                    if any(r[2] & _HAS_EXPIRY for r in got):
                        # Expiry is checked per message: take just the first, the loop goes on.
                        run, got = run[:1], got[:1]
                        if self._expired(q, ref, got[0]):
                            continue
                    lane = q.lane_list[lanes.st[ref] & 0x0F]
                    if sync or (sync_if_persistent and all(r[2] & record.PERSISTENT for r in got)):
                        lanes.hide_run(lane, run)
                        held += run
                    elif sync_if_persistent and any(r[2] & record.PERSISTENT for r in got):
                        run, got = run[:1], got[:1]  # mixed persistence: decide message by message
                        if got[0][2] & record.PERSISTENT:
                            lanes.hide(ref)
                            held.append(ref)
                        else:
                            q._remove(ref)
                            durable = q.journal is not None
                    else:
                        if q.journal is not None and any(r[2] & _PERSISTENT for r in got):
                            q.journal.remove(q, run)  # 2102: they stay
                            durable = True
                        lanes.detach_run(lane, run, sum(map(len, got)))
                        q.depth -= len(run)
                        if lane.chain and lane.ready + lane.ahead < q.tier.readahead_low:
                            q.tier.readahead_locked(lane)
                    q.obtained += len(run)
                    recs += got
            if need is not None:
                try:
                    q.load(need)
                except MQError:
                    if not recs:
                        raise
                    break  # what was taken is returned; the next call meets the error again
        if q.tier.cleanup:
            q.after_get()
        for slot in held:
            uow.add_get(q, slot)
        if durable:
            q.journal.wait()
        if qm.recorder is not None:
            for _ in recs:
                qm.recorder.get(q.name)
        return Message.many(recs, qm.ident)

    def _get_many_one_by_one(self, max_messages: int, opts: int, wait_interval: int) -> list[Message]:
        """get_many on a queue with poison-message handling: get by get, so each message is
        checked against the backout threshold as get checks it."""
        out: list[Message] = []
        while len(out) < max_messages:
            try:
                out.append(self.get(opts if not out else opts & ~_WAIT, wait_interval))
            except MQError as e:
                if e.reason != Reason.NO_MSG_AVAILABLE:
                    raise
                break
        return out

    def _expired(self, q: LocalQueue, ref: Ref, rec: bytes) -> bool:
        """Discard the message if it has expired (mutex held); say whether it did."""
        deadline = record.expiry_deadline_us(rec)
        if deadline is None or deadline > int(self._qm.clock.wall() * 1e6):
            return False
        q._remove(ref)
        q.expired += 1
        return True

    def _wait(self, q: LocalQueue, m, deadline: float | None) -> Ref | Need | None:
        """Block (mutex held) until a matching message is available or ``deadline`` (clock
        time; None: never) passes. A :class:`Need` comes back when a blob must be read first."""
        clock = self._qm.clock
        w = Waiter(threading.Condition(q.mutex), m)
        while True:
            if deadline is not None and clock.now() >= deadline:
                return None
            q.waiters.append(w)
            clock.wait(w.cond, deadline)
            if w in q.waiters:
                q.waiters.remove(w)
            if self._qm.closed:
                raise MQError(Reason.CONNECTION_BROKEN, "the queue manager was closed during the wait")
            if q.inhibit_get:
                raise MQError(Reason.GET_INHIBITED, f"gets from {q.name!r} were inhibited during the wait")
            if m is not None:
                m.searched.clear()  # woken: a blob searched before may hold a message backed out since
            ref = q._find(m)
            if ref is not None:
                return ref

    # -- transmission batches -----------------------------------------------------------------

    def assign_batch(self, max_messages: int) -> Batch:
        """Assign up to ``max_messages`` available messages of a transmission queue to a new
        channel batch (what a channel does); they count as obtained for the sweep rule."""
        if self._closed:
            raise self._closed_error()
        q = self.queue
        if not self._can_get:
            raise MQError(Reason.NOT_OPEN_FOR_INPUT, f"open {q.name!r} with an OO.INPUT_* option to assign batches")
        if q.attrs.usage != Usage.TRANSMISSION:
            raise MQError(Reason.Q_TYPE_ERROR, f"{q.name!r} is not a transmission queue (usage=TRANSMISSION)")
        checks.integer(max_messages, "max_messages", Reason.PARM_VALUE_ERROR, 1)
        batch_id = next(Batch._ids)
        taken: list[int] = []
        while True:
            with q.mutex:
                need = q._assign_batch(batch_id, max_messages, taken)
                if need is None:
                    if taken:
                        q.batches[batch_id] = taken
                    recs = [q.lanes.recs[i] for i in taken]
                    break
            q.load(need)
        q.after_get()
        return Batch(q, self._qm.ident, recs, batch_id)

    # -- poison messages (BOTHRESH / BOQNAME, docs/semantics.md §8.3) --------------------------

    def _poison_ok(self, q: LocalQueue) -> bool:
        """Can the backout requeue queue take a message now? (read without its lock: a
        change in between is caught when the put is made)."""
        boq = self._qm._queues.get(q.attrs.backout_requeue_q)
        return boq is not None and boq is not q and not boq.inhibit_put and boq.depth < boq.max_depth

    def _requeue_poison(self, q: LocalQueue, ref: Ref, sync: int) -> None:
        """Move a hidden poison message to the backout requeue queue, in the get's unit of
        work when the get is under syncpoint. Runs without q's lock (lock order)."""
        qm = self._qm
        boq = qm._queues.get(q.attrs.backout_requeue_q)
        with q.mutex:
            rec = q._record(ref)
        with boq.mutex if boq is not None else nullcontext():
            ok = boq is not None and not boq.deleted and boq.depth < boq.max_depth
            if ok:
                moved = record.rehome(rec, next(qm._seq), qm.ident)
                lane_i = boq.default_priority if boq.fifo else moved[record.OFF_PRIORITY]
                if not sync and boq.journal is not None and rec[2] & _PERSISTENT:
                    # One write moves the durable record from q to boq (q's copy is hidden).
                    batch = DurableBatch()
                    Journal.add_put(batch, boq, lane_i, moved)
                    Journal.add_removal(batch, q, ref)
                    try:
                        boq.journal.write(batch, f"moving a poison message to {boq.name!r}")
                    except MQError:
                        ok = False
            if ok:
                slot = boq._insert(moved, lane_i, (lane_i | UNCOMMITTED) if sync else lane_i)
        if not ok:
            # The requeue queue went away or filled up in between: the message reappears
            # and, since _poison_ok now says no, the get's next pass delivers it.
            with q.mutex:
                q._restore(ref, backout=False)
            return
        if sync:
            self._conn._uow.add_get(q, ref)
            self._conn._uow.add_put(boq, slot)
        else:
            with q.mutex:
                q._remove(ref, durable=False)  # its record moved with it above
            q.after_get()
            if boq.journal is not None and rec[2] & _PERSISTENT:
                boq.journal.wait()


class Batch:
    """Messages of a transmission queue assigned to one channel batch.

    They stay on the queue, invisible to gets and never swept (seed 003), until the batch
    is confirmed (they leave) or released (they are available again, in place)."""

    _ids = itertools.count(1)

    def __init__(self, queue: LocalQueue, ident, records: list[bytes], batch_id: int):
        self.id = batch_id
        self._queue = queue
        self.messages = [_message(rec, ident) for rec in records]
        self._open = bool(records)

    def __len__(self) -> int:
        return len(self.messages)

    def confirm(self) -> None:
        self._end(True)

    def release(self) -> None:
        self._end(False)

    def _end(self, confirmed: bool) -> None:
        if not self._open:
            return
        with self._queue.mutex:
            self._queue._end_batch(self.id, confirmed)  # 2102: still open, confirm again
        self._open = False


def _message(rec: bytes, ident) -> Message:
    return Message.make(rec, ident, record.data_of(rec))


def _syncpoint_limit(limit: int) -> MQError:
    return MQError(
        Reason.SYNCPOINT_LIMIT_REACHED,
        f"the unit of work holds max_uncommitted={limit} operations; commit or back out first",
    )
