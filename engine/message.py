"""What put and get return: the stored descriptor, the token, the data and any warning.

Both results decode the descriptor lazily from the message record, so a caller that only
wants the data pays for no descriptor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.cpython.bytes import PyBytes_FromStringAndSize

from . import record
from .constants import CC, MF, GroupStatus, Reason, SegmentStatus
from .record import MD, Identity, data_offset, tail


class _Viewed(Protocol):
    """What the views read: both results have these."""

    _ident: Identity
    _rec: bytes
    reason: int


class _Views:
    """The read-only views both results offer of their record, written once. Each result
    class takes them (``name = _Views.name``) instead of inheriting them: compiled, each is a
    class of its own with its own free list, which a subclass could not have, and a put and
    a get then allocate nothing but their bytes. Results have no Python ``__init__``: they
    are built field by field on the hot path, which is several times cheaper."""

    _ident: Identity
    _rec: bytes
    reason: int

    @property
    def completion_code(self: _Viewed) -> CC:
        return CC.WARNING if self.reason else CC.OK

    @property
    def record(self: _Viewed) -> bytes:
        """The message record (engine/record.py's layout) this result reads its fields from:
        what a client connection carries (net/protocol.py). A put's result over a client holds
        the record's header only; every field above reads from the header."""
        return self._rec

    @property
    def md(self: _Viewed) -> MD:
        """The full stored descriptor (decoded on each access; keep it if you reuse it). A
        message's remaining expiry is measured from when it was got."""
        return record.decode_md(self._rec, self._ident, getattr(self, "_now_us", None))

    @property
    def msg_id(self: _Viewed) -> bytes:
        return self._ident.msg_id(self._rec)

    @property
    def correl_id(self: _Viewed) -> bytes:
        return record.correl_id(self._rec)

    @property
    def msg_token(self: _Viewed) -> bytes:
        """The MsgToken: names this message instance until it leaves the queue."""
        return self._ident.token(self._rec)

    @property
    def priority(self: _Viewed) -> int:
        return self._rec[record.OFF_PRIORITY]

    @property
    def persistent(self: _Viewed) -> bool:
        return record.is_persistent(self._rec)

    @property
    def backout_count(self: _Viewed) -> int:
        return record.backout_of(self._rec)


class PutResult:
    """The outcome of a put: ``md`` (as stored, with generated ids), ``msg_token``, ``reason``
    (``Reason.NONE`` or the warning ``PRIORITY_EXCEEDS_MAXIMUM``)."""

    __slots__ = ("_ident", "_rec", "reason")
    _ident: Identity
    _rec: bytes
    reason: int

    completion_code = _Views.completion_code
    record = _Views.record
    md = _Views.md
    msg_id = _Views.msg_id
    correl_id = _Views.correl_id
    msg_token = _Views.msg_token
    priority = _Views.priority
    persistent = _Views.persistent
    backout_count = _Views.backout_count

    def __repr__(self) -> str:
        return f"PutResult(msg_id={self.msg_id.hex()}, reason={Reason(self.reason).name})"

    @staticmethod
    def many(records: list[bytes], ident: Identity, reason: int = 0) -> list[PutResult]:
        """One result per record (put_many)."""
        return put_results(records, ident, reason)


class Message:
    """A message returned by get.

    ``data`` is the message data (only the prefix that fits when truncated), made from the
    record when first read (a server that sends the record as it is makes none);
    ``data_length`` the full length; ``reason`` is ``Reason.NONE`` or a warning:
    ``TRUNCATED_MSG_ACCEPTED`` (2079: the message was removed, the rest of its data is
    gone) or ``TRUNCATED_MSG_FAILED`` (2080: the buffer was too small and the message is
    still on the queue; get it again with a larger ``buffer_length``).
    """

    __slots__ = ("_data", "_ident", "_now_us", "_rec", "item", "reason")
    _ident: Identity
    _rec: bytes
    reason: int
    _now_us: int | None
    _data: bytes | None  # None: the record's payload, made into ``data`` when first read
    item: object  # set only when has_item

    completion_code = _Views.completion_code
    record = _Views.record
    md = _Views.md
    msg_id = _Views.msg_id
    correl_id = _Views.correl_id
    msg_token = _Views.msg_token
    priority = _Views.priority
    persistent = _Views.persistent
    backout_count = _Views.backout_count

    @property
    @cython.locals(rec=bytes, data=bytes)
    def data(self) -> bytes:
        """The message data: the record's payload (a copy made at the first read, then kept),
        or the data the get gave (a truncated prefix, a reassembled message)."""
        data = self._data
        if data is None:
            rec = self._rec
            data = self._data = tail(rec, rec[0] or data_offset(rec))  # rec[0]: OFF_HLEN, 0 past 255 bytes
        return data

    @data.setter
    def data(self, value: bytes) -> None:
        self._data = value

    @property
    def read_at_us(self) -> int | None:
        """When the remaining expiry in ``md`` is measured (epoch microseconds), or None when
        the message has no expiry: a client connection carries it so that ``md.expiry`` reads
        the same on both sides."""
        return getattr(self, "_now_us", None)

    @property
    def has_item(self) -> bool:
        """Whether the message's payload is an item, the object ``sweepq.Queue`` put, kept as
        it is while in memory: it is then ``item`` (the very object), and ``data`` is empty
        (engine/record.py HAS_ITEM). A message that was swept comes back as bytes: the item's
        encoding, in ``data``."""
        return bool(self._rec[record.OFF_FLAGS] & record.HAS_ITEM)

    @property
    def data_length(self) -> int:
        """The full length of the message data, even when ``data`` was truncated."""
        rec = self._rec
        return len(rec) - (rec[0] or record.data_offset(rec))

    @classmethod
    def make(cls, rec: bytes, ident: Identity, data: bytes, reason: int = 0, now_us: int | None = None) -> Message:
        m = cls()
        m._rec = rec
        m._ident = ident
        m.reason = reason
        m._now_us = now_us
        m._data = data
        return m

    @staticmethod
    def many(records: list[bytes], ident: Identity) -> list[Message]:
        """One whole message per record (get_many)."""
        return messages(records, ident)

    @property
    def group_status(self) -> GroupStatus:
        flags = self.md.msg_flags
        if flags & MF.LAST_MSG_IN_GROUP:
            return GroupStatus.LAST_MSG_IN_GROUP
        if flags & MF.MSG_IN_GROUP:
            return GroupStatus.MSG_IN_GROUP
        return GroupStatus.NOT_IN_GROUP

    @property
    def segment_status(self) -> SegmentStatus:
        flags = self.md.msg_flags
        if flags & MF.LAST_SEGMENT:
            return SegmentStatus.LAST_SEGMENT
        if flags & MF.SEGMENT:
            return SegmentStatus.SEGMENT
        return SegmentStatus.NOT_A_SEGMENT

    def __repr__(self) -> str:
        return f"Message(priority={self.priority}, data_length={self.data_length}, reason={Reason(self.reason).name})"


def put_record(r: PutResult) -> bytes:
    """``r.record``, for the server's request path (net/session.py): compiled, a C call where
    the property is an attribute lookup."""
    return r._rec


def message_record(m: Message) -> bytes:
    """``m.record``, for the server's request path, as :func:`put_record`."""
    return m._rec


def message_read_at_us(m: Message) -> int | None:
    """``m.read_at_us``, for the server's request path, as :func:`put_record`."""
    return m._now_us if COMPILED else getattr(m, "_now_us", None)


def own_data(m: Message) -> bytes | None:
    """``m.data`` when it is not the record's payload as it lies (a truncated prefix, a
    reassembled message), else None, without making the data: what the server's reply of a
    get carries beside the record (net/session.py)."""
    data = m._data
    if data is None:
        return None
    rec = m._rec
    return None if len(data) == len(rec) - data_offset(rec) else data


def put_results(records: Sequence[bytes], ident: Identity, reason: int = 0) -> list[PutResult]:
    """One result per record (put_many), built without a Python-level constructor."""
    out: list[PutResult] = []
    for rec in records:
        r = PutResult.__new__(PutResult)
        r._rec = rec
        r._ident = ident
        r.reason = reason
        out.append(r)
    return out


def messages(records: list[bytes], ident: Identity) -> list[Message]:
    """One whole message per record (get_many), built without a Python-level constructor."""
    out: list[Message] = []
    for rec in records:
        m = Message.__new__(Message)
        m._rec = rec
        m._ident = ident
        m.reason = 0
        m._data = None  # the record's payload, made when read (Message.data)
        out.append(m)
    return out


class _Lazy:
    """A list of results made on first use: the batch calls return one, so that a caller
    that does not read its results (a producer that only puts, a drain that only counts)
    pays for none of them. Its length is known at once; anything else makes every result,
    once, and then it behaves as that list (index, slice, iteration, ``in``, ``==`` with a
    list, ``+``). It is not a ``list`` (no append: it is the call's answer, read-only)."""

    __slots__ = ("_list", "_n")
    _list: list | None
    _n: int

    def _build(self) -> list:
        raise NotImplementedError

    def _made(self) -> list:
        out = self._list
        if out is None:
            out = self._list = self._build()
        return out

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int | slice) -> Any:
        return self._made()[i]

    def __iter__(self) -> Iterator:
        return iter(self._made())

    def __reversed__(self) -> Iterator:
        return reversed(self._made())

    def __contains__(self, x: object) -> bool:
        return x in self._made()

    def __eq__(self, other: object) -> bool:
        return self._made() == (other._made() if isinstance(other, _Lazy) else other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __add__(self, other: object) -> list:
        return self._made() + (other._made() if isinstance(other, _Lazy) else other)  # type: ignore[operator]

    def __radd__(self, other: object) -> list:
        return other + self._made()  # type: ignore[operator]

    def index(self, x: object) -> int:
        return self._made().index(x)

    def count(self, x: object) -> int:
        return self._made().count(x)

    def __repr__(self) -> str:
        return repr(self._made())


class PutResults(_Lazy):
    """What put_many returns: one :class:`PutResult` per message, in order, made on first use
    (:class:`_Lazy`) from the records put (``records[k]`` the ``k``-th message's; for a batch
    of plain messages, engine/record.py ``PlainRecords``, which makes each again from its
    fields, as the queue holds it)."""

    __slots__ = ("_ident", "_reason", "_recs")
    _ident: Identity
    _reason: int
    _recs: Sequence[bytes]

    def _build(self) -> list:
        return put_results(self._recs, self._ident, self._reason)


class Messages(_Lazy):
    """What get_many returns: one whole :class:`Message` per message taken, in delivery
    order, made on first use (:class:`_Lazy`), from the records the take copied back to back
    into one buffer (engine/core/lanes.py ``take_head_run``), or given made."""

    __slots__ = ("_buf", "_ends", "_ident", "_items", "_reason")
    _buf: bytearray | None
    _ends: Sequence[int] | None
    _items: list | None
    _ident: Identity
    _reason: int

    @cython.locals(start=cython.Py_ssize_t, end=cython.Py_ssize_t, k=cython.Py_ssize_t, m=Message, rec=bytes)
    def _build(self) -> list:
        buf = self._buf
        assert buf is not None, "made already"
        ends = self._ends
        items = self._items
        out: list[Message] = []
        start = 0
        for k in range(self._n):
            end = ends[k]  # type: ignore[index]
            rec = _span(buf, start, end)
            m = Message.__new__(Message)
            m._rec = rec
            m._ident = self._ident
            m.reason = self._reason
            m._data = None  # the record's payload, made when read (Message.data)
            if items is not None and rec[record.OFF_FLAGS] & record.HAS_ITEM:
                m.item = items[k]
            out.append(m)
            start = end
        self._buf = None  # the records live in the messages now
        return out


def put_results_of(records: Sequence[bytes], ident: Identity, reason: int = 0) -> PutResults:
    """The results of the messages put as ``records`` (put_many), made on first use."""
    r = PutResults.__new__(PutResults)
    r._list = None
    r._n = len(records)
    r._recs = records
    r._ident = ident
    r._reason = reason
    return r


def messages_taken(
    buf: bytearray, ends: Sequence[int], items: list | None, ident: Identity, reason: int = 0
) -> Messages:
    """The messages whose records are back to back in ``buf``, the ``k``-th ending at
    ``ends[k]`` (get_many), made on first use; ``items[k]`` is the item of one whose record
    has HAS_ITEM (``items`` None: none has); each with ``reason``."""
    m = Messages.__new__(Messages)
    m._list = None
    m._n = len(ends)
    m._buf = buf
    m._ends = ends
    m._items = items
    m._ident = ident
    m._reason = reason
    return m


def messages_of(made: list[Message]) -> Messages:
    """:class:`Messages` of the messages ``made``, made already."""
    m = Messages.__new__(Messages)
    m._list = made
    m._n = len(made)
    m._buf = None
    m._reason = 0
    return m


def _span(buf: bytearray, start: int, end: int) -> bytes:
    """``bytes(buf[start:end])``: compiled, one allocation and one copy."""
    if COMPILED:
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf) + start, end - start)
    return bytes(buf[start:end])


Sequence.register(PutResults)
Sequence.register(Messages)
