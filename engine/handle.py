"""Object handles (MQOPEN's Hobj): what an application holds, and what the engine knows of it.

:class:`Handle` is the application's side: it checks the options of each call and routes it
to the path that serves it: the put path (engine/putpath.py), the get path
(engine/getpath.py), browse cursors (engine/browse.py), groups and segments
(engine/groups/). Those modules work on the :class:`~sweepq.engine.handlestate.HandleState` the handle carries,
whose attributes are theirs to read and write; none of them touches the handle itself.

Thread safety: a handle belongs to its connection, and a connection serves one call at a
time (MQ's rule for a connection shared by threads without MQCNO_HANDLE_SHARE_*): a call
made while another call of the same connection is in progress on another thread fails at
once with MQRC_CALL_IN_PROGRESS (2219), before it changes anything. Different connections
never share any lock but the queues' own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from cython import compiled as COMPILED

from . import browse, checks, getpath, groups, putpath
from .constants import GMO, MAX_PRIORITY, MO, OO, PMO, Reason, Usage
from .errors import MQError, options_error
from .handlestate import HandleState, Owner
from .matching import MATCH_DEFAULT, MatchArgs, match_for_get
from .message import Message, Messages, PutResult, PutResults
from .options import check_get
from .putpath import check_target
from .record import MD

if TYPE_CHECKING:
    from .api import GetCall
    from .batch import Batch
    from .cursor import Status

_FLAGS_MAX = checks.FLAGS_MAX
_CURSOR_ANY = int(
    GMO.BROWSE_FIRST | GMO.BROWSE_NEXT | GMO.BROWSE_MSG_UNDER_CURSOR | GMO.MSG_UNDER_CURSOR | GMO.LOCK | GMO.UNLOCK
)
_GROUP_GMO = groups.GROUP_GMO  # LOGICAL_ORDER, COMPLETE_MSG, ALL_*_AVAILABLE
_MARK_SKIP = int(GMO.MARK_SKIP_BACKOUT)
_PMO_LOGICAL = int(PMO.LOGICAL_ORDER)
_MAX_PRIORITY = MAX_PRIORITY
_WHOLE = object()  # Handle.take_item: not the hot case, get()'s whole path serves it


class Handle:
    """An open queue (MQOPEN's object handle): put, get, browse, close.

    Every method raises :class:`MQError` for a bad argument or state, with the reason MQ
    gives; the handle's connection serves one call at a time (2219 otherwise).
    """

    __slots__ = ("_s", "_token", "options", "queue")

    def __init__(self, state: HandleState, options: int):
        self._s = state
        self._token = state.conn.token
        self.queue = state.queue
        self.options = OO(options)

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def connection(self) -> Owner:
        """The connection this handle was opened on (its unit of work is the handle's)."""
        return self._s.conn

    def close(self) -> Reason:
        """MQCLOSE. Uncommitted work stays with the connection's unit of work; a browse lock
        ends (docs/semantics.md §5.4).

        Returns ``Reason.NONE``, or the WARNING reason INCOMPLETE_MSG (2242) /
        INCOMPLETE_GROUP (2241) when a logical message / group put or got through this
        handle is left incomplete (engine/groups/); the handle is closed either way.

        :raises MQError: HOBJ_ERROR (2019) when the handle is already closed."""
        s = self._s
        if s.closed:
            raise MQError(Reason.HOBJ_ERROR, f"handle for {self.queue.name!r} is already closed")
        with _Call(self._token):
            return s.conn.close_handle(self)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._s.closed:
            self.close()

    # -- put -----------------------------------------------------------------------------

    def put(self, data: bytes, md: MD | None = None, options: PMO | int = 0) -> PutResult:
        """MQPUT. Returns the stored descriptor (with generated ids) and the MsgToken.

        Without SYNCPOINT the message is visible at once; with it, the message takes its
        place in the queue now and becomes visible at commit (seed 000). A group, a segment
        or PMO.LOGICAL_ORDER goes through engine/groups/. The result's ``reason`` is NONE
        or a warning: PRIORITY_EXCEEDS_MAXIMUM (2049), a group warning (2241/2242/2245), or
        OUTCOME_PENDING (2124: a persistent put whose sync to disk failed; the message is on
        the queue and a later sync hardens it: do not put it again).
        """
        token = self._token
        try:  # _take_turn(token), written out: interpreted, a Python call fewer per call
            token.pop()
        except IndexError:
            raise _in_progress() from None
        try:
            s = self._s
            if s.closed:
                raise s.closed_error()
            if type(options) is int and not options:  # the default first: no range to test
                opts = 0
            elif type(options) is int and 0 <= options <= _FLAGS_MAX:
                opts = options
            else:
                opts = checks.flags(options, "put options")
            if opts:
                putpath.check_options(s, opts)
            if (
                (opts and opts & _PMO_LOGICAL)
                or s.groups is not None
                or (md is not None and getattr(md, "msg_flags", 0))
            ):
                return groups.put(s, data, md, opts)  # a group, a segment, or a group current here
            return putpath.put(s, data, md, opts)
        finally:
            token.append(True)

    def keep_items(self, encode: Callable[[object], bytes]) -> None:
        """Let this queue take items (:meth:`put_item`): Python objects kept as they are while
        they are in memory; ``encode(item) -> bytes`` makes the bytes a sweep writes to a blob,
        from which a get then returns a message with ``data`` (``sweepq.Queue``'s serializer).
        Its queue manager's other users see an item's message with empty ``data``."""
        if not callable(encode):
            raise MQError(Reason.PARM_VALUE_ERROR, f"encode must be callable, not {type(encode).__name__}")
        with _Call(self._token):
            check_target(self._s).keep_items(encode)

    def put_item(self, item: object, priority: int = -1) -> None:
        """Put ``item``, a Python object kept as it is while in memory (a get returns the very
        object: ``Message.has_item`` and ``Message.item``), not persistent, outside any unit
        of work, at ``priority`` (0..9; -1: the queue's default). What ``sweepq.Queue`` puts
        in memory; the queue must take items (:meth:`keep_items`, else Q_TYPE_ERROR 2057).

        :raises MQError: PRIORITY_ERROR (2050) for a priority outside -1..9; the put path's
            reasons (2039, 2051, 2053, 2071)."""
        token = self._token
        if COMPILED:  # _take_turn(token): compiled, the test and the pop are one step
            if not token:
                raise _in_progress()
            token.pop()
        else:  # interpreted, written out: a Python call fewer per call
            try:
                token.pop()
            except IndexError:
                raise _in_progress() from None
        try:
            if type(priority) is not int or not -1 <= priority <= _MAX_PRIORITY:
                checks.integer(priority, "priority", Reason.PRIORITY_ERROR, -1, _MAX_PRIORITY)
            putpath.put_item(self._s, item, priority)
        finally:
            token.append(True)

    def put_items(self, items: Sequence[object], priority: int = -1) -> None:
        """:meth:`put_item` of many items in one call, in order, all or none (MAXDEPTH 2053
        refuses the whole batch): one lock, one check.

        :raises MQError: PARM_VALUE_ERROR (3229) when ``items`` is not a list or tuple; what
            :meth:`put_item` raises."""
        if not isinstance(items, list | tuple):
            raise MQError(
                Reason.PARM_VALUE_ERROR, f"put_items takes a list or tuple of items, not {type(items).__name__}"
            )
        with _Call(self._token):
            checks.integer(priority, "priority", Reason.PRIORITY_ERROR, -1, _MAX_PRIORITY)
            putpath.put_items(self._s, items, priority)

    def put_many(self, datas: Sequence[bytes], md: MD | None = None, options: PMO | int = 0) -> PutResults:
        """MQPUT of many messages in one call: one lock, one validation of ``md`` and ``options``.

        Every message gets the same descriptor fields (``md``), its own MsgId (generated unless
        ``md.msg_id`` is set) and its own MsgToken, in the order given. The batch is all or
        nothing: if the queue cannot take every message (MAXDEPTH, 2053) or the unit of work
        every put (2024), none is put. Under PMO.SYNCPOINT every message joins the unit of work.
        Returns one PutResult per message, in order, as a read-only sequence that makes them
        when first read (engine/message.py ``PutResults``). Groups are put with :meth:`put`.
        """
        with _Call(self._token):
            s = self._s
            if s.closed:
                raise s.closed_error()
            opts = checks.flags(options, "put options")
            putpath.check_options(s, opts)
            if opts & int(PMO.LOGICAL_ORDER) or (md is not None and getattr(md, "msg_flags", 0)):
                raise options_error("put_many does not put groups or segments: put each message with put()")
            return putpath.put_many(s, datas, md, opts)

    # -- get -----------------------------------------------------------------------------

    def _get(
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
    ) -> Message | Status:
        """MQGET: the first available message in delivery order that matches.

        ``options`` are GMO flags; ``wait_interval`` (ms, -1 = unlimited) applies with
        GMO.WAIT. ``match`` selects which of ``msg_id``, ``correl_id``, ``group_id``,
        ``msg_seq_number``, ``offset``, ``msg_token`` must equal the message's (MsgId and
        CorrelId by default, and NONE values match anything). ``buffer_length`` None means
        "any length"; a smaller message gives the 2079 / 2080 warnings on the result.
        Raises MQError 2033 when nothing matches (after the wait, with WAIT).

        Browse, cursor and lock options (BROWSE_FIRST / BROWSE_NEXT, [BROWSE_]MSG_UNDER_CURSOR,
        LOCK, UNLOCK) are served by engine/browse.py; group options (LOGICAL_ORDER,
        COMPLETE_MSG, ALL_*_AVAILABLE) by engine/groups/. ``GMO.UNLOCK`` returns a
        :class:`~sweepq.engine.cursor.Status` (no message): its ``reason`` is NONE, or the
        warning NO_MSG_LOCKED (2209) when nothing was locked.
        """
        token = self._token
        try:  # _take_turn(token), written out: interpreted, a Python call fewer per call
            token.pop()
        except IndexError:
            raise _in_progress() from None
        try:
            s = self._s
            if type(options) is int and not options:  # the default first: no range to test
                opts = 0
            elif type(options) is int and 0 <= options <= _FLAGS_MAX:
                opts = options
            else:
                opts = checks.flags(options, "get options")
            if opts:
                err = check_get(opts)
                if err:
                    raise options_error(err)
                if opts & (_CURSOR_ANY | _GROUP_GMO):
                    args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token)
                    return _route_special(s, opts, wait_interval, buffer_length, args)
            if s.groups is not None and s.groups.get.current:
                args = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token)
                return groups.get(s, opts, wait_interval, buffer_length, args)
            if (
                match == MATCH_DEFAULT
                and msg_id is None
                and correl_id is None
                and msg_token is None
                and group_id is None
            ):
                m = s.match
                if m is not None:
                    m.searched.clear()  # a new get searches every blob again
            else:
                margs = (match, msg_id, correl_id, group_id, msg_seq_number, offset, msg_token, s.selector)
                m = match_for_get(s.qm.ident, opts, *margs)
            if opts or buffer_length is not None or s.closed or not s.can_get or s.queue.inhibit_get:
                getpath.check_call(s, opts, buffer_length, wait_interval)  # raises what is wrong
            return getpath.get(s, opts, wait_interval, buffer_length, m)
        finally:
            token.append(True)

    def take_item(self, decode: Callable[[bytes], object], empty: object = None) -> object:
        """The get of ``sweepq``'s in-memory doors: the next message, without waiting and
        outside any unit of work, as ``get()`` takes it, returned as what it holds: the very
        object a :meth:`put_item` put, or ``decode(data)`` of a message that holds data (an
        item swept and brought back, a put of bytes); ``empty`` when there is none, where
        ``get()`` raises NO_MSG_AVAILABLE (2033). No :class:`Message` is made for an item:
        the hot case takes one lock and nothing else (engine/getpath.py ``take_item``), and
        any other case is ``get()``'s whole path.

        :raises MQError: what ``get()`` raises, but 2033; what ``decode`` raises (the
            message is taken then)."""
        token = self._token
        if COMPILED:  # as put_item takes its turn
            if not token:
                raise _in_progress()
            token.pop()
        else:
            try:
                token.pop()
            except IndexError:
                raise _in_progress() from None
        try:
            s = self._s
            if s.closed or not s.can_get or s.queue.inhibit_get or s.groups is not None:
                out = _WHOLE
            else:
                out = getpath.take_item(s, decode, empty, _WHOLE)
        finally:
            token.append(True)
        if out is not _WHOLE:
            return out
        try:
            m = self._get(0)
        except MQError as e:
            if e.reason == Reason.NO_MSG_AVAILABLE:
                return empty
            raise
        return m.item if m.has_item else decode(m.data)  # type: ignore[union-attr]  # get(0) is a Message

    # What type checkers see of get: engine/api.py's GetCall (a Message, or a Status for
    # GMO.UNLOCK), the signature written once; at run time the function above.
    get = cast("GetCall", _get)

    def get_many(self, max_messages: int, options: GMO | int = 0, wait_interval: int = -1) -> Messages:
        """MQGET of up to ``max_messages`` messages in one call: one lock per run, one validation.

        The messages come in delivery order, exactly as that many gets would return them
        (priority, FIFO, blobs brought back as needed); whole messages, so there is no
        truncation. Under GMO.SYNCPOINT (or SYNCPOINT_IF_PERSISTENT, per message) they join
        the unit of work, up to what it can still hold (max_uncommitted). With GMO.WAIT the
        call waits up to ``wait_interval`` ms for the first message only. Unlike get, an
        empty result is not an error: it returns an empty one (equal to ``[]``) when nothing is
        available. The messages come as a read-only sequence that makes them when first read
        (engine/message.py ``Messages``). Under a
        memory budget that counts resident memory, it takes only what fits in the budget's
        room (engine/budget.py ``batch_limit``), so it may return fewer than are available;
        at least one when any is. Browse,
        match and group options belong to get; they are refused here with 2046, as is
        MARK_SKIP_BACKOUT (one marked get per unit of work).
        """
        with _Call(self._token):
            s = self._s
            checks.integer(max_messages, "max_messages", Reason.PARM_VALUE_ERROR, 1)
            opts = checks.flags(options, "get options")
            if opts:
                err = check_get(opts)
                if err:
                    raise options_error(err)
                if opts & (_CURSOR_ANY | _MARK_SKIP | _GROUP_GMO):
                    raise options_error("get_many takes plain destructive gets; use get() to browse, lock or mark")
            getpath.check_call(s, opts, None, wait_interval)
            if opts & (getpath.SYNC_ANY):
                max_messages = min(max_messages, s.qm.max_uncommitted - len(s.uow.ops))
            if s.queue.budget is not None and max_messages > 1:  # what a batch holds fits the budget's room
                max_messages = s.queue.budget.batch_limit(s.queue, max_messages)
            if s.queue.poison_limit or s.match is not None or (s.cursor is not None and s.cursor.lk_seq >= 0):
                return getpath.get_each(s, max_messages, opts, wait_interval)
            return getpath.get_many(s, max_messages, opts, wait_interval)

    # -- transmission batches ---------------------------------------------------------------

    def assign_batch(
        self, max_messages: int, wait_interval: int = 0, batch_interval: int = 0, fast_nonpersistent: bool = False
    ) -> Batch:
        """Assign up to ``max_messages`` available messages of a transmission queue to a new
        channel batch (what a sender channel does, net/channels/); they count as obtained for
        the sweep rule and are never swept while assigned (seed 003). ``wait_interval`` (ms,
        -1: unlimited) waits for the first message, ``batch_interval`` (ms) keeps the batch
        open for more after it; ``fast_nonpersistent`` takes non-persistent messages for good
        at once (engine/getpath.py ``assign_batch``). An empty batch when nothing came.

        :raises MQError: Q_TYPE_ERROR (2057) on a queue that is not a transmission queue;
            PARM_VALUE_ERROR (3229), WAIT_INTERVAL_ERROR (2090); the get path's own reasons."""
        with _Call(self._token):
            s = self._s
            getpath.check_call(s, 0, None, -1)
            q = self.queue
            if q.attrs.usage != Usage.TRANSMISSION:
                raise MQError(Reason.Q_TYPE_ERROR, f"{q.name!r} is not a transmission queue (usage=TRANSMISSION)")
            checks.integer(max_messages, "max_messages", Reason.PARM_VALUE_ERROR, 1)
            checks.integer(wait_interval, "wait_interval (ms; -1 unlimited)", Reason.WAIT_INTERVAL_ERROR, -1)
            checks.integer(batch_interval, "batch_interval (ms)", Reason.PARM_VALUE_ERROR, 0)
            checks.boolean(fast_nonpersistent, "fast_nonpersistent")
            return getpath.assign_batch(s, max_messages, wait_interval, batch_interval, fast_nonpersistent)

    def put_as_received(self, rec: bytes, options: PMO | int = 0) -> PutResult:
        """MQPUT with SET_ALL_CONTEXT of a message a channel received: ``rec`` is the message's
        record (engine/record.py) as the sending queue manager had it; it is put with every
        descriptor field it holds (MsgId, CorrelId, put time, expiry, properties, groups) and
        a new arrival number of this queue manager, its backout count 0. What a receiving
        channel (net/channels/) does with each message.

        :raises MQError: MD_ERROR (2026) for a record that is not one; the put path's own
            reasons (2051, 2053, 2030, 2031, 2048, 2024, 2102, ...)."""
        with _Call(self._token):
            opts = checks.flags(options, "put options")
            putpath.check_options(self._s, opts)
            return putpath.put_record(self._s, rec, opts)


def _route_special(
    s: HandleState, opts: int, wait_interval: int, buffer_length: int | None, args: MatchArgs
) -> Message | Status:
    """A get with cursor or group options: browse calls to engine/browse.py, unless they
    carry a group option or the handle is in a logical-order browse pass (engine/groups/);
    destructive group calls to engine/groups/."""
    if opts & _CURSOR_ANY:
        if opts & _GROUP_GMO or s.gbrowse is not None:
            return groups.browse(s, opts, wait_interval, buffer_length, args)
        return browse.call(s, opts, wait_interval, buffer_length, args)
    return groups.get(s, opts, wait_interval, buffer_length, args)


class _Call:
    """The connection's one-call-at-a-time rule as a context manager: the call takes the
    connection's one token (:func:`_take_turn`) and gives it back when it ends. The hot paths
    (put, get) take it and give it back themselves: a context manager costs two calls more."""

    __slots__ = ("token",)

    def __init__(self, token: list):
        self.token = token

    def __enter__(self) -> None:
        _take_turn(self.token)

    def __exit__(self, *exc: object) -> None:
        self.token.append(True)


def _take_turn(token: list) -> int:
    """Take the connection's one token (an atomic ``list.pop``), or fail with 2219: the one
    call at a time of a connection. The caller gives it back (``token.append(True)``). The hot
    calls (put, get, put_item, take_item) write these four lines out: interpreted, a Python
    call costs about as much as the rest of the check."""
    try:
        token.pop()
    except IndexError:
        raise _in_progress() from None
    return 0


def _in_progress() -> MQError:
    return MQError(
        Reason.CALL_IN_PROGRESS,
        "another call on this connection is in progress (on another thread): a connection serves one call at a "
        "time; give each thread its own connection",
    )
